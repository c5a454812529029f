#!/usr/bin/env bash
# bench/receiver-path.sh — the receiver's real path (span → infer.vllm_span record → artifact
# file), this tree against a base commit, side by side in one run.
#
# Builds the receiver's test binary twice: from this working tree, and from BASE (a commit,
# default the parent of the receiver limits work) with this tree's receiver/bench_test.go
# dropped in, so both run the same benchmarks. Then runs them alternately COUNT times on ONE
# core (-cpu 1: client, receiver, consumer and artifact writer share it) and prints each run
# the median and the best per benchmark and metric (spans/s wall, spans/cpu-s, artifact-B/span,
# ns/op, allocs/op). On a loaded shared machine the best of COUNT (highest rate, lowest cost) is
# the steadiest estimate of the uncontended figure: contention only ever slows a run down.
#
#   BASE=40e53a8 COUNT=7 BENCHTIME=1s bash bench/receiver-path.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BASE="${BASE:-40e53a8}"
COUNT="${COUNT:-7}"
BENCH="${BENCH:-IngestHTTPProtobuf512File|IngestGRPC512File|MarshalSpanRecord|WriteSpanRecord}"
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
        if f[i + 1] in ("spans/s", "spans/cpu-s", "artifact-B/span", "allocs/op", "B/op", "ns/op"):
            vals[(name, f[i + 1], ver)].append(float(f[i]))
names = sorted({(k[0], k[1]) for k in vals})
print(f"{'benchmark':36} {'metric':16} {'base med':>10} {'head med':>10} {'ratio':>6} {'base best':>10} {'head best':>10} {'ratio':>6}")
for name, metric in names:
    b = vals.get((name, metric, "base"), [float("nan")])
    h = vals.get((name, metric, "head"), [float("nan")])
    best = max if metric in ("spans/s", "spans/cpu-s") else min
    bm, hm, bb, hb = statistics.median(b), statistics.median(h), best(b), best(h)
    print(f"{name:36} {metric:16} {bm:10.0f} {hm:10.0f} {hm / bm:6.2f} {bb:10.0f} {hb:10.0f} {hb / bb:6.2f}")
PY
