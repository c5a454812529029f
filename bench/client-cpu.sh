#!/usr/bin/env bash
# bench/client-cpu.sh — where the load generator's CPU goes, beside vegeta's, in one window.
#
# bench/ssestub pinned to core 1 (-tokens 14, -delay GAP between events), the clients pinned
# to core 0, fixed-rate RATE/s for DURATION s, REPEATS alternating pairs. For each run: user
# and system CPU per request (/usr/bin/time over the requests sent). inferprobe runs with
# --cpuprofile; the last profile is broken down by bench/cpu-breakdown.sh, and the run's CPU
# is split into what vegeta also does (the transport: system calls, net/http, scheduling,
# allocation, GC) and what it does not (SSE and JSON parsing of every event, receive stamps,
# answers, the pacer's records, the artifact line), in milliseconds per request.
#
#   RATE=2000 GAP=5ms REPEATS=3 bash bench/client-cpu.sh
#
# Needs the binaries bench/vs-vegeta.sh builds (bench/results/bin: inferprobe-head, vegeta,
# ssestub, ratecheck); BUILD=1 rebuilds inferprobe-head from this tree first.
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${RATE:-2000}
GAP=${GAP:-5ms}
DURATION=${DURATION:-10}
REPEATS=${REPEATS:-3}
PORT=${PORT:-18557}
bin=bench/results/bin
out=bench/results/client-cpu
mkdir -p "$out"
[[ ${BUILD:-0} == 1 ]] && go build -o "$bin/inferprobe-head" ./cmd/inferprobe
for b in inferprobe-head vegeta ssestub; do
  [[ -x $bin/$b ]] || { echo "client-cpu.sh: $bin/$b missing: run bench/vs-vegeta.sh once (it builds them)" >&2; exit 2; }
done

taskset -c 1 "$bin/ssestub" -listen "127.0.0.1:$PORT" -tokens 14 -delay "$GAP" 2>"$out/stub.log" &
stub=$!
trap 'kill $stub 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 0.1; done
url="http://127.0.0.1:$PORT/v1"
printf 'POST %s/chat/completions\nContent-Type: application/json\n@%s\n' "$url" "$out/body.json" >"$out/targets.txt"
printf '{"model":"m","stream":true,"max_tokens":14,"messages":[{"role":"user","content":"hello there"}]}' >"$out/body.json"

printf 'client\trep\trequests\tuser_ms_per_req\tsys_ms_per_req\tcpu_ms_per_req\tloadavg\n' | tee "$out/runs.tsv"
for rep in $(seq "$REPEATS"); do
  for c in inferprobe vegeta; do
    if [[ $c == inferprobe ]]; then
      rm -f "$out/a.jsonl"
      taskset -c 0 /usr/bin/time -f '%U %S' -o "$out/time" "$bin/inferprobe-head" profile --base-url "$url" --model m \
        --arrival fixed-rate --rate "$RATE" --duration "$DURATION" --input-tokens 16 --output-tokens 14 \
        --max-in-flight 50000 --seed 1 --quiet --allow-client-limited --output "$out/a.jsonl" \
        --cpuprofile "$out/cpu.pprof" >/dev/null 2>"$out/err" || true
      n=$(grep '"event_type":"infer.request"' "$out/a.jsonl" | grep -c '"phase":"measured"' || true)
    else
      taskset -c 0 /usr/bin/time -f '%U %S' -o "$out/time" "$bin/vegeta" attack -targets "$out/targets.txt" \
        -rate "$RATE/1s" -duration "${DURATION}s" -max-body 0 -timeout 60s >"$out/v.bin" 2>"$out/err" || true
      n=$("$bin/vegeta" encode --to csv <"$out/v.bin" | wc -l)
    fi
    read -r user sys < <(tail -1 "$out/time")
    awk -v c="$c" -v r="$rep" -v n="$n" -v u="$user" -v s="$sys" -v l="$(cut -d' ' -f1-3 /proc/loadavg)" \
      'BEGIN { printf "%s\t%d\t%d\t%.3f\t%.3f\t%.3f\t%s\n", c, r, n, u * 1000 / n, s * 1000 / n, (u + s) * 1000 / n, l }' |
      tee -a "$out/runs.tsv"
  done
done

bash bench/cpu-breakdown.sh client "$bin/inferprobe-head" "$out/cpu.pprof" | tee "$out/breakdown.txt"
# The last inferprobe run's CPU per request, split by the breakdown's shares.
ip=$(awk -F'\t' 'NR > 1 && $1 == "inferprobe" { v = $6 } END { print v }' "$out/runs.tsv")
vmed=$(awk -F'\t' 'NR > 1 && $1 == "vegeta" { print $6 }' "$out/runs.tsv" | sort -n |
  awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
{
  printf 'inferprobe (last run) %.3f ms/request; vegeta median %.3f ms/request\n' "$ip" "$vmed"
  awk -v ip="$ip" '/%  / { share = $3; sub(/%/, "", share); name = $0; sub(/^.*%  /, "", name)
      if (name ~ /^(SSE|record encode|stream bookkeeping|pacer|live report)/) own += share
      else if (name != "all samples") transport += share }
    END { printf "  transport (what vegeta also does): %.1f%% = %.3f ms/request\n", transport, ip * transport / 100
          printf "  parsing and recording (what vegeta does not do): %.1f%% = %.3f ms/request\n", own, ip * own / 100 }' \
    "$out/breakdown.txt"
} | tee "$out/split.txt"
