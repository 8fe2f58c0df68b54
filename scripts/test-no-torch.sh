#!/usr/bin/env bash
# Checks the build without libtorch (-DPIPETWIN_WITH_TORCH=OFF): planning, schedules and simulation
# work, and a training command says in one line that it needs libtorch (exit status 1).
set -uo pipefail
build_dir=${1:?usage: test-no-torch.sh BUILD_DIR PROFILES_DIR}
profiles=${2:?usage: test-no-torch.sh BUILD_DIR PROFILES_DIR}
p="$build_dir/pipetwin"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
passed=0 failed=0
check() {  # check NAME COMMAND...: passes when the command succeeds
  local name=$1; shift
  if "$@" > "$out/log" 2>&1; then passed=$((passed + 1)); echo "ok: $name"
  else failed=$((failed + 1)); echo "FAILED: $name"; tail -5 "$out/log"; fi
}
check "no libtorch linked" bash -c "! ldd '$build_dir/pipetwin' '$build_dir/pipetwin-sim' | grep -q libtorch"
check "no pipetwin-exec built" test ! -e "$build_dir/pipetwin-exec"
check "plan" "$p" plan -q -n 4 --straight -p "$profiles/vgg16.txt" -c platforms/pipedream-cluster-a.json -o "$out/plan.json"
check "schedule" "$p" schedule --plan "$out/plan.json" -s 1f1b -m 8 -o "$out/s.csv"
check "simulate a schedule file" "$p" simulate --ignore-memory -n 4 -c platforms/pipedream-cluster-a.json --plan "$out/plan.json" \
  --schedule-file "$out/s.csv" --warmup 0 -o "$out/t.jsonl"
check "run refuses in one line" bash -c "! '$p' run --plan '$out/plan.json' 2> '$out/err' && [ \$(wc -l < '$out/err') -eq 1 ] && grep -q 'needs\|has none' '$out/err' && grep -q 'PIPETWIN_WITH_TORCH' '$out/err'"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
