#!/usr/bin/env bash
# analyze-1m-compare.sh: `inferprobe analyze` of the 1,000,000-request artifact at a base
# revision and at the working tree, side by side: RUNS (default 3) alternating runs of each,
#   /usr/bin/time -v inferprobe analyze FILE --format json
# each line giving wall, user and sys CPU, peak RSS and the load average before the run, then
# the median (min–max) of each. It also checks that the two builds' reports are
# byte-identical, JSON and text (exit 1 when they are not). The artifact is bench/analyze-1m.sh's
# (generated there once with bench/genartifact, reused).
#
# Usage: bench/analyze-1m-compare.sh [BASE_REV] [WORKDIR]
#   BASE_REV defaults to dfbae6c (the commit before the issue 17 work); WORKDIR to
#   bench/results/analyze-1m. REQUESTS=N overrides 1000000, RUNS=N the run count.
# The base is built from `git archive BASE_REV` (no checkout, no worktree).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
base_rev=${1:-dfbae6c}
work=${2:-$root/bench/results/analyze-1m}
requests=${REQUESTS:-1000000}
runs=${RUNS:-3}
file=$work/artifact-$requests.jsonl
mkdir -p "$work"

if [[ ! -x /usr/bin/time ]]; then
	echo "analyze-1m-compare: /usr/bin/time (GNU time) is required" >&2
	exit 2
fi
if [[ ! -s $file ]]; then
	echo "generating $requests requests into $file"
	(cd "$root" && go build -o "$work/genartifact" ./bench/genartifact)
	"$work/genartifact" -out "$file.tmp" -requests "$requests" -cases 2 -seed 1
	mv "$file.tmp" "$file"
fi

src=$work/base-src
rm -rf "$src" && mkdir -p "$src"
git -C "$root" archive "$base_rev" | tar -x -C "$src"
echo "building base $(git -C "$root" rev-parse --short "$base_rev") and head $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- . ':!bench/results' || echo '+changes') ($(go version | awk '{print $3}'))"
(cd "$src" && go build -o "$work/inferprobe-base" ./cmd/inferprobe)
(cd "$root" && go build -o "$work/inferprobe-head" ./cmd/inferprobe)

cat "$file" >/dev/null # warm the page cache

# the reports must not change
for b in base head; do
	"$work/inferprobe-$b" analyze "$file" --format json >"$work/report-$b.json"
	"$work/inferprobe-$b" analyze "$file" >"$work/report-$b.txt"
done
same=yes
cmp -s "$work/report-base.json" "$work/report-head.json" || same=no
cmp -s "$work/report-base.txt" "$work/report-head.txt" || same=no
echo "reports byte-identical (json and txt): $same"

# measure BUILD: one timed analysis, appending "wall user sys rss_mib load1" to $work/BUILD.runs
measure() {
	local b=$1 load
	load=$(awk '{print $1}' /proc/loadavg)
	/usr/bin/time -v "$work/inferprobe-$b" analyze "$file" --format json >/dev/null 2>"$work/time-$b.txt"
	awk -F': ' -v load="$load" '
		/Elapsed \(wall clock\)/ { n = split($2, t, ":"); wall = (n == 3) ? t[1]*3600 + t[2]*60 + t[3] : t[1]*60 + t[2] }
		/User time/ { user = $2 } /System time/ { sys = $2 } /Maximum resident set size/ { rss = $2 / 1024 }
		END { printf "%.2f %.2f %.2f %.0f %s\n", wall, user, sys, rss, load }' "$work/time-$b.txt" | tee -a "$work/$b.runs" |
		awk -v b="$b" '{ printf "%s: wall %.2f s, user %.2f s, sys %.2f s, peak RSS %d MiB, load1 %s\n", b, $1, $2, $3, $4, $5 }'
}
rm -f "$work/base.runs" "$work/head.runs"
echo "uptime before: $(uptime)"
for i in $(seq "$runs"); do
	measure base
	measure head
done
echo "uptime after: $(uptime)"

# summary: median (min–max) of each column
for b in base head; do
	for col in 1:wall:s 2:user:s 3:sys:s 4:rss:MiB 5:load1:; do
		IFS=: read -r c name unit <<<"$col"
		sort -g -k"$c","$c" "$work/$b.runs" | awk -v c="$c" -v name="$name" -v unit="$unit" -v b="$b" '
			{ v[NR] = $c } END { m = (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2
			printf "%s %s: %.2f (%.2f–%.2f) %s\n", b, name, m, v[1], v[NR], unit }'
	done
done
[[ $same == yes ]]
