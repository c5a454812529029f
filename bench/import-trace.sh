#!/usr/bin/env bash
# import-trace.sh: the `inferprobe import-trace` benchmark of issue 13. It builds inferprobe
# and bench/gentrace, writes a synthetic 1 GiB Kineto trace of a vLLM worker (reused when it
# exists for the same size), a small artifact to append to, and runs
#   /usr/bin/time -v inferprobe import-trace ARTIFACT TRACE
# printing wall time, CPU time, peak RSS and MB/s of trace (trace bytes / wall seconds).
# Target: peak RSS ≤ 300 MiB and ≥ 50 MB/s. WITH_GZIP=1 also runs the gzip-compressed trace (gzip -1).
#
# Usage: bench/import-trace.sh [WORKDIR]   (default bench/results/import-trace; BYTES=N overrides 1073741824)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$root/bench/results/import-trace}
bytes=${BYTES:-1073741824}
mkdir -p "$work"
trace=$work/rank0.bench-$bytes.pt.trace.json
bin=$work/inferprobe

if [[ ! -x /usr/bin/time ]]; then
	echo "import-trace: /usr/bin/time (GNU time) is required" >&2
	exit 2
fi

echo "building inferprobe and the generator ($(go version | awk '{print $3}'))"
(cd "$root" && go build -o "$bin" ./cmd/inferprobe && go build -o "$work/gentrace" ./bench/gentrace)
if [[ ! -s $trace ]]; then
	"$work/gentrace" -bytes "$bytes" -o "$trace.tmp"
	mv "$trace.tmp" "$trace"
fi

run() {
	local file=$1 art=$work/artifact.jsonl
	printf '%s\n%s\n' \
		'{"event_type":"infer.artifact","schema_version":2,"context":{"run_id":"bench","session_id":"bench","producer_id":"inferprobe.profile","source":"inferprobe.profile","source_version":null,"host":"bench","pid":1,"rank":null,"local_rank":null,"world_size":null,"clock_domain":"bench/unix_epoch_ns","clock_kind":"wall","collection_mode":"active","provenance":"observed"},"event_id":"artifact","metadata":{"boot_id":null},"artifact_kind":"inference_jsonl","created_at_ns":1}' \
		'{"event_type":"infer.session","schema_version":1,"session_id":"bench","timestamp_ns":2,"status":"completed"}' >"$art"
	local size
	size=$(stat -c %s "$file")
	/usr/bin/time -v "$bin" import-trace "$art" "$file" >"$work/stdout" 2>"$work/time.txt"
	cat "$work/stdout"
	local wall user sys rss
	wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/time.txt" | awk -F: '{ if (NF==3) print $1*3600+$2*60+$3; else print $1*60+$2 }')
	user=$(awk -F': ' '/User time/ {print $2}' "$work/time.txt")
	sys=$(awk -F': ' '/System time/ {print $2}' "$work/time.txt")
	rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time.txt")
	local decompressed=$size
	[[ $file == *.gz ]] && decompressed=$(grep -o '"decompressed_bytes":[0-9]*' "$art" | head -1 | cut -d: -f2)
	awk -v f="$file" -v s="$size" -v d="$decompressed" -v w="$wall" -v u="$user" -v y="$sys" -v r="$rss" -v a="$(stat -c %s "$art")" 'BEGIN {
		printf "%s: %.0f MB on disk (%.0f MB of JSON), wall %.2f s, CPU %.2f s (user %.2f, sys %.2f), peak RSS %.1f MiB, %.1f MB/s of JSON (wall), %.1f MB/s (CPU), artifact grew to %.0f MB\n",
			f, s/1e6, d/1e6, w, u+y, u, y, r/1024, d/1e6/w, d/1e6/(u+y), a/1e6 }'
}

run "$trace"
if [[ ${WITH_GZIP:-0} == 1 ]]; then
	[[ -s $trace.gz ]] || gzip -1 -k -c "$trace" >"$trace.gz"
	run "$trace.gz"
fi
