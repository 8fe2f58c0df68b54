#!/usr/bin/env bash
# make fuzz: build the readers' libFuzzer targets with clang (ASan + UBSan) in build-fuzz/ and fuzz each
# reader for FUZZ_SECONDS (default 60). Each run starts from the committed corpus fuzz/corpus/<reader>/
# (plus PipeDream's real profiles for the graph.txt reader) and works in build-fuzz/corpus/<reader>/;
# a crash, a hang (> 10 s on one input) or running out of memory (> 2 GB) is written to
# build-fuzz/crashes/<reader>/ and makes the script fail. Prints executions per reader at the end.
# FUZZ_MERGE=1 adds the work corpus's inputs that bring new coverage (up to 16 kB each) to
# fuzz/corpus/<reader>/, to commit.
set -euo pipefail
build_dir=${1:-build-fuzz}
profiles=${2:-../shared/profiles/pipedream}
seconds=${FUZZ_SECONDS:-60}
readers=(profile-json pipedream-graph cluster plan schedule-csv trace torch-schedule-csv kineto-trace)

cmake -S . -B "$build_dir" -DPIPETWIN_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$build_dir" -j "$(nproc)" -- --no-print-directory >/dev/null

summary=()
failed=0
for reader in "${readers[@]}"; do
  target="fuzz_${reader//-/_}"
  work="$build_dir/corpus/$reader"
  crashes="$build_dir/crashes/$reader"
  rm -rf "$crashes"  # findings of earlier runs were moved to fuzz/regressions/ (or are stale)
  mkdir -p "$work" "$crashes"
  cp -n fuzz/corpus/"$reader"/* "$work"/ 2>/dev/null || true
  if [ "$reader" = pipedream-graph ] && [ -d "$profiles" ]; then cp -n "$profiles"/*.txt "$work"/ 2>/dev/null || true; fi
  log="$build_dir/$reader.log"
  echo "fuzz: $reader for ${seconds} s ..." >&2
  set +e
  "$build_dir/fuzz/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix="$crashes/" -print_final_stats=1 "$work" >"$log" 2>&1
  status=$?
  set -e
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  found=$(find "$crashes" -type f | wc -l)
  summary+=("$(printf '%-16s %10s runs  %7s/s  corpus %5s  crash/hang/oom files %s' "$reader" "$runs" "$rate" \
    "$(ls "$work" | wc -l)" "$found")")
  if [ "$status" -ne 0 ] || [ "$found" -ne 0 ]; then
    failed=1
    echo "fuzz: $reader FAILED (exit $status); see $log and $crashes/" >&2
    grep -E "ERROR|SUMMARY|==[0-9]+==|terminate|what\(\)" "$log" | head -20 >&2 || true
  fi
  if [ "${FUZZ_MERGE:-0}" = 1 ]; then  # keep inputs that add coverage, up to 16 kB each
    merged="$build_dir/merged/$reader"
    rm -rf "$merged" && mkdir -p "$merged"
    "$build_dir/fuzz/$target" -merge=1 -max_len=65536 "$merged" fuzz/corpus/"$reader" "$work" >/dev/null 2>&1
    find "$merged" -type f -size -17k -exec cp -n {} fuzz/corpus/"$reader"/ \;
  fi
done
printf '%s\n' "${summary[@]}"
exit "$failed"
