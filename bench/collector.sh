#!/usr/bin/env bash
# bench/collector.sh — an OpenTelemetry Collector v0.165.0 built with ocb, and inferprobe's
# receiver side by side with it.
#
# 1. build: `go run go.opentelemetry.io/collector/cmd/builder@v0.165.0` (ocb) with the otlp
#    receiver, the batch processor, the otlp (gRPC), otlphttp and nop exporters and the env,
#    file and yaml confmap providers, all of the v0.165.0 / v1.71.0 release, into
#    bench/results/otelcol/otelcol (gitignored). An existing binary is reused (REBUILD=1 to
#    build again). The build is CPU-heavy: it runs under `nice -n 10`.
# 2. side by side (unless BUILD_ONLY=1): bench/receiverflood -compare runs the Collector
#    (otlp receiver → nop exporter), inferprobe's receiver on its real path (each span → its
#    infer.vllm_span record → an artifact file) and on its no-op path (spans that belong to no
#    run: decoded, then dropped), each pinned to one core (taskset -c $CPU, GOMAXPROCS=1), with
#    the same back-to-back senders (exports of 512 vLLM-like spans, HTTP protobuf and gRPC) and
#    prints spans/s per core and the ratios, RUNS times alternating.
#    With BASE=<commit>, the same side by side for that commit's receiver (its tree with this
#    tree's bench/receiverflood dropped in) and this tree's, alternating: RUNS times each of
#    `-compare -runs 1`, base then head, every line prefixed with its version.
#    The norun target is the daemon's sink with no run attached (bench/receiverflood/norun.go).
# 3. the interop test (receiver.TestCollectorInterop) when INTEROP=1.
#
#   RUNS=3 CPU=1 DURATION=3s [BASE=b0117d4] bash bench/collector.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=bench/results/otelcol
BIN="$OUT/otelcol"
mkdir -p "$OUT"
if [[ ! -x "$BIN" || "${REBUILD:-0}" == 1 ]]; then
  cat >"$OUT/builder.yaml" <<YAML
dist:
  name: otelcol
  description: inferprobe bench Collector (otlp receiver, batch, otlp/otlphttp/nop exporters)
  output_path: $(pwd)/$OUT/build
receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver v0.165.0
processors:
  - gomod: go.opentelemetry.io/collector/processor/batchprocessor v0.165.0
exporters:
  - gomod: go.opentelemetry.io/collector/exporter/otlpexporter v0.165.0
  - gomod: go.opentelemetry.io/collector/exporter/otlphttpexporter v0.165.0
  - gomod: go.opentelemetry.io/collector/exporter/nopexporter v0.165.0
providers:
  - gomod: go.opentelemetry.io/collector/confmap/provider/envprovider v1.71.0
  - gomod: go.opentelemetry.io/collector/confmap/provider/fileprovider v1.71.0
  - gomod: go.opentelemetry.io/collector/confmap/provider/yamlprovider v1.71.0
YAML
  nice -n 10 go run go.opentelemetry.io/collector/cmd/builder@v0.165.0 --config "$OUT/builder.yaml"
  cp "$OUT/build/otelcol" "$BIN"
fi
"$BIN" components >"$OUT/components.txt"
grep -E "^(receivers|processors|exporters):|- name:" "$OUT/components.txt" | tr -s " " | paste -sd " " -
[[ "${BUILD_ONLY:-0}" == 1 ]] && exit 0
go build -o "$OUT/receiverflood" ./bench/receiverflood
if [[ -n "${BASE:-}" ]]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/base"
  git archive "$BASE" | tar -x -C "$tmp/base"
  rm -rf "$tmp/base/bench/receiverflood"
  cp -r bench/receiverflood "$tmp/base/bench/receiverflood"
  (cd "$tmp/base" && go build -o "$tmp/base.rf" ./bench/receiverflood)
  echo "load before: $(uptime)"
  for i in $(seq "${RUNS:-3}"); do
    for v in base head; do
      bin="$OUT/receiverflood"; [[ $v == base ]] && bin="$tmp/base.rf"
      "$bin" -compare -collector "$BIN" -runs 1 -taskset "${CPU-1}" -procs 1 -calibrate "${DURATION:-3s}" 2>&1 | sed "s/^/$v run $i: /"
    done
  done
  echo "load after: $(uptime)"
  exit 0
fi
"$OUT/receiverflood" -compare -collector "$BIN" -runs "${RUNS:-3}" -taskset "${CPU-1}" -procs 1 -calibrate "${DURATION:-3s}"
if [[ "${INTEROP:-0}" == 1 ]]; then
  INFERPROBE_COLLECTOR="$(pwd)/$BIN" go test -count=1 -run TestCollectorInterop -v ./receiver/
fi
