#!/usr/bin/env bash
# bench/profile-rate.sh — the highest Poisson rate inferprobe profile sustains on this machine.
#
# Runs `inferprobe sim` (zero simulated latency) in a separate process and profiles it with
# Poisson arrivals, streaming 64 tokens per request, for DURATION seconds at each rate in
# RATES. For each rate it prints the scheduled vs achieved offered rate, dispatch-lag
# percentiles (bench/ratecheck) and the profile process's CPU seconds per 1,000 requests
# (user+sys from /usr/bin/time). A rate passes when achieved/scheduled is within 0.5% and
# dispatch lag p99 ≤ 1 ms.
#
#   RATES="200 400 800" DURATION=30 bash bench/profile-rate.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RATES=${RATES:-"200 400 600 800 1000 1200"}
DURATION=${DURATION:-30}
work=$(mktemp -d)
trap 'kill $simpid 2>/dev/null || true; rm -rf "$work"' EXIT
go build -o "$work/inferprobe" ./cmd/inferprobe
go build -o "$work/ratecheck" ./bench/ratecheck
"$work/inferprobe" sim --listen 127.0.0.1:0 --decode-step-base 0 --decode-step-per-seq 0 --prefill-tps 0 \
  --max-num-seqs 4096 2>"$work/sim.log" &
simpid=$!
for _ in $(seq 50); do grep -q 'http://' "$work/sim.log" && break; sleep 0.1; done
url=$(grep -o 'http://[0-9.:]*' "$work/sim.log" | head -1)
echo "sim at $url; ${DURATION}s per rate; $(nproc) cores"
for rate in $RATES; do
  out="$work/r$rate.jsonl"
  /usr/bin/time -f '%U %S' -o "$work/time" "$work/inferprobe" profile --base-url "$url/v1" --model inferprobe-sim \
    --arrival poisson --rate "$rate" --duration "$DURATION" --input-tokens 64 --output-tokens 64 \
    --extra-body '{"ignore_eos": true}' --max-in-flight 4096 --seed 1 --quiet --output "$out" >/dev/null || true
  read -r user sys <"$work/time"
  line=$("$work/ratecheck" "$out")
  n=$(grep '"event_type":"infer.request"' "$out" | grep -c '"phase":"measured"' || true)
  cpu=$(awk -v u="$user" -v s="$sys" -v n="$n" 'BEGIN { printf "%.3f", (u + s) * 1000 / n }')
  echo "rate=$rate requests=$n cpu_s_per_1000=$cpu $line"
done
