#!/usr/bin/env bash
# bench/cpu-breakdown.sh — where a CPU profile's samples went, by what the code was doing
# rather than by function: each sampled stack is put in the first category whose rule
# matches, and the categories are printed with their seconds and shares of all samples.
#
#   bash bench/cpu-breakdown.sh client BINARY PROFILE     # a profile run's --cpuprofile
#   bash bench/cpu-breakdown.sh receiver BINARY PROFILE   # go test -cpuprofile of ./receiver
#
# A rule (rule NAME LEAF STACK) takes a stack whose innermost frame matches the extended
# regular expression LEAF and some frame of which matches STACK (an empty pattern matches
# anything).
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

rules=
# rule NAME LEAF STACK adds one rule; rules are tried in the order given.
rule() { rules+=$1$'\t'$2$'\t'$3$'\n'; }
case $set_name in
client)
  rule 'kernel: reads (recvmsg, read)' "$syscall" 'recvmsg|\.Read$|\.Read \(inline\)|\.read$'
  rule 'kernel: writes (the requests, the artifact)' "$syscall" 'syscall\.Write|syscall\.write|\.Write$'
  rule 'kernel: netpoll (epoll_wait)' "$syscall" 'netpoll'
  rule 'kernel: other system calls' "$syscall" ''
  rule 'SSE event JSON decode (loadgen/client.decodeChunk)' '' 'loadgen/client\.decodeChunk'
  rule 'SSE parse (loadgen/sse)' '' 'loadgen/sse\.'
  rule 'record encode and write (artifact)' '' 'inferprobe/artifact\.'
  rule 'garbage collection' '' 'gcBgMarkWorker|gcAssist|gcDrain|gcStart|bgsweep|bgscavenge'
  rule 'allocation' '' 'mallocgc'
  rule 'goroutine scheduling' '' 'runtime\.schedule$|findRunnable|park_m|runtime\.mcall|goschedImpl|ready$'
  rule 'net/http, net, bufio (user space)' '' '^net/http|^net\.|internal/poll|^bufio\.|net/textproto'
  rule 'stream bookkeeping (loadgen/client: stamps, answers)' '' 'inferprobe/loadgen/client'
  rule 'pacer, phases, records (loadgen, run)' '' 'inferprobe/loadgen|inferprobe/run'
  rule 'live report and exporter (analyze, exporter)' '' 'inferprobe/analyze|inferprobe/exporter'
  ;;
receiver)
  rule 'kernel: system calls' "$syscall" ''
  rule 'protobuf decode (pdata)' '' 'pdata/internal|ptraceotlp.*Unmarshal|proto\.Unmarshal|UnmarshalProto'
  rule 'pre-scan and skip scan (receiver)' '' 'receiver\.\(\*?prescan|receiver\.prescan|skipScanner|protoScanner|receiver\.eachField|receiver\.nextLen|receiver\.scan'
  rule 'wire to record conversion (receiver.convertProto)' '' 'receiver\.convertProto|receiver\.\(\*wireConverter\)|receiver\.\(\*wireFields\)'
  rule 'record conversion from pdata (receiver.convertTraces)' '' 'receiver\.convertTraces|receiver\.convertSpan'
  rule 'span line: float formatting' '' 'artifact\.appendFloat|artifact\.appendFiniteFloat|strconv\.'
  rule 'span line: everything else (artifact)' '' 'inferprobe/artifact\.'
  rule 'garbage collection' '' 'gcBgMarkWorker|gcAssist|gcDrain|gcStart|bgsweep|bgscavenge'
  rule 'allocation' '' 'mallocgc'
  rule 'goroutine scheduling' '' 'runtime\.schedule$|findRunnable|park_m|runtime\.mcall|goschedImpl'
  rule 'HTTP and gRPC serving (net/http, grpc)' '' '^net/http|google\.golang\.org/grpc|golang\.org/x/net/http2|^net\.|internal/poll|^bufio\.'
  rule 'receiver admission, queue and consumer' '' 'inferprobe/receiver'
  rule 'benchmark client' '' 'receiver\.Benchmark|receiver\.bench|receiver\.post|testing\.'
  ;;
*)
  echo "cpu-breakdown.sh: unknown set $set_name (client or receiver)" >&2
  exit 2
  ;;
esac

traces=$(mktemp)
trap 'rm -f "$traces"' EXIT
if ! go tool pprof -traces "$bin" "$prof" >"$traces" 2>"$traces.err"; then
  echo "cpu-breakdown.sh: go tool pprof could not read $prof with $bin:" >&2
  cat "$traces.err" >&2
  rm -f "$traces.err"
  exit 1
fi
rm -f "$traces.err"
RULES=$rules awk '
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
  # ENVIRON, not -v: with -v awk would read the backslashes of the patterns as escapes.
  nr = split(ENVIRON["RULES"], line, "\n") - 1
  for (i = 1; i <= nr; i++) { split(line[i], f, "\t"); nm[i] = f[1]; lp[i] = f[2]; sp[i] = f[3] }
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
