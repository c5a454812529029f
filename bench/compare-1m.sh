#!/usr/bin/env bash
# compare-1m.sh: the `inferprobe compare` benchmark. It builds inferprobe, writes two
# 1,000,000-request Poisson artifacts of one workload with bench/genartifact (about 1.5 GB
# each; the candidate's every TTFT 3% slower: -ttft-scale 1.03), and runs
#   /usr/bin/time -v inferprobe compare BASE CANDIDATE --fail-on client.ttft.p99:+1% --format json
# printing wall time, user and sys CPU, peak RSS, and the TTFT verdict and gate outcome.
# Target: ≤ 15 s and ≤ 2 GiB. The runs are read one after the other (only one run's requests
# are held at a time), under the soft memory limit analyze uses (GOMEMLIMIT overrides it).
# On a shared host, wall time says more about the neighbours than about compare: the script
# therefore also times `inferprobe analyze` of each artifact, side by side with compare,
# RUNS times (default 1) alternating, and prints compare's wall and CPU time as a ratio of the
# two analyses' together (compare reads each run exactly as analyze does).
#
# Usage: bench/compare-1m.sh [WORKDIR]   (default bench/results/compare-1m; REQUESTS=N overrides 1000000)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$root/bench/results/compare-1m}
requests=${REQUESTS:-1000000}
mkdir -p "$work"
base=$work/base-$requests.jsonl
cand=$work/candidate-$requests.jsonl
bin=$work/inferprobe

if [[ ! -x /usr/bin/time ]]; then
	echo "compare-1m: /usr/bin/time (GNU time) is required" >&2
	exit 2
fi

echo "building inferprobe and the generator ($(go version | awk '{print $3}'))"
(cd "$root" && go build -o "$bin" ./cmd/inferprobe && go build -o "$work/genartifact" ./bench/genartifact)

for pair in "$base 1" "$cand 1.03"; do
	set -- $pair
	if [[ ! -s $1 ]]; then
		echo "generating $requests requests into $1 (TTFT × $2)"
		"$work/genartifact" -out "$1.tmp" -requests "$requests" -cases 2 -seed 1 -ttft-scale "$2"
		mv "$1.tmp" "$1"
	fi
done
echo "artifacts: $(du -h "$base" | cut -f1) and $(du -h "$cand" | cut -f1)"

# Warm the page cache so the figure measures compare, not the disk.
cat "$base" "$cand" >/dev/null

# timed LABEL ARGS...: one run of inferprobe ARGS under GNU time; sets secs, cpu and rss_kb.
timed() {
	local label=$1 code=0
	shift
	/usr/bin/time -v "$bin" "$@" >"$work/out.json" 2>"$work/time.txt" || code=$?
	if [[ $code != 0 && $code != 3 ]]; then
		cat "$work/time.txt" >&2
		exit 1
	fi
	local wall user sys
	wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/time.txt")
	rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time.txt")
	secs=$(echo "$wall" | awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }')
	user=$(awk -F': ' '/User time/ {print $2}' "$work/time.txt")
	sys=$(awk -F': ' '/System time/ {print $2}' "$work/time.txt")
	cpu=$(echo "$user + $sys" | bc -l)
	printf '%s (exit %d): wall %.2f s, CPU %.2f s (user %s, sys %s), peak RSS %.0f MiB (%.2f GiB)\n' \
		"$label" "$code" "$secs" "$cpu" "$user" "$sys" "$(echo "$rss_kb / 1024" | bc -l)" "$(echo "$rss_kb / 1048576" | bc -l)"
}

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for run in $(seq "${RUNS:-1}"); do
	timed "analyze base" analyze "$base" --format json
	a_secs=$secs a_cpu=$cpu
	timed "analyze candidate" analyze "$cand" --format json
	a_secs=$(echo "$a_secs + $secs" | bc -l) a_cpu=$(echo "$a_cpu + $cpu" | bc -l)
	timed "compare" compare "$base" "$cand" --fail-on client.ttft.p99:+1% --format json
	cp "$work/out.json" "$work/compare.json"
	printf 'run %d: compare / (analyze base + analyze candidate): wall %.2f, CPU %.2f\n' "$run" \
		"$(echo "$secs / $a_secs" | bc -l)" "$(echo "$cpu / $a_cpu" | bc -l)"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work/compare.json" <<'PY' 2>/dev/null || true
import json, sys
r = json.load(open(sys.argv[1]))
for c in r["cases"]:
    m = next(m for m in c["metrics"] if m["metric"] == "client.ttft")
    q = {x["level"]: x for x in m["quantiles"]}
    print(f"{c['case_id']}: client.ttft {m['verdict']}, p99 {q['p99']['relative']:+.2%} "
          f"[{q['p99']['relative_lower']:+.2%}, {q['p99']['relative_upper']:+.2%}] {q['p99']['verdict']}")
for g in r["gates"]:
    print(f"gate {g['gate']['spec']} {g['case_id']}: {g['outcome']}")
PY
ok=$(echo "$secs <= 15 && $rss_kb <= 2097152" | bc)
if [[ $ok == 1 ]]; then echo "within the target (≤ 15 s, ≤ 2 GiB)"; else echo "OVER the target (≤ 15 s, ≤ 2 GiB)"; fi
