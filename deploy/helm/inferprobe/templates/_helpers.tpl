{{/* The name of every object: the release name, with "inferprobe" unless it already holds it. */}}
{{- define "inferprobe.fullname" -}}
{{- if contains "inferprobe" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-inferprobe" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The selector labels of the pod, the Service and the ServiceMonitor. */}}
{{- define "inferprobe.selectorLabels" -}}
app.kubernetes.io/name: inferprobe
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The labels of every object. */}}
{{- define "inferprobe.labels" -}}
{{ include "inferprobe.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}
