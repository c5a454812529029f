#!/usr/bin/env bash
# bench/receiver-path.sh — the receiver's real path (span → infer.vllm_span record → artifact
# file), this tree against a base commit, side by side in one run.
#
# Builds the receiver's test binary twice: from this working tree, and from BASE (a commit,
# default the parent of the receiver limits work) with this tree's receiver/bench_test.go
# dropped in, so both run the same benchmarks. Then runs them alternately COUNT times on ONE
# core (-cpu 1: client, receiver, consumer and artifact writer share it) and prints each run
# and the median per benchmark and metric (spans/s wall, spans/cpu-s, artifact-B/span).
# spans/cpu-s is the steadier figure on a shared machine (it counts only this process's CPU).
#
#   BASE=40e53a8 COUNT=3 BENCHTIME=3s bash bench/receiver-path.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BASE="${BASE:-40e53a8}"
COUNT="${COUNT:-3}"
BENCH="${BENCH:-IngestHTTPProtobuf512File|IngestGRPC512File}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/base"
git archive "$BASE" | tar -x -C "$tmp/base"
cp receiver/bench_test.go "$tmp/base/receiver/bench_test.go"
(cd "$tmp/base" && go test -c -o "$tmp/base.test" ./receiver/)
go test -c -o "$tmp/head.test" ./receiver/
for i in $(seq "$COUNT"); do
  for v in base head; do
    "$tmp/$v.test" -test.run '^$' -test.bench "$BENCH" -test.benchtime "${BENCHTIME:-3s}" -test.cpu 1 \
      | grep '^Benchmark' | sed "s/^/$v /" | tee -a "$tmp/all.txt"
  done
done
echo
echo "median of $COUNT (base $BASE vs this tree):"
python3 - "$tmp/all.txt" <<'PY'
import sys, statistics, collections
vals = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    ver, name = f[0], f[1]
    for i in range(3, len(f) - 1):
        if f[i + 1] in ("spans/s", "spans/cpu-s", "artifact-B/span", "allocs/op", "B/op"):
            vals[(name, f[i + 1], ver)].append(float(f[i]))
names = sorted({(k[0], k[1]) for k in vals})
print(f"{'benchmark':40} {'metric':16} {'base':>12} {'head':>12} {'head/base':>9}")
for name, metric in names:
    b = statistics.median(vals.get((name, metric, "base"), [float("nan")]))
    h = statistics.median(vals.get((name, metric, "head"), [float("nan")]))
    print(f"{name:40} {metric:16} {b:12.0f} {h:12.0f} {h / b:9.2f}")
PY
