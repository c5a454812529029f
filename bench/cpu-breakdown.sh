#!/usr/bin/env bash
# bench/cpu-breakdown.sh — where a CPU profile's samples went, by what the code was doing
# rather than by function: each sampled stack is put in the first category whose rule
# matches, and the categories are printed with their seconds and shares of all samples.
#
#   bash bench/cpu-breakdown.sh client BINARY PROFILE     # a profile run's --cpuprofile
#   bash bench/cpu-breakdown.sh receiver BINARY PROFILE   # go test -cpuprofile of ./receiver
#
# A rule is "name|leaf|stack": the stack's innermost frame must match the extended regular
# expression leaf, and some frame of it must match stack (an empty pattern matches anything).
# Rules are tried in order, so the kernel's share (the system calls themselves, whoever made
# them) comes first and the user-space categories share out the rest. The categories of a
# set add up to the profile's total: "other" holds what no rule took.
set -euo pipefail
usage() { echo "usage: bash bench/cpu-breakdown.sh client|receiver BINARY PROFILE" >&2; exit 2; }
[[ $# -eq 3 ]] || usage
set_name=$1 bin=$2 prof=$3
for f in "$bin" "$prof"; do
  [[ -f $f && -r $f ]] || { echo "cpu-breakdown.sh: $f: not a readable file" >&2; exit 2; }
done
syscall='Syscall6$|RawSyscall|EpollWait$|runtime\.futex$|runtime\.usleep$|runtime\.madvise$|runtime\.write1$|runtime\.read$|runtime\.mmap$|runtime\.munmap$'

case $set_name in
client)
  rules="kernel: reads (recvmsg, read)|$syscall|recvmsg|\\.Read$|\\.Read \\(inline\\)|\\.read$
kernel: writes (the requests, the artifact)|$syscall|syscall\\.Write|syscall\\.write|\\.Write$
kernel: netpoll (epoll_wait)|$syscall|netpoll
kernel: other system calls|$syscall|
SSE event JSON decode (loadgen/client.decodeChunk)||loadgen/client\\.decodeChunk
SSE parse (loadgen/sse)||loadgen/sse\\.
record encode and write (artifact)||inferprobe/artifact\\.
garbage collection||gcBgMarkWorker|gcAssist|gcDrain|gcStart|bgsweep|bgscavenge
allocation||mallocgc
goroutine scheduling||runtime\\.schedule$|findRunnable|park_m|runtime\\.mcall|goschedImpl|ready$
net/http, net, bufio (user space)||^net/http|^net\\.|internal/poll|^bufio\\.|net/textproto
stream bookkeeping (loadgen/client: stamps, answers)||inferprobe/loadgen/client
pacer, phases, records (loadgen, run)||inferprobe/loadgen|inferprobe/run
live report and exporter (analyze, exporter)||inferprobe/analyze|inferprobe/exporter"
  ;;
receiver)
  rules="kernel: system calls|$syscall|
protobuf decode (pdata)||pdata/internal|ptraceotlp.*Unmarshal|proto\\.Unmarshal|UnmarshalProto
pre-scan and skip scan (receiver)||receiver\\.\\(\\*?prescan|receiver\\.prescan|skipScanner|receiver\\.countExport|receiver\\.scan
wire to record conversion (receiver.convertProto)||receiver\\.convertProto|receiver\\.\\(\\*wireConverter\\)
record conversion from pdata (receiver.convertTraces)||receiver\\.convertTraces|receiver\\.convertSpan
span line: float formatting||artifact\\.appendFloat|artifact\\.appendFiniteFloat|strconv\\.
span line: everything else (artifact)||inferprobe/artifact\\.
garbage collection||gcBgMarkWorker|gcAssist|gcDrain|gcStart|bgsweep|bgscavenge
allocation||mallocgc
goroutine scheduling||runtime\\.schedule$|findRunnable|park_m|runtime\\.mcall|goschedImpl
HTTP and gRPC serving (net/http, grpc)||^net/http|google\\.golang\\.org/grpc|golang\\.org/x/net/http2|^net\\.|internal/poll|^bufio\\.
receiver admission, queue and consumer||inferprobe/receiver
benchmark client||receiver\\.Benchmark|receiver\\.bench|receiver\\.post|testing\\."
  ;;
*)
  echo "cpu-breakdown.sh: unknown set $set_name (client or receiver)" >&2
  exit 2
  ;;
esac

# Rules arrive as three parallel lists (split at \x1f) so that patterns may hold "|".
names= leaves= stacks=
while IFS= read -r line; do
  name=${line%%|*}
  rest=${line#*|}
  if [[ $rest == "$syscall|"* ]]; then
    leafpat=$syscall
    stackpat=${rest#"$syscall|"}
  else
    leafpat=
    stackpat=${rest#|}
  fi
  names+=$name$'\x1f'
  leaves+=$leafpat$'\x1f'
  stacks+=$stackpat$'\x1f'
done <<<"$rules"

traces=$(mktemp)
trap 'rm -f "$traces"' EXIT
if ! go tool pprof -traces "$bin" "$prof" >"$traces" 2>"$traces.err"; then
  echo "cpu-breakdown.sh: go tool pprof could not read $prof with $bin:" >&2
  cat "$traces.err" >&2
  rm -f "$traces.err"
  exit 1
fi
rm -f "$traces.err"
awk -v names="$names" -v leaves="$leaves" -v stacks="$stacks" '
function flush(   i, j, ok) {
  if (nf == 0) return
  for (i = 1; i <= nr; i++) {
    if (lp[i] != "" && frame[1] !~ lp[i]) continue
    ok = (sp[i] == "")
    for (j = 1; !ok && j <= nf; j++) if (frame[j] ~ sp[i]) ok = 1
    if (ok) { sum[i] += v; total += v; nf = 0; return }
  }
  other += v; total += v; nf = 0
}
BEGIN {
  nr = split(names, nm, "\x1f") - 1; split(leaves, lp, "\x1f"); split(stacks, sp, "\x1f")
}
/^-+\+-+$/ { flush(); next }
/^Duration:/ { print; next }
/^[ \t]+[0-9.]+(ns|us|ms|s)[ \t]/ {
  flush()
  x = $1; unit = x; sub(/[0-9.]+/, "", unit); sub(/[a-z]+$/, "", x)
  v = x * (unit == "s" ? 1 : unit == "ms" ? 1e-3 : unit == "us" ? 1e-6 : 1e-9)
  $1 = ""; sub(/^[ \t]+/, ""); frame[nf = 1] = $0; next
}
/^[ \t]+[^ \t]/ { if (nf > 0) { s = $0; sub(/^[ \t]+/, "", s); frame[++nf] = s }; next }
END {
  flush()
  if (total == 0) { print "no samples"; exit 1 }
  for (i = 1; i <= nr; i++) printf "%8.2f s  %5.1f%%  %s\n", sum[i], 100 * sum[i] / total, nm[i]
  printf "%8.2f s  %5.1f%%  %s\n", other, 100 * other / total, "other"
  printf "%8.2f s  100.0%%  all samples\n", total
}' "$traces"
