#!/usr/bin/env bash
# Run-to-run spread of `pipetwin run` on this machine, for one or more builds of pipetwin (to compare
# two runtimes, interleaved run by run so a slow spell of the shared machine hits both alike). Two
# configurations of the zoo's small VGG-16 (microbatch 32) on 2 worker processes, 8 microbatches,
# 6 iterations (1 warm-up): `pp`, the optimizer's 2-stage straight cut, 1F1B (point-to-point messages);
# `dp`, the whole model on one stage replicated twice (one gradient all-reduce per iteration).
# Prints per build and configuration the median of the runs' median iteration time, its min-max and
# the spread (max-min)/median; writes bench-results/run_spread.csv.
# Usage: bench/run_spread.sh RUNS BUILD_DIR [BUILD_DIR ...]
set -euo pipefail
runs=${1:?usage: bench/run_spread.sh RUNS BUILD_DIR [BUILD_DIR ...]}
shift
builds=("${@:-build}")
cluster=platforms/localhost-cpu.json
out=bench-results/run_spread
mkdir -p "$out"
first="${builds[0]}/pipetwin"
"$first" profile --model vgg16 --batch 32 -o "$out/vgg16.json" > /dev/null
"$first" plan -p "$out/vgg16.json" -c "$cluster" -n 2 --straight -q -o "$out/pp.json"
# The data-parallel plan: the straight plan's two stages as one, on both workers.
/usr/bin/python3 - "$out/pp.json" "$out/dp.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
first, second = plan["stages"]
merged = dict(first)
for key in ("layers", "layer_indices"):
    merged[key] = first[key] + second[key]
for key in ("compute_s", "forward_s", "backward_s", "backward_input_s", "backward_weight_s", "param_bytes",
            "optimizer_bytes", "optimizer_s", "activation_bytes", "forward_flops"):
    if key in first:
        merged[key] = first[key] + second[key]
merged.update(output_activation_bytes=second["output_activation_bytes"], replicas=2, devices=[0, 1], in_flight=1)
plan["stages"] = [merged]
json.dump(plan, open(sys.argv[2], "w"), indent=1)
PY
csv="build,configuration,run,measured_iteration_s"
for run in $(seq 1 "$runs"); do
  for configuration in pp dp; do
    for b in "${!builds[@]}"; do
      trace="$out/$configuration-$b-$run.jsonl"
      "${builds[$b]}/pipetwin" run --plan "$out/$configuration.json" --model vgg16 -s 1f1b -m 8 --iterations 6 --warmup 1 \
        -o "$trace" > /dev/null
      seconds=$(/usr/bin/python3 bench/median_iteration.py "$trace")
      csv+=$'\n'"${builds[$b]},$configuration,$run,$seconds"
    done
  done
done
printf '%s\n' "$csv" > "$out.csv.tmp" && mv "$out.csv.tmp" "$out.csv"
/usr/bin/python3 - "$out.csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("build  configuration  median s  (min-max)  spread")
for build in dict.fromkeys(r["build"] for r in rows):
    for configuration in ("pp", "dp"):
        times = [float(r["measured_iteration_s"]) for r in rows if r["build"] == build and r["configuration"] == configuration]
        median = statistics.median(times)
        print(f"{build}  {configuration}  {median:.4f}  ({min(times):.4f}-{max(times):.4f})  {(max(times) - min(times)) / median:.0%}")
PY
