#!/usr/bin/env bash
# Full recomputation on this machine, predicted against measured: the zoo's vgg16 (small) profiled
# here, planned on 2 workers of platforms/localhost-cpu.json (--straight), with and without
# `--recompute full`; each plan simulated once (uncalibrated) and run RUNS times (1F1B, 8 microbatches,
# 4 iterations, 1 warm-up) through `pipetwin run`. Prints per mode the predicted and measured time per
# iteration (median, min-max over the runs) and each worker's peak memory, predicted (the schedule's
# memory model) and measured (the trace header's peak_memory_bytes: VmHWM since the run's start plus
# the weights and momentum held then); writes bench-results/recomputation.csv.
# Usage: bench/recomputation.sh [BUILD_DIR] [RUNS]
set -euo pipefail
build=${1:-build}
runs=${2:-5}
cluster=platforms/localhost-cpu.json
out=bench-results/recomputation
mkdir -p "$out"
pipetwin="$build/pipetwin"
"$pipetwin" profile --model vgg16 --batch 32 -o "$out/vgg16.json" > /dev/null
csv="mode,run,predicted_iteration_s,measured_iteration_s,predicted_peak_bytes_worker0,predicted_peak_bytes_worker1,measured_peak_bytes_worker0,measured_peak_bytes_worker1"
for mode in none full; do
  "$pipetwin" plan -p "$out/vgg16.json" -c "$cluster" -n 2 --straight --recompute "$mode" -q -o "$out/plan-$mode.json"
  "$pipetwin" simulate --plan "$out/plan-$mode.json" -c "$cluster" -s 1f1b --microbatches 8 --iterations 4 --warmup 1 \
    -o "$out/predicted-$mode.jsonl" > /dev/null
  for run in $(seq 1 "$runs"); do
    "$pipetwin" run --plan "$out/plan-$mode.json" --model vgg16 -s 1f1b -m 8 --iterations 4 --warmup 1 \
      -o "$out/measured-$mode-$run.jsonl" > /dev/null
    line=$(/usr/bin/python3 - "$out/predicted-$mode.jsonl" "$out/measured-$mode-$run.jsonl" "$out/plan-$mode.json" <<'EOF'
import json, sys
sys.path.insert(0, "bench")
from median_iteration import median_iteration_s as iteration_s

predicted_s, predicted = iteration_s(sys.argv[1])
measured_s, measured = iteration_s(sys.argv[2])
plan = json.load(open(sys.argv[3]))
predicted_peak = [stage["memory_bytes"] for stage in plan["stages"]]
measured_peak = measured["extra"]["peak_memory_bytes"]
print(f"{predicted_s:.6f},{measured_s:.6f},{predicted_peak[0]:.0f},{predicted_peak[1]:.0f},{measured_peak[0]:.0f},{measured_peak[1]:.0f}")
EOF
)
    csv+=$'\n'"$mode,$run,$line"
  done
done
printf '%s\n' "$csv" > "$out.csv.tmp" && mv "$out.csv.tmp" "$out.csv"
/usr/bin/python3 - "$out.csv" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("mode  predicted_s  measured_s median (min-max)   peak MB per worker: predicted | measured median (min-max)")
for mode in ("none", "full"):
    mine = [r for r in rows if r["mode"] == mode]
    measured = [float(r["measured_iteration_s"]) for r in mine]
    peaks = []
    for w in (0, 1):
        values = [float(r[f"measured_peak_bytes_worker{w}"]) / 1e6 for r in mine]
        peaks.append(f"w{w} {float(mine[0][f'predicted_peak_bytes_worker{w}']) / 1e6:.1f} | "
                     f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})")
    print(f"{mode:5} {float(mine[0]['predicted_iteration_s']):.4f}       {statistics.median(measured):.4f} "
          f"({min(measured):.4f}-{max(measured):.4f})   " + "; ".join(peaks))
print(f"written: {sys.argv[1]}")
EOF
