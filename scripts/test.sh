#!/usr/bin/env bash
# The README's test command: installs what the tests need, then runs every test.
# Usage: bash scripts/test.sh            (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."

# Without go-nvml's ~150 lines of C deprecation warnings (the flags go uses, plus one).
. scripts/cgo-env.sh

# Debian packages the tests need: prometheus (the server the integration test scrapes the
# daemon with, and promtool for `check rules` / `test rules` / `check config`) and chromium
# (the headless browser that renders tables' index.html). Without them those tests skip
# locally; under CI (CI set) they fail.
need_pkgs=(prometheus chromium)
if command -v apt-get >/dev/null 2>&1; then
  missing=()
  for p in "${need_pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then sudo="sudo"; fi
    echo "== apt-get install ${missing[*]}"
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi
echo "== go vet"
go vet ./...
echo "== go test -race"
go test -race -count=1 -timeout 20m ./...
# Timing fidelity (measured TTFT/e2e vs the simulated engine's true socket writes, < 1 ms at
# p99) is only meaningful with the machine to itself: run it alone, without the race detector.
echo "== fidelity"
INFERPROBE_FIDELITY=1 go test -count=1 -run 'TestFidelityAgainstGroundTruth' -v ./loadgen | grep -E '^(=== RUN|--- |\s+run_test|ok|FAIL|PASS)'
