#!/usr/bin/env bash
# Runs one fuzz target over its committed seed corpus for a while.
#   fuzz/run_fuzzer.sh FUZZER CORPUS SECONDS [ARTIFACT_DIR]
# New inputs go to a temporary folder (the committed corpus is only read);
# a crashing input is kept in ARTIFACT_DIR (default: the current folder) and
# the exit status is the fuzzer's (0: nothing found).
set -euo pipefail
fuzzer=$1 corpus=$2 seconds=$3 artifacts=${4:-$PWD}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$artifacts"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}"   # LibTorch's process-lifetime allocations are not leaks
"$fuzzer" "$work" "$corpus" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -max_len=16384 \
  -artifact_prefix="$artifacts/$(basename "$fuzzer")-" -print_final_stats=1
