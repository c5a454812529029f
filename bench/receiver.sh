#!/usr/bin/env bash
# bench/receiver.sh — ingest rate and flood behaviour of the OTLP span receiver (package receiver).
#
# 1. `go test -bench` on ONE core (-cpu 1 = GOMAXPROCS=1; the HTTP client, the receiver and its
#    consumer share it): OTLP/HTTP protobuf exports of 512 vLLM-like llm_request spans posted
#    back to back over loopback, decoded, converted to infer.vllm_span records and consumed.
#    Reports spans/s and ns/span (target: ≥ 100,000 spans/s for BenchmarkIngestHTTPProtobuf512),
#    plus the gzip and JSON variants, the variant whose consumer encodes each artifact line, the
#    decode+convert alone, and the cost of one artifact line.
# 2. bench/receiverflood: the receiver in its own process (GOMAXPROCS=1, on its real path: each
#    span's artifact line written into a file, as `profile` does), its capacity measured, then
#    flooded at FACTOR (10) times that for FLOOD seconds, over OTLP/HTTP and then OTLP/gRPC:
#    prints the 200/429/503 answers, the accepted share of the capacity (by wall time and per
#    receiver CPU-second) and the receiver's peak RSS, and fails when no 429/503 came back or
#    the RSS reached 1 GiB. bench/receiver-flood.sh runs it for a base commit and this tree in
#    turns and prints the medians.
#
# 3. bench/receiverflood -bombs: the element bombs (gzip 19 MiB of empty ResourceSpans, four at
#    once, just under the 16 MiB limit, plain 21 MiB, nested values, 2 million attributes, deep
#    JSON) sent to a fresh receiver process: each answer and the process's peak RSS; fails when a
#    bomb is accepted, a real export afterwards is not, or the RSS reaches 256 MiB.
#
#   BENCHTIME=3s FACTOR=10 FLOOD=10s bash bench/receiver.sh
set -euo pipefail
cd "$(dirname "$0")/.."
go test -run '^$' -bench 'Ingest|DecodeConvert|MarshalSpanRecord' -benchtime "${BENCHTIME:-3s}" -count "${COUNT:-1}" -cpu 1 ./receiver/
go run ./bench/receiverflood -factor "${FACTOR:-10}" -duration "${FLOOD:-10s}" -procs 1
go run ./bench/receiverflood -factor "${FACTOR:-10}" -duration "${FLOOD:-10s}" -procs 1 -transport grpc
go run ./bench/receiverflood -bombs -procs 1
