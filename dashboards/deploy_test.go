package dashboards

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/daemon"
	"go.yaml.in/yaml/v3"
)

// deployDir is the repository's deploy/ directory, relative to this package.
const deployDir = "../deploy"

// yamlDocs decodes every document of a (multi-document) YAML file.
func yamlDocs(b []byte) ([]any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var docs []any
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if v != nil {
			docs = append(docs, v)
		}
	}
}

// get walks maps (by string key) and slices (by int index); nil when a step is missing.
func get(v any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			s, ok := v.([]any)
			if !ok || k >= len(s) {
				return nil
			}
			v = s[k]
		}
	}
	return v
}

func str(v any, keys ...any) string { s, _ := get(v, keys...).(string); return s }

func list(v any, keys ...any) []any { s, _ := get(v, keys...).([]any); return s }

func readDeploy(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func oneDoc(t *testing.T, rel string) any {
	t.Helper()
	docs, err := yamlDocs(readDeploy(t, rel))
	if err != nil || len(docs) != 1 {
		t.Fatalf("%s: %d documents, %v", rel, len(docs), err)
	}
	return docs[0]
}

// TestDeployYAMLParses: every YAML file under deploy/ parses; Kubernetes documents carry
// apiVersion, kind and metadata.name.
func TestDeployYAMLParses(t *testing.T) {
	var files int
	err := filepath.WalkDir(deployDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && filepath.Base(filepath.Dir(p)) == "helm" {
			return filepath.SkipDir // a chart's templates are Go templates: deploy/helm's tests render them
		}
		if err != nil || d.IsDir() || (!strings.HasSuffix(p, ".yml") && !strings.HasSuffix(p, ".yaml")) {
			return err
		}
		files++
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		docs, err := yamlDocs(b)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			return nil
		}
		if len(docs) == 0 {
			t.Errorf("%s: no YAML document", p)
		}
		if rel, _ := filepath.Rel(deployDir, p); strings.HasPrefix(rel, "kubernetes"+string(filepath.Separator)) {
			for i, doc := range docs {
				if str(doc, "apiVersion") == "" || str(doc, "kind") == "" || str(doc, "metadata", "name") == "" {
					t.Errorf("%s: document %d lacks apiVersion, kind or metadata.name", p, i)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 10 {
		t.Errorf("only %d YAML files under deploy/", files)
	}
}

// k8sObjects returns every Kubernetes document under deploy/kubernetes by kind.
func k8sObjects(t *testing.T) map[string][]any {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(deployDir, "kubernetes", "*.yaml"))
	out := map[string][]any{}
	for _, p := range paths {
		b, _ := os.ReadFile(p)
		docs, err := yamlDocs(b)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, d := range docs {
			out[str(d, "kind")] = append(out[str(d, "kind")], d)
		}
	}
	return out
}

func only(t *testing.T, objs map[string][]any, kind string) any {
	t.Helper()
	if len(objs[kind]) != 1 {
		t.Fatalf("want one %s under deploy/kubernetes, have %d", kind, len(objs[kind]))
	}
	return objs[kind][0]
}

func TestKubernetesManifests(t *testing.T) {
	objs := k8sObjects(t)
	cm, dep, svc, sm := only(t, objs, "ConfigMap"), only(t, objs, "Deployment"), only(t, objs, "Service"), only(t, objs, "ServiceMonitor")
	only(t, objs, "PrometheusRule")
	if str(sm, "apiVersion") != "monitoring.coreos.com/v1" || str(objs["PrometheusRule"][0], "apiVersion") != "monitoring.coreos.com/v1" {
		t.Error("ServiceMonitor / PrometheusRule not monitoring.coreos.com/v1")
	}

	// Deployment: serve with the ConfigMap's config, probes on /-/healthy and /-/ready.
	pod := get(dep, "spec", "template", "spec")
	c := get(pod, "containers", 0)
	podLabels, _ := get(dep, "spec", "template", "metadata", "labels").(map[string]any)
	if !reflect.DeepEqual(get(dep, "spec", "selector", "matchLabels"), any(podLabels)) || len(podLabels) == 0 {
		t.Errorf("Deployment selector %v does not match pod labels %v", get(dep, "spec", "selector", "matchLabels"), podLabels)
	}
	args := fmt.Sprint(list(c, "args"))
	if args != "[serve --config /etc/inferprobe/inferprobe.yaml]" {
		t.Errorf("container args %s", args)
	}
	if str(c, "livenessProbe", "httpGet", "path") != "/-/healthy" || str(c, "readinessProbe", "httpGet", "path") != "/-/ready" {
		t.Errorf("probes: liveness %q readiness %q", str(c, "livenessProbe", "httpGet", "path"), str(c, "readinessProbe", "httpGet", "path"))
	}
	ports := map[string]int{}
	for _, p := range list(c, "ports") {
		ports[str(p, "name")], _ = get(p, "containerPort").(int)
	}
	if want := map[string]int{"metrics": 9464, "otlp-grpc": 4317, "otlp-http": 4318}; !maps.Equal(ports, want) {
		t.Errorf("container ports %v, want %v", ports, want)
	}
	var configMounted bool
	for _, m := range list(c, "volumeMounts") {
		for _, v := range list(pod, "volumes") {
			if str(v, "name") == str(m, "name") && str(v, "configMap", "name") == str(cm, "metadata", "name") &&
				str(m, "mountPath") == "/etc/inferprobe" {
				configMounted = true
			}
		}
	}
	if !configMounted {
		t.Errorf("ConfigMap %s is not mounted at /etc/inferprobe", str(cm, "metadata", "name"))
	}
	if r, _ := get(dep, "spec", "replicas").(int); r != 1 {
		t.Errorf("replicas %d, want 1 (a second replica doubles the load)", r)
	}

	// Service: exposes the three ports by name, selects the pods.
	if !reflect.DeepEqual(get(svc, "spec", "selector"), any(podLabels)) {
		t.Errorf("Service selector %v, pod labels %v", get(svc, "spec", "selector"), podLabels)
	}
	svcPorts := map[string]int{}
	for _, p := range list(svc, "spec", "ports") {
		svcPorts[str(p, "name")], _ = get(p, "port").(int)
		if _, ok := ports[str(p, "targetPort")]; !ok {
			t.Errorf("Service port %s targets unknown container port %q", str(p, "name"), str(p, "targetPort"))
		}
	}
	if !maps.Equal(svcPorts, ports) {
		t.Errorf("Service ports %v, container ports %v", svcPorts, ports)
	}

	// ServiceMonitor: selects the Service, scrapes its metrics port.
	svcLabels, _ := get(svc, "metadata", "labels").(map[string]any)
	for k, v := range get(sm, "spec", "selector", "matchLabels").(map[string]any) {
		if svcLabels[k] != v {
			t.Errorf("ServiceMonitor selects %s=%v; Service labels %v", k, v, svcLabels)
		}
	}
	if str(sm, "spec", "endpoints", 0, "port") != "metrics" || str(sm, "spec", "endpoints", 0, "path") != "/metrics" {
		t.Errorf("ServiceMonitor endpoint %v", get(sm, "spec", "endpoints", 0))
	}

	// ConfigMap: a valid daemon config with the same settings as the compose one.
	data := str(cm, "data", "inferprobe.yaml")
	k8sCfg := checkDaemonConfig(t, "kubernetes ConfigMap", []byte(data))
	composeCfg := checkDaemonConfig(t, "inferprobe/inferprobe.yaml", readDeploy(t, "inferprobe/inferprobe.yaml"))
	if !reflect.DeepEqual(k8sCfg, composeCfg) {
		t.Errorf("ConfigMap config differs from deploy/inferprobe/inferprobe.yaml:\n%+v\n%+v", k8sCfg, composeCfg)
	}
}

// prometheusRuleYAML renders the shipped rule files as one PrometheusRule (Prometheus Operator),
// keeping their comments: each file's groups, indented under spec.groups, in file-name order.
func prometheusRuleYAML() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`# Generated from dashboards/rules/*.yml by: go test ./dashboards -run TestPrometheusRule -update
# Do not edit; edit the rule files. The release label must match your Prometheus's ruleSelector.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: inferprobe
  labels:
    app.kubernetes.io/name: inferprobe
    release: kube-prometheus-stack
spec:
  groups:
`)
	rules := Rules()
	for _, name := range slices.Sorted(maps.Keys(rules)) {
		_, body, ok := bytes.Cut(rules[name], []byte("\ngroups:\n"))
		if !ok {
			return nil, fmt.Errorf("%s: no top-level groups:", name)
		}
		fmt.Fprintf(&b, "    # dashboards/rules/%s\n", name)
		for _, line := range strings.SplitAfter(string(body), "\n") {
			if strings.TrimSpace(line) != "" {
				b.WriteString("  ")
			}
			b.WriteString(line)
		}
		if !bytes.HasSuffix(b.Bytes(), []byte("\n")) {
			b.WriteByte('\n')
		}
	}
	return b.Bytes(), nil
}

// TestPrometheusRule: deploy/kubernetes/prometheusrule.yaml is the rule files, unchanged.
func TestPrometheusRule(t *testing.T) {
	want, err := prometheusRuleYAML()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(deployDir, "kubernetes", "prometheusrule.yaml")
	if *update {
		if err := os.WriteFile(p, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v; %s", err, regenerate)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is out of date with dashboards/rules (first difference at byte %d); %s", p, firstDiff(got, want), regenerate)
	}
	// Semantically: spec.groups is exactly the groups of every rule file.
	var pr struct {
		Spec ruleFile `yaml:"spec"`
	}
	if err := yaml.Unmarshal(want, &pr); err != nil {
		t.Fatal(err)
	}
	var groups []ruleGroup
	files := loadRules(t)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		groups = append(groups, files[name].Groups...)
	}
	if !reflect.DeepEqual(pr.Spec.Groups, groups) {
		t.Error("PrometheusRule spec.groups differ from the rule files' groups")
	}
}

