#!/usr/bin/env bash
# bench/receiver-flood.sh — does the span receiver hold its capacity under a flood? Base commit
# against this tree, side by side, alternating.
#
# Builds bench/receiverflood twice: from this working tree, and from BASE (default dfbae6c, the
# commit before the flood work) with this tree's bench/receiverflood/*.go dropped in, so both
# run the same flood against their own package receiver. Then, RUNS times, for each transport
# (OTLP/HTTP protobuf, OTLP/gRPC) and each of base and head in turn: a fresh receiver process
# (GOMAXPROCS=1, on its real path: each span's infer.vllm_span line written into an artifact
# file, pinned to core RECV_CPU; the senders pinned to SEND_CPU), its capacity measured with 4
# back-to-back senders of 512-span exports for CALIBRATE, then an open-loop flood at FACTOR
# (10) times that for FLOOD. Prints each run's RESULT line, then per version and transport the
# median (min–max) of: the capacity (spans/s), the spans/s accepted under the flood, their
# ratio, the same ratio per receiver CPU-second (what share of the CPU the receiver got does
# useful work: the steadier figure on a shared host, where the CPU the receiver gets moves with
# the load of others) and the peak RSS. The load average is printed before and after.
#
# Then (unless REFUSALS=0) the CPU one refused export costs: bench/receiverflood -refusals, the
# consumer never returning so the queue fills, 16 back-to-back senders whose every export is
# refused before it is read, 3 s, RUNS times per version and transport in turns.
#
#   BASE=dfbae6c RUNS=3 FACTOR=10 FLOOD=8s CALIBRATE=3s RECV_CPU=1 SEND_CPU=0 bash bench/receiver-flood.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BASE="${BASE:-dfbae6c}"
RUNS="${RUNS:-3}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/base"
git archive "$BASE" | tar -x -C "$tmp/base"
rm -rf "$tmp/base/bench/receiverflood"
cp -r bench/receiverflood "$tmp/base/bench/receiverflood"
(cd "$tmp/base" && go build -o "$tmp/base.rf" ./bench/receiverflood)
go build -o "$tmp/head.rf" ./bench/receiverflood
pin=()
if [[ -n "${SEND_CPU-0}" ]] && command -v taskset >/dev/null; then pin=(taskset -c "${SEND_CPU:-0}"); fi
echo "load before: $(uptime)"
for i in $(seq "$RUNS"); do
  for transport in http grpc; do
    for v in base head; do
      out="$("${pin[@]}" "$tmp/$v.rf" -json -procs 1 -taskset "${RECV_CPU-1}" -transport "$transport" \
        -factor "${FACTOR:-10}" -duration "${FLOOD:-8s}" -calibrate "${CALIBRATE:-3s}" 2>&1)" || true
      line="$(grep '^RESULT ' <<<"$out" || true)"
      if [[ -z "$line" ]]; then echo "$v $transport run $i failed:"; echo "$out" | tail -5; continue; fi
      echo "$v run $i ${line#RESULT }" | tee -a "$tmp/all.txt"
    done
  done
done
echo "load after: $(uptime)"
echo
echo "median (min–max) of $RUNS runs, base $BASE vs this tree; flood ${FACTOR:-10}x capacity for ${FLOOD:-8s}, GOMAXPROCS=1:"
python3 - "$tmp/all.txt" <<'PY'
import sys, json, statistics, collections
vals = collections.defaultdict(list)
for line in open(sys.argv[1]):
    ver, _, _, js = line.split(" ", 3)
    r = json.loads(js)
    for k in ("capacity_spans_s", "flood_accepted_spans_s", "ratio", "ratio_per_cpu_s", "peak_rss_mib"):
        vals[(r["transport"], ver, k)].append(r[k])
def f(v, pct=False):
    if not v: return "-"
    m, lo, hi = statistics.median(v), min(v), max(v)
    return f"{100*m:.0f}% ({100*lo:.0f}–{100*hi:.0f})" if pct else f"{m:,.0f} ({lo:,.0f}–{hi:,.0f})"
print(f"{'transport':9} {'version':7} {'capacity spans/s':26} {'flooded accepted spans/s':26} {'ratio':16} {'ratio per CPU-s':16} {'peak RSS MiB':16}")
for t in ("http", "grpc"):
    for v in ("base", "head"):
        g = lambda k: vals.get((t, v, k), [])
        print(f"{t:9} {v:7} {f(g('capacity_spans_s')):26} {f(g('flood_accepted_spans_s')):26} {f(g('ratio'), True):16} {f(g('ratio_per_cpu_s'), True):16} {f(g('peak_rss_mib')):16}")
PY
[[ "${REFUSALS:-1}" == 0 ]] && exit 0
echo
echo "receiver CPU per refused export (16 senders, queue full), $RUNS runs each:"
for i in $(seq "$RUNS"); do
  for transport in http grpc; do
    for v in base head; do
      echo "$v run $i $("$tmp/$v.rf" -refusals -procs 1 -clients 16 -duration 3s -transport "$transport" 2>&1 | tail -1)"
    done
  done
done
echo "load after the refusals: $(uptime)"
