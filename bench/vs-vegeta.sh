#!/usr/bin/env bash
# bench/vs-vegeta.sh — the load generator's dispatch punctuality and CPU cost against vegeta
# and a minimal Go client, on bench/ssestub, in one window.
#
# Builds vegeta v12.13.0 (a temp module under bench/results/vegeta, fetched through the module
# proxy), bench/sseblast (fixed-rate net/http client that JSON-parses every SSE event),
# bench/vegetalag, bench/ratecheck, inferprobe at HEAD (this tree) and at BASE (a commit,
# exported with git archive into bench/results/base-src). bench/ssestub runs pinned to core 1
# (-tokens 14: 18 events per answer; -delay GAP between events), every client pinned to core 0
# (taskset; so GOMAXPROCS is 1 for the Go clients), all at nice NICE (default 0), DURATION seconds per point, fixed-rate
# arrivals at each of RATES, with each of GAPS (0: none), REPEATS times, the clients
# alternating within each point. Per run it prints dispatch lag p50/p99 (sent − intended),
# achieved/scheduled rate, client CPU per request (user+sys from /usr/bin/time over the
# requests sent) and peak RSS; then the median (min–max) over the repeats, and uptime.
#
#   REPEATS=2 RATES="500 1000 2000" GAPS="0 5ms" bash bench/vs-vegeta.sh
#
# SKIP_BUILD=1 reuses the binaries in bench/results/bin; REBUILD_BASE=1 rebuilds BASE's.
# Results: bench/results/vs-vegeta/runs.tsv (one row per run) and summary.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
RATES=${RATES:-"500 1000 2000"}
GAPS=${GAPS:-"0 5ms"}
REPEATS=${REPEATS:-2}
DURATION=${DURATION:-10}
BASE=${BASE:-dfbae6c}
CLIENTS=${CLIENTS:-"base head vegeta sseblast"}
PORT=${PORT:-18556}
NICE=${NICE:-0} # nice(1) adjustment for the stub and every client (negative needs root)
res=bench/results
out=$res/vs-vegeta
mkdir -p "$out" "$res/bin"
bin=$(cd "$res/bin" && pwd)

build() {
  [[ ${SKIP_BUILD:-0} == 1 ]] && return
  if [[ ! -x $res/vegeta/vegeta ]]; then
    mkdir -p "$res/vegeta"
    (cd "$res/vegeta" && { [[ -f go.mod ]] || go mod init vegetabuild >/dev/null 2>&1; } &&
      GOFLAGS=-mod=mod go get github.com/tsenart/vegeta/v12@v12.13.0 &&
      go build -o vegeta github.com/tsenart/vegeta/v12)
  fi
  cp "$res/vegeta/vegeta" "$bin/vegeta"
  go build -o "$bin/inferprobe-head" ./cmd/inferprobe
  for c in sseblast vegetalag ratecheck ssestub; do go build -o "$bin/$c" "./bench/$c"; done
  if [[ $CLIENTS == *base* && ( ! -x $bin/inferprobe-base || ${REBUILD_BASE:-0} == 1 ) ]]; then
    rm -rf "$res/base-src" && mkdir -p "$res/base-src"
    git archive "$BASE" | tar -x -C "$res/base-src"
    (cd "$res/base-src" && go build -o "$bin/inferprobe-base" ./cmd/inferprobe)
  fi
}
build

stubpid=
trap '[[ -n $stubpid ]] && kill "$stubpid" 2>/dev/null || true' EXIT
start_stub() { # GAP
  [[ -n $stubpid ]] && { kill "$stubpid" 2>/dev/null || true; wait "$stubpid" 2>/dev/null || true; }
  local d=$1; [[ $d == 0 ]] && d=0s
  nice -n "$NICE" taskset -c 1 "$bin/ssestub" -listen "127.0.0.1:$PORT" -tokens 14 -delay "$d" 2>"$out/stub.log" &
  stubpid=$!
  for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 0.1; done
}

url="http://127.0.0.1:$PORT/v1"
printf 'POST %s/chat/completions\nContent-Type: application/json\n@%s\n' "$url" "$out/body.json" >"$out/targets.txt"
printf '{"model":"m","stream":true,"max_tokens":14,"messages":[{"role":"user","content":"hello there"}]}' >"$out/body.json"