// composeFile is the part of the Compose specification checked here.
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		Ports       []string          `yaml:"ports"`
		Build       struct {
			Context    string `yaml:"context"`
			Dockerfile string `yaml:"dockerfile"`
		} `yaml:"build"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

// mounts maps a service's container paths to host paths (relative to deploy/) or volume names.
func mounts(vols []string) map[string]string {
	out := map[string]string{}
	for _, v := range vols {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 {
			out[parts[1]] = parts[0]
		}
	}
	return out
}

func TestCompose(t *testing.T) {
	var c composeFile
	if err := yaml.Unmarshal(readDeploy(t, "docker-compose.yml"), &c); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"vllm", "inferprobe", "prometheus", "grafana", "dcgm-exporter"} {
		if _, ok := c.Services[s]; !ok {
			t.Errorf("service %s missing", s)
		}
	}
	// Every bind mount's source exists; every named volume is declared.
	for name, s := range c.Services {
		for target, src := range mounts(s.Volumes) {
			if strings.HasPrefix(src, ".") {
				if _, err := os.Stat(filepath.Join(deployDir, src)); err != nil {
					t.Errorf("%s: mount %s -> %s: %v", name, src, target, err)
				}
			} else if _, ok := c.Volumes[src]; !ok {
				t.Errorf("%s: volume %s not declared", name, src)
			}
		}
	}

	ip := c.Services["inferprobe"]
	if got := strings.Join(ip.Command, " "); got != "serve --config /etc/inferprobe/inferprobe.yaml" {
		t.Errorf("inferprobe command %q", got)
	}
	if mounts(ip.Volumes)["/etc/inferprobe/inferprobe.yaml"] != "./inferprobe/inferprobe.yaml" {
		t.Errorf("inferprobe config not mounted: %v", ip.Volumes)
	}
	if ip.Build.Context != ".." || ip.Build.Dockerfile != "deploy/Dockerfile" {
		t.Errorf("inferprobe build %+v", ip.Build)
	}

	// vLLM exports spans to inferprobe's gRPC receiver, serving the target's model.
	cfg := checkDaemonConfig(t, "inferprobe/inferprobe.yaml", readDeploy(t, "inferprobe/inferprobe.yaml"))
	vcmd := strings.Join(c.Services["vllm"].Command, " ")
	_, grpcPort, _ := net.SplitHostPort(cfg.Receiver.GRPCListen)
	if !strings.Contains(vcmd, "--otlp-traces-endpoint=grpc://inferprobe:"+grpcPort) {
		t.Errorf("vllm command %q does not send spans to inferprobe:%s", vcmd, grpcPort)
	}
	if c.Services["vllm"].Environment["OTEL_EXPORTER_OTLP_TRACES_INSECURE"] != "true" {
		t.Error("vllm: OTEL_EXPORTER_OTLP_TRACES_INSECURE is not true (the receiver is plaintext)")
	}
	for _, tg := range cfg.Targets {
		u, _ := url.Parse(tg.BaseURL)
		if _, ok := c.Services[u.Hostname()]; !ok {
			t.Errorf("target %s: host %s is not a compose service", tg.Name, u.Hostname())
		}
		if !strings.Contains(vcmd, "--model="+tg.Model) {
			t.Errorf("target %s: model %s is not what vllm serves (%s)", tg.Name, tg.Model, vcmd)
		}
	}

	// Prometheus gets the config and the rule files where rule_files points.
	prom := c.Services["prometheus"]
	pm := mounts(prom.Volumes)
	if pm["/etc/prometheus/prometheus.yml"] != "./prometheus/prometheus.yml" {
		t.Errorf("prometheus config mount: %v", prom.Volumes)
	}
	if !slices.Contains(prom.Command, "--enable-feature=exemplar-storage") {
		t.Error("prometheus: exemplar storage not enabled")
	}
	for _, g := range list(oneDoc(t, "prometheus/prometheus.yml"), "rule_files") {
		dir := path.Dir(path.Join("/etc/prometheus", g.(string)))
		if pm[dir] != "../dashboards/rules" {
			t.Errorf("rule_files %s resolves to %s, where %q is mounted, not ../dashboards/rules", g, dir, pm[dir])
		}
	}

	// Grafana: provisioning mounted; the dashboards provider reads the mounted dashboards.
	gm := mounts(c.Services["grafana"].Volumes)
	if gm["/etc/grafana/provisioning"] != "./grafana/provisioning" {
		t.Errorf("grafana provisioning mount: %v", gm)
	}
	provider := str(oneDoc(t, "grafana/provisioning/dashboards/inferprobe.yml"), "providers", 0, "options", "path")
	if gm[provider] != "../dashboards/grafana" {
		t.Errorf("dashboard provider path %s holds %q, not ../dashboards/grafana", provider, gm[provider])
	}
	dsDoc := oneDoc(t, "grafana/provisioning/datasources/prometheus.yml")
	if str(dsDoc, "datasources", 0, "type") != "prometheus" || str(dsDoc, "datasources", 0, "url") != "http://prometheus:9090" {
		t.Errorf("grafana datasource %v", get(dsDoc, "datasources", 0))
	}
}

func TestDockerfile(t *testing.T) {
	df := string(readDeploy(t, "Dockerfile"))
	for _, want := range []string{"go build", "./cmd/inferprobe", "EXPOSE 9464 4317 4318",
		`CMD ["serve", "--config", "/etc/inferprobe/inferprobe.yaml"]`} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	if !strings.HasPrefix(df, "# syntax=") {
		t.Error("Dockerfile: the syntax directive must be the first line")
	}
	if _, err := os.Stat("../cmd/inferprobe"); err != nil {
		t.Errorf("the Dockerfile builds ./cmd/inferprobe: %v", err)
	}
}

// TestPromtoolCheckConfig: deploy/prometheus/prometheus.yml passes promtool, with the shipped
// rule files placed where its rule_files point (as compose mounts them).
func TestPromtoolCheckConfig(t *testing.T) {
	promtool(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), readDeploy(t, "prometheus/prometheus.yml"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeFiles(filepath.Join(dir, "rules"), Rules()); err != nil {
		t.Fatal(err)
	}
	out := runPromtool(t, dir, "check", "config", "prometheus.yml")
	for name := range Rules() {
		if !strings.Contains(out, name) {
			t.Errorf("promtool check config did not check rule file %s:\n%s", name, out)
		}
	}
	if strings.Count(out, "SUCCESS") < 1+len(Rules()) {
		t.Errorf("promtool check config:\n%s", out)
	}
}

// daemonConfig is the `inferprobe serve` config format of the metric catalogue, decoded
// strictly so that a misspelt key fails.
type daemonConfig struct {
	Listen        string `yaml:"listen"`
	WebConfigFile string `yaml:"web_config_file"`
	Receiver      struct {
		HTTPListen string `yaml:"http_listen"`
		GRPCListen string `yaml:"grpc_listen"`
	} `yaml:"receiver"`
	Artifacts struct {
		Dir    string `yaml:"dir"`
		Keep   int    `yaml:"keep"`
		MaxAge string `yaml:"max_age"`
	} `yaml:"artifacts"`
	SLOs []struct {
		Name      string   `yaml:"name"`
		Criteria  []string `yaml:"criteria"`
		File      string   `yaml:"file"`
		Objective float64  `yaml:"objective"`
	} `yaml:"slos"`
	Targets []struct {
		Name           string `yaml:"name"`
		BaseURL        string `yaml:"base_url"`
		Endpoint       string `yaml:"endpoint"`
		Model          string `yaml:"model"`
		APIKeyEnv      string `yaml:"api_key_env"`
		MetricsURL     string `yaml:"metrics_url"`
		ScrapeInterval string `yaml:"scrape_interval"`
	} `yaml:"targets"`
	Probes []struct {
		Name       string         `yaml:"name"`
		Target     string         `yaml:"target"`
		SLO        string         `yaml:"slo"`
		Every      string         `yaml:"every"`
		Continuous bool           `yaml:"continuous"`
		Workload   map[string]any `yaml:"workload"`
		SpansDrain string         `yaml:"spans_drain"`
	} `yaml:"probes"`
}

// profileFlags are the flag names of `inferprobe profile`, read from its source; nil when the
// source is not readable (the workload key check is then skipped).
func profileFlags() map[string]bool {
	src, err := os.ReadFile("../cmd/inferprobe/profile.go")
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`\.\w+VarP?\(&\w+(?:\.\w+)*, "([a-z0-9-]+)"`).FindAllSubmatch(src, -1) {
		out[string(m[1])] = true
	}
	return out
}

var criterion = regexp.MustCompile(`^[a-z][a-z0-9_.]*:[0-9]+(\.[0-9]+)?$`)

func checkDaemonConfig(t *testing.T, where string, b []byte) daemonConfig {
	t.Helper()
	var c daemonConfig
	if err := strictYAML(b, &c); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	for _, addr := range []string{c.Listen, c.Receiver.HTTPListen, c.Receiver.GRPCListen} {
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host != "0.0.0.0" {
			t.Errorf("%s: listen address %q: want 0.0.0.0:<port> in a container (%v)", where, addr, err)
		}
		if _, err := strconv.Atoi(port); err != nil {
			t.Errorf("%s: port of %q: %v", where, addr, err)
		}
	}
	if c.Artifacts.Dir == "" || c.Artifacts.Keep < 0 {
		t.Errorf("%s: artifacts %+v", where, c.Artifacts)
	}
	durations := []string{c.Artifacts.MaxAge}
	slos, targets := map[string]bool{}, map[string]bool{}
	for _, s := range c.SLOs {
		if s.Name == "" || slos[s.Name] || (len(s.Criteria) == 0) == (s.File == "") || s.Objective <= 0 || s.Objective >= 1 {
			t.Errorf("%s: slo %+v: want a unique name, criteria or file, objective in (0,1)", where, s)
		}
		slos[s.Name] = true
		for _, cr := range s.Criteria {
			if !criterion.MatchString(cr) {
				t.Errorf("%s: slo %s: criterion %q is not KEY:MS", where, s.Name, cr)
			}
		}
	}
	for _, tg := range c.Targets {
		u, err := url.Parse(tg.BaseURL)
		if tg.Name == "" || targets[tg.Name] || tg.Model == "" || err != nil || u.Host == "" ||
			(u.Scheme != "http" && u.Scheme != "https") || u.User != nil || !strings.HasSuffix(u.Path, "/v1") {
			t.Errorf("%s: target %+v: want a unique name, a model and an http(s) …/v1 base_url without credentials", where, tg)
		}
		targets[tg.Name] = true
		durations = append(durations, tg.ScrapeInterval)
	}
	flags := profileFlags()
	for _, p := range c.Probes {
		if !targets[p.Target] || !slos[p.SLO] || (p.Every == "") == !p.Continuous || len(p.Workload) == 0 {
			t.Errorf("%s: probe %s: target %q / slo %q unknown, or not exactly one of every/continuous, or no workload", where, p.Name, p.Target, p.SLO)
		}
		durations = append(durations, p.Every, p.SpansDrain)
		for k := range p.Workload {
			if flags != nil && !flags[k] {
				t.Errorf("%s: probe %s: workload key %q is not an `inferprobe profile` flag", where, p.Name, k)
			}
		}
	}
	for _, d := range durations {
		if d == "" {
			continue
		}
		if _, err := time.ParseDuration(d); err != nil {
			t.Errorf("%s: %v", where, err)
		}
	}
	if len(c.SLOs) == 0 || len(c.Targets) == 0 || len(c.Probes) == 0 {
		t.Errorf("%s: needs at least one slo, target and probe", where)
	}
	return c
}

// TestDeployConfigsLoadInDaemon: the shipped daemon configs pass the daemon's own loader,
// workloads included.
func TestDeployConfigsLoadInDaemon(t *testing.T) {
	cm := only(t, k8sObjects(t), "ConfigMap")
	for where, data := range map[string][]byte{
		"deploy/inferprobe/inferprobe.yaml": readDeploy(t, "inferprobe/inferprobe.yaml"),
		"deploy/kubernetes/configmap.yaml":  []byte(str(cm, "data", "inferprobe.yaml")),
	} {
		c, err := daemon.Parse(data)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		if c.Listen != "0.0.0.0:9464" || c.GRPCListen != "0.0.0.0:4317" || c.HTTPListen != "0.0.0.0:4318" || len(c.Probes) == 0 {
			t.Errorf("%s: listen %s, receiver %s / %s, %d probes", where, c.Listen, c.GRPCListen, c.HTTPListen, len(c.Probes))
		}
	}
	if _, err := daemon.Parse(bytes.Replace(readDeploy(t, "inferprobe/inferprobe.yaml"), []byte("input-tokens:"), []byte("input-tokenz:"), 1)); err == nil {
		t.Error("a misspelt workload flag was accepted")
	}
}
