#!/usr/bin/env bash
# bench/sim.sh — throughput of the simulated engine (package sim) on ONE core.
#
# BenchmarkSimStreams pins GOMAXPROCS=1 for the server and its 2,000 raw-TCP clients together
# and reports chunks/s (SSE events), tokens/s, peak_streams (streams open at once) and, for
# the paced case, step_ms (mean engine step interval vs the configured 30 ms).
# Override the run size with BENCHTIME (default 6000x = three requests per connection) and
# repetitions with COUNT.
set -euo pipefail
cd "$(dirname "$0")/.."
exec go test -run '^$' -bench 'BenchmarkSimStreams' -benchtime "${BENCHTIME:-6000x}" -count "${COUNT:-1}" ./sim/