# run CLIENT RATE GAP REP: one point; appends a row to runs.tsv.
run() {
  local c=$1 rate=$2 gap=$3 rep=$4 w=$out/$1-$2-$3-$4 line n
  case $c in
  base | head | ip-*) # ip-NAME: bench/results/bin/inferprobe-ip-NAME, built by hand
    rm -f "$w.jsonl"
    nice -n "$NICE" taskset -c 0 /usr/bin/time -f '%U %S %M' -o "$w.time" "$bin/inferprobe-$c" profile --base-url "$url" --model m \
      --arrival fixed-rate --rate "$rate" --duration "$DURATION" --input-tokens 16 --output-tokens 14 \
      --max-in-flight 50000 --seed 1 --quiet --allow-client-limited --output "$w.jsonl" >/dev/null 2>"$w.err" || true
    line=$("$bin/ratecheck" "$w.jsonl")
    n=$(grep '"event_type":"infer.request"' "$w.jsonl" | grep -c '"phase":"measured"' || true) ;;
  vegeta)
    nice -n "$NICE" taskset -c 0 /usr/bin/time -f '%U %S %M' -o "$w.time" "$bin/vegeta" attack -targets "$out/targets.txt" \
      -rate "$rate/1s" -duration "${DURATION}s" -max-body 0 -timeout 60s >"$w.bin" 2>"$w.err" || true
    line=$("$bin/vegeta" encode --to csv <"$w.bin" | "$bin/vegetalag" -rate "$rate")
    n=$(sed -E 's/.*requests=([0-9]+).*/\1/' <<<"$line") ;;
  sseblast)
    nice -n "$NICE" taskset -c 0 /usr/bin/time -f '%U %S %M' -o "$w.time" "$bin/sseblast" -url "$url/chat/completions" \
      -rate "$rate" -duration "${DURATION}s" >"$w.out" 2>"$w.err" || true
    line=$(cat "$w.out")
    n=$(sed -E 's/.*requests=([0-9]+).*/\1/' <<<"$line") ;;
  esac
  local user sys rss
  read -r user sys rss < <(tail -1 "$w.time")
  local p50 p99 ratio ttft
  ttft=$(grep -o 'ttft_p99_ms=[0-9.e+-]*' <<<"$line" | cut -d= -f2 || true)
  p50=$(grep -o 'lag_p50_ms=[0-9.e+-]*' <<<"$line" | cut -d= -f2)
  p99=$(grep -o 'lag_p99_ms=[0-9.e+-]*' <<<"$line" | cut -d= -f2)
  ratio=$(grep -o 'ratio=[0-9.e+-]*' <<<"$line" | cut -d= -f2)
  local cpu
  cpu=$(awk -v u="$user" -v s="$sys" -v n="$n" 'BEGIN { printf "%.3f", (n > 0 ? (u + s) * 1000 / n : 0) }')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$rate" "$gap" "$rep" "$n" "$p50" "$p99" "$ratio" "$cpu" \
    "$((rss / 1024))" "${ttft:-NA}" "$(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/runs.tsv"
}

printf 'client\trate\tgap\trep\trequests\tlag_p50_ms\tlag_p99_ms\tachieved/scheduled\tcpu_ms_per_req\tpeak_rss_MiB\tttft_p99_ms\tloadavg\n' | tee "$out/runs.tsv"
echo "start: $(uptime); nice $NICE; $(nproc) cores" | tee "$out/uptime.txt"
for gap in $GAPS; do
  start_stub "$gap"
  for rate in $RATES; do
    for rep in $(seq "$REPEATS"); do
      for c in $CLIENTS; do run "$c" "$rate" "$gap" "$rep"; done
    done
  done
done
echo "end: $(uptime)" | tee -a "$out/uptime.txt"

# median (min–max) per client, rate and gap.
awk -F'\t' 'NR > 1 { k = $1 "\t" $2 "\t" $3; keys[k] = 1; for (i = 6; i <= 11; i++) v[k, i, ++cnt[k, i]] = $i }
function stat(k, i, f,   n, a, j, m, t) {
  n = cnt[k, i]; for (j = 1; j <= n; j++) a[j] = v[k, i, j] + 0
  for (j = 1; j <= n; j++) for (m = j + 1; m <= n; m++) if (a[m] < a[j]) { t = a[j]; a[j] = a[m]; a[m] = t }
  med = n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  return sprintf(f " (" f "–" f ")", med, a[1], a[n])
}
END { print "client\trate\tgap\tlag_p50_ms\tlag_p99_ms\tachieved/scheduled\tcpu_ms_per_req\tpeak_rss_MiB\tttft_p99_ms"
  for (k in keys) print k "\t" stat(k, 6, "%.3f") "\t" stat(k, 7, "%.3f") "\t" stat(k, 8, "%.4f") "\t" stat(k, 9, "%.3f") "\t" stat(k, 10, "%d") "\t" (v[k, 11, 1] == "NA" ? "NA" : stat(k, 11, "%.3f")) }' "$out/runs.tsv" |
  sort -t$'\t' -k3,3 -k2,2n -k1,1 | column -t -s$'\t' | tee "$out/summary.txt"
cat "$out/uptime.txt" >>"$out/summary.txt"
