#!/usr/bin/env bash
# merge-shards.sh: the merge benchmark of issue 15. It writes one synthetic 1,000,000-request
# Poisson run twice with bench/genartifact — as one artifact, and as the artifacts of 8 shards
# of 125,000 requests each (-shards 8: the requests i ≡ K mod 8, as profile --shards 8 writes
# them) — and times
#   inferprobe analyze FILE --format json     (one host)
#   inferprobe analyze DIR  --format json     (the exact merge of the 8 shards)
# printing wall time and peak RSS of each and the ratio merge / single. The two reports are
# compared: apart from the shards block and the prompts_digest (the synthetic run's window
# digest is a stand-in; the merge recomputes the real one), they are equal.
#
# Usage: bench/merge-shards.sh [WORKDIR]   (default bench/results/merge-shards; REQUESTS=N, SHARDS=K override)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$root/bench/results/merge-shards}
requests=${REQUESTS:-1000000}
shards=${SHARDS:-8}
mkdir -p "$work"
single=$work/single-$requests.jsonl
dir=$work/shards-$requests-$shards
bin=$work/inferprobe

if [[ ! -x /usr/bin/time ]]; then
	echo "merge-shards: /usr/bin/time (GNU time) is required" >&2
	exit 2
fi
(cd "$root" && go build -o "$bin" ./cmd/inferprobe && go build -o "$work/genartifact" ./bench/genartifact)
[[ -s $single ]] || "$work/genartifact" -out "$single" -requests "$requests" -cases 2 -seed 1
[[ -s $dir/shard-0.jsonl ]] || "$work/genartifact" -out "$dir" -requests "$requests" -cases 2 -seed 1 -shards "$shards"
cat "$single" "$dir"/*.jsonl >/dev/null # warm the page cache

# measure LABEL INPUT OUT: one timed analysis; sets secs and rss_kb.
measure() {
	/usr/bin/time -v "$bin" analyze "$2" --format json >"$3" 2>"$work/time.txt" || { cat "$work/time.txt" >&2; exit 1; }
	local wall
	wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/time.txt")
	rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time.txt")
	secs=$(echo "$wall" | awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }')
	printf '%s: wall %.2f s, peak RSS %.0f MiB\n' "$1" "$secs" "$(echo "$rss_kb / 1024" | bc -l)"
}
measure "analyze 1 artifact of $requests" "$single" "$work/single.json"
s_secs=$secs s_rss=$rss_kb
measure "analyze $shards shards of $((requests / shards))" "$dir" "$work/merged.json"
printf 'ratio merge/single: wall %.2f, peak RSS %.2f\n' "$(echo "$secs / $s_secs" | bc -l)" "$(echo "$rss_kb / $s_rss" | bc -l)"
python3 - "$work/single.json" "$work/merged.json" <<'PY'
import json, sys
s, m = (json.load(open(p)) for p in sys.argv[1:])
m.pop("shards", None)
for c in list(s["cases"]) + list(m["cases"]):
    for r in (s, m):
        r["cases"].get(c, {}).get("prompts", {}).pop("prompts_digest", None)
print("reports equal apart from the shards block and prompts_digest:", s == m)
PY
