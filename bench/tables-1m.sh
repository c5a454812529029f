#!/usr/bin/env bash
# tables-1m.sh: the `inferprobe tables` benchmark of issue 14. It builds inferprobe, writes (or
# reuses) the realistic 1,000,000-request Poisson artifact of bench/analyze-1m.sh with
# bench/genartifact (about 1.5 GB, spans included), and runs
#   /usr/bin/time -v inferprobe tables FILE --output DIR --overwrite
# printing wall time, peak RSS and what was written (CSVs, PNGs, index.html, timeline.json).
# Target: ≤ 30 s and ≤ 2 GiB peak RSS.
#
# Usage: bench/tables-1m.sh [WORKDIR]   (default bench/results/tables-1m; REQUESTS=N overrides
# 1000000; ARTIFACT=FILE measures an existing artifact instead)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$root/bench/results/tables-1m}
requests=${REQUESTS:-1000000}
mkdir -p "$work"
file=${ARTIFACT:-$work/artifact-$requests.jsonl}
bin=$work/inferprobe
out=$work/tables

if [[ ! -x /usr/bin/time ]]; then
	echo "tables-1m: /usr/bin/time (GNU time) is required" >&2
	exit 2
fi

echo "building inferprobe and the generator ($(go version | awk '{print $3}'))"
(cd "$root" && go build -o "$bin" ./cmd/inferprobe && go build -o "$work/genartifact" ./bench/genartifact)

if [[ ! -s $file ]]; then
	echo "generating $requests requests into $file"
	"$work/genartifact" -out "$file.tmp" -requests "$requests" -cases 2 -seed 1
	mv "$file.tmp" "$file"
fi
echo "artifact: $(du -h "$file" | cut -f1)"

# Warm the page cache so the figure measures tables, not the disk.
cat "$file" >/dev/null

/usr/bin/time -v "$bin" tables "$file" --output "$out" --overwrite >"$work/stdout.txt" 2>"$work/time.txt" || {
	cat "$work/time.txt" >&2
	exit 1
}
wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/time.txt")
rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time.txt")
secs=$(echo "$wall" | awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }')
cpu_user=$(awk -F': ' '/User time/ {print $2}' "$work/time.txt")
cpu_sys=$(awk -F': ' '/System time/ {print $2}' "$work/time.txt")
printf 'tables: wall %.2f s, user %s s, sys %s s, peak RSS %.0f MiB (%.2f GiB)\n' \
	"$secs" "$cpu_user" "$cpu_sys" "$(echo "$rss_kb / 1024" | bc -l)" "$(echo "$rss_kb / 1048576" | bc -l)"
echo "written: $(find "$out" -name '*.csv' | wc -l) CSVs, $(find "$out" -name '*.png' | wc -l) PNGs," \
	"request_metrics.csv $(du -h "$out/request_metrics.csv" | cut -f1), index.html $(du -h "$out/index.html" | cut -f1)," \
	"timeline.json $(du -h "$out/timeline.json" | cut -f1)"
ok=$(echo "$secs <= 30 && $rss_kb <= 2097152" | bc)
if [[ $ok == 1 ]]; then echo "within target (≤ 30 s, ≤ 2 GiB)"; else echo "OVER target (≤ 30 s, ≤ 2 GiB)"; fi
