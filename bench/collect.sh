#!/usr/bin/env bash
# bench/collect.sh — CPU cost of `inferprobe collect-server` polling every 100 ms (issue 7:
# "Polling every 100 ms costs under 1% of one core").
#
# Builds inferprobe, starts `sleep` as a stand-in server, runs
#   /usr/bin/time -f '%U %S' inferprobe collect-server --no-gpu --interval 0.1 --duration DURATION
# and prints user+system CPU seconds, the share of one core over the wall duration, and the
# sample count. DURATION defaults to 10 seconds; INTERVAL (seconds) overrides 0.1.
#
# Usage: bench/collect.sh [WORKDIR]   (default bench/results/collect)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$root/bench/results/collect}
duration=${DURATION:-10}
interval=${INTERVAL:-0.1}
mkdir -p "$work"
bin=$work/inferprobe

if [[ ! -x /usr/bin/time ]]; then
	echo "collect: /usr/bin/time (GNU time) is required" >&2
	exit 2
fi
(cd "$root" && go build -o "$bin" ./cmd/inferprobe)

sleep $((${duration%.*} + 30)) &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT

out=$work/telemetry.jsonl
/usr/bin/time -o "$work/time.txt" -f '%U %S %e' "$bin" collect-server --run-id bench \
	--pid "$server" --output "$out" --no-gpu --interval "$interval" --duration "$duration"
read -r user sys wall <"$work/time.txt"
samples=$(wc -l <"$out")
awk -v u="$user" -v s="$sys" -v w="$wall" -v n="$samples" -v i="$interval" 'BEGIN {
	cpu = u + s
	printf "collect-server --no-gpu --interval %s: %d samples in %.2f s wall, CPU %.3f s (user %.2f + sys %.2f) = %.3f%% of one core\n",
		i, n, w, cpu, u, s, 100 * cpu / w
}'
