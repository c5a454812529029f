#!/usr/bin/env bash
# analyze-1m.sh: the `inferprobe analyze` benchmark of issue 4. It builds inferprobe, writes a
# realistic 1,000,000-request Poisson artifact with bench/genartifact (about 1.5 GB; reused
# when it exists for the same request count), and runs
#   /usr/bin/time -v inferprobe analyze FILE --format json
# printing wall time, user and sys CPU, peak RSS and records/s (infer.request lines per wall
# second). Targets: ≤ 15 s and ≤ 1.5 GiB peak RSS (issue 4); ≤ 5 s and ≤ 1 GiB on a 2-core
# machine (issue 17). bench/analyze-1m-compare.sh measures a base revision beside the working
# tree and checks that their reports are byte-identical.
#
# analyze sets a soft memory limit of max(1 GiB, 3/4 of the artifact size) and turns GOGC off
# (the limit alone paces the collector) unless GOMEMLIMIT or GOGC is set
# (cmd/inferprobe/analyze.go); NO_LIMIT=1 adds a run with GOMEMLIMIT=off (so GOGC=100, no
# limit) to show the figure without them.
#
# Usage: bench/analyze-1m.sh [WORKDIR]   (default bench/results/analyze-1m; REQUESTS=N overrides 1000000)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$root/bench/results/analyze-1m}
requests=${REQUESTS:-1000000}
mkdir -p "$work"
file=$work/artifact-$requests.jsonl
bin=$work/inferprobe

if [[ ! -x /usr/bin/time ]]; then
	echo "analyze-1m: /usr/bin/time (GNU time) is required" >&2
	exit 2
fi

echo "building inferprobe and the generator ($(go version | awk '{print $3}'))"
(cd "$root" && go build -o "$bin" ./cmd/inferprobe && go build -o "$work/genartifact" ./bench/genartifact)

if [[ ! -s $file ]]; then
	echo "generating $requests requests into $file"
	start=$(date +%s.%N)
	"$work/genartifact" -out "$file.tmp" -requests "$requests" -cases 2 -seed 1
	mv "$file.tmp" "$file"
	echo "generated in $(echo "$(date +%s.%N) - $start" | bc) s"
fi
records=$(grep -c '"event_type":"infer.request"' "$file")
echo "artifact: $(du -h "$file" | cut -f1), $records infer.request lines"

# Warm the page cache so the figure measures analyze, not the disk.
cat "$file" >/dev/null

# measure LABEL [ENV...]: one timed analysis; sets secs and rss_kb.
measure() {
	local label=$1
	shift
	env "$@" /usr/bin/time -v "$bin" analyze "$file" --format json >"$work/report.json" 2>"$work/time.txt" || {
		cat "$work/time.txt" >&2
		exit 1
	}
	local wall cpu_user cpu_sys
	wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/time.txt")
	rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time.txt")
	# Elapsed is h:mm:ss or m:ss.ss
	secs=$(echo "$wall" | awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }')
	cpu_user=$(awk -F': ' '/User time/ {print $2}' "$work/time.txt")
	cpu_sys=$(awk -F': ' '/System time/ {print $2}' "$work/time.txt")
	printf '%s: wall %.2f s, user %s s, sys %s s, peak RSS %.0f MiB (%.2f GiB), %.0f records/s\n' \
		"$label" "$secs" "$cpu_user" "$cpu_sys" "$(echo "$rss_kb / 1024" | bc -l)" "$(echo "$rss_kb / 1048576" | bc -l)" \
		"$(echo "$records / $secs" | bc -l)"
}

if [[ ${NO_LIMIT:-} == 1 ]]; then
	measure "analyze --format json, GOMEMLIMIT=off" GOMEMLIMIT=off
fi
measure "analyze --format json"
python3 - "$work/report.json" <<'EOF' 2>/dev/null || true
import json, sys
r = json.load(open(sys.argv[1]))
s = r["summary"]
print(f"report: analysis_version {r['analysis_version']}, {s['total_requests']} requests, "
      f"{s['successful_requests']} ok, cases {s['case_count']}, cohorts valid: "
      f"{all(c['population']['cohort_valid'] for c in r['cases'].values())}")
EOF
ok=$(echo "$secs <= 15 && $rss_kb <= 1572864" | bc)
if [[ $ok == 1 ]]; then echo "within issue 4's target (≤ 15 s, ≤ 1.5 GiB)"; else echo "OVER issue 4's target (≤ 15 s, ≤ 1.5 GiB)"; fi
ok=$(echo "$secs <= 5 && $rss_kb <= 1048576" | bc)
if [[ $ok == 1 ]]; then echo "within issue 17's target (≤ 5 s, ≤ 1 GiB)"; else echo "OVER issue 17's target (≤ 5 s, ≤ 1 GiB)"; fi
