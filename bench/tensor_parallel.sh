#!/usr/bin/env bash
# Tensor parallelism on this machine, predicted against measured (issue 16 item 2): the zoo's gpt
# (microbatch 8) profiled whole and with `--tp 2` (two processes measuring their shards at once),
# planned on one stage and on two, simulated, then run RUNS times with `pipetwin run --tp`.
#   tp1-1stage  gpipe, 4 microbatches, 1 process        tp2-1stage  the same, 2 processes
#   tp1-2stage  1f1b, 8 microbatches, 2 processes       tp2-2stage  the same, 4 processes (2 cores: shared)
# Then out of sample: the cluster calibrated on the first tp2-1stage run predicts tp2-1stage with 8
# microbatches and tp2-2stage, which the calibration never saw.
# Prints per configuration: predicted, measured median (min-max over the runs), signed error and
# whether it lies outside the measured spread; writes bench-results/tensor_parallel.csv.
# Usage: bench/tensor_parallel.sh [RUNS] [BUILD_DIR]
set -euo pipefail
runs=${1:-3}
build=${2:-build}
pipetwin="$build/pipetwin"
cluster=platforms/localhost-cpu.json
out=bench-results/tensor_parallel
mkdir -p "$out"
median() { /usr/bin/python3 bench/median_iteration.py "$1"; }

"$pipetwin" profile --model gpt --batch 8 -o "$out/gpt-tp1.json" > /dev/null
"$pipetwin" profile --model gpt --batch 8 --tp 2 -o "$out/gpt-tp2.json" > /dev/null
for t in 1 2; do
  "$pipetwin" plan -q --straight -n 1 -p "$out/gpt-tp$t.json" -c "$cluster" -o "$out/plan-tp$t-1stage.json"
  "$pipetwin" plan -q --straight -n 2 -p "$out/gpt-tp$t.json" -c "$cluster" -o "$out/plan-tp$t-2stage.json"
done

schedule_of() { case "$1" in *-1stage) echo "-s gpipe -m 4" ;; *-1stage-m8) echo "-s gpipe -m 8" ;; *) echo "-s 1f1b -m 8" ;; esac; }
plan_of() { echo "$out/plan-${1%-m8}.json"; }

predict() {  # configuration cluster -> predicted iteration s
  local trace="$out/sim-$1-$(basename "$2" .json).jsonl"
  "$pipetwin" simulate --plan "$(plan_of "$1")" -c "$2" $(schedule_of "$1") --iterations 4 -o "$trace" > /dev/null
  median "$trace"
}

csv="configuration,cluster,predicted_s,measured_median_s,measured_min_s,measured_max_s,error,outside_spread"
report() {  # configuration cluster-label predicted measured...
  local configuration=$1 label=$2 predicted=$3
  shift 3
  line=$(/usr/bin/python3 - "$predicted" "$@" <<'PY'
import statistics, sys
predicted, measured = float(sys.argv[1]), [float(x) for x in sys.argv[2:]]
m, lo, hi = statistics.median(measured), min(measured), max(measured)
error = predicted / m - 1
print(f"{predicted:.6f},{m:.6f},{lo:.6f},{hi:.6f},{error:+.1%},{'yes' if not lo <= predicted <= hi else 'no'}")
PY
)
  csv+=$'\n'"$configuration,$label,$line"
  echo "$configuration ($label): predicted,median,min,max,error,outside = $line"
}

declare -A measured
for configuration in tp1-1stage tp2-1stage tp1-2stage tp2-2stage tp2-1stage-m8; do
  t=${configuration:2:1}
  for run in $(seq 1 "$runs"); do
    trace="$out/run-$configuration-$run.jsonl"
    "$pipetwin" run --plan "$(plan_of "$configuration")" --model gpt --tp "$t" $(schedule_of "$configuration") \
      --iterations 6 -o "$trace" > /dev/null
    measured[$configuration]+=" $(median "$trace")"
  done
done
"$pipetwin" calibrate --trace "$out/run-tp2-1stage-1.jsonl" --plan "$out/plan-tp2-1stage.json" -c "$cluster" \
  -o "$out/calibrated-tp2.json" > /dev/null
for configuration in tp1-1stage tp2-1stage tp1-2stage tp2-2stage tp2-1stage-m8; do
  report "$configuration" profile "$(predict "$configuration" "$cluster")" ${measured[$configuration]}
done
for configuration in tp2-1stage tp2-1stage-m8 tp2-2stage; do
  report "$configuration" "calibrated on tp2-1stage run 1" "$(predict "$configuration" "$out/calibrated-tp2.json")" \
    ${measured[$configuration]}
done
printf '%s\n' "$csv" > bench-results/tensor_parallel.csv
echo "Written to bench-results/tensor_parallel.csv"
