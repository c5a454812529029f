#!/usr/bin/env bash
# bench/overload.sh — client memory under a 2× overload with the default --max-in-flight.
#
# Starts `inferprobe sim` with a small batch (--max-num-seqs 32, 16 output tokens: a capacity of
# roughly 100–150 requests/s here), measures that capacity with a closed loop of 128 workers
# for 15 s, then profiles it with Poisson arrivals at FACTOR × capacity (default 2) for
# DURATION seconds (default 60) with the default --max-in-flight (128) and --overflow wait,
# and prints the client's peak RSS (GNU time's maximum resident set size), the requests it
# recorded and the report's held/dropped line. Goal: peak RSS < 256 MiB while it keeps
# recording.
#
#   DURATION=60 FACTOR=2 bash bench/overload.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-60}
FACTOR=${FACTOR:-2}
work=$(mktemp -d)
trap 'kill $simpid 2>/dev/null || true; rm -rf "$work"' EXIT
if [[ ! -x /usr/bin/time ]]; then echo "overload: /usr/bin/time (GNU time) is required" >&2; exit 2; fi
go build -o "$work/inferprobe" ./cmd/inferprobe
"$work/inferprobe" sim --listen 127.0.0.1:0 --max-num-seqs 32 --stop-prob 0 2>"$work/sim.log" &
simpid=$!
for _ in $(seq 50); do grep -q 'http://' "$work/sim.log" && break; sleep 0.1; done
url=$(grep -o 'http://[0-9.:]*' "$work/sim.log" | head -1)
common=(--base-url "$url/v1" --model inferprobe-sim --input-tokens 64 --output-tokens 16 --seed 1 --quiet
  --allow-client-limited)
field() { # field FILE KEY: KEY of the artifact's only case in `analyze --format json`
  "$work/inferprobe" analyze "$1" --format json | python3 -c 'import json, sys
c = next(iter(json.load(sys.stdin)["cases"].values()))
for k in sys.argv[1].split("."): c = c[k]
print(c)' "$2"
}
"$work/inferprobe" profile "${common[@]}" --arrival closed --concurrency 128 --duration 15 \
  --output "$work/capacity.jsonl" >/dev/null
capacity=$(field "$work/capacity.jsonl" throughput.requests_per_second)
rate=$(awk -v c="$capacity" -v f="$FACTOR" 'BEGIN { printf "%.0f", c * f }')
echo "sim capacity (closed loop, 128 workers): $capacity req/s; offering $rate req/s for ${DURATION}s"
/usr/bin/time -f '%M %U %S %e' -o "$work/time" "$work/inferprobe" profile "${common[@]}" --arrival poisson \
  --rate "$rate" --duration "$DURATION" --drain-timeout 10 --output "$work/overload.jsonl" >/dev/null
read -r rss_kb user sys wall <"$work/time"
recorded=$(grep -c '"event_type":"infer.request"' "$work/overload.jsonl" || true)
echo "peak RSS $((rss_kb / 1024)) MiB; $recorded requests recorded; client CPU $(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }') s in $wall s"
echo "held for a slot $(field "$work/overload.jsonl" client.held_for_slot), dropped $(field "$work/overload.jsonl" client.dropped), achieved $(field "$work/overload.jsonl" client.achieved_rate_per_second) req/s"
