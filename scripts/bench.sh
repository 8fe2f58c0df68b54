#!/usr/bin/env bash
# make bench: run every Google Benchmark target under build/bench/.
set -euo pipefail
build_dir=${1:-build}
for bench in "$build_dir"/bench/bench_*; do
  [ -x "$bench" ] || continue
  echo "== $(basename "$bench")"
  "$bench" --benchmark_min_time=0.2
done
