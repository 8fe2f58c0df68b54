#!/usr/bin/env bash
# Out-of-sample accuracy of the twin on this machine: `pipetwin validate --matrix` for each model
# (calibrate on the base's runs, predict and run 14 other configurations 3 times each, round-robin),
# then the pooled figures over all models: median |error|, max |error|, how many within 10%, and Kendall
# tau per model, and one run at a time: the prediction against each run and run against run (matrix.json's
# per_run_tau, repeat_tau), and the same figures over the configurations whose compute cost what the
# base's did (CPU/work within 5%: the twin's own error, without the machine's slow spells), and the noise
# floor: what a twin exact to the machine's mean would score against the same runs (matrix.json's noise_floor).
# Usage: bench/validation_matrix.sh [build-dir] [output-dir] [models...]   (default: vgg16 resnet)
# Extra flags for validate go in $VALIDATE_FLAGS (e.g. "--no-shared-compute --reuse-runs").
# Takes about 2 minutes per model here. Figures: bench/README.md "Out of sample". Several matrices
# (re-predicted with --reuse-runs after a change to the twin) are pooled by bench/matrix_pool.py.
set -euo pipefail
build_dir=${1:-build}
out=${2:-bench-results/validation-matrix}
shift $(( $# > 2 ? 2 : $# ))
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(vgg16 resnet)
mkdir -p "$out"
for model in "${models[@]}"; do
  echo "== $model" >&2
  "$build_dir/pipetwin" validate --matrix --model "$model" -o "$out/$model" ${VALIDATE_FLAGS:-} | tail -n 20
done
/usr/bin/python3 - "$out" "${models[@]}" <<'PY'
import csv, json, statistics, sys
out, models = sys.argv[1], sys.argv[2:]
errors, two_workers, as_calibrated = [], [], []
def noise_floor(summary):  # what a twin exact to the machine's mean would score (matrices from before it have none)
    f = summary.get("noise_floor")
    if not f or not f["draws"]:
        return ""
    return (f"  {100*f['median_abs_error']:.1f}%, {100*f['max_abs_error']:.1f}% ({100*f['max_abs_error_low']:.1f}-"
            f"{100*f['max_abs_error_high']:.1f}%), {f['kendall_tau']:.2f} ({f['kendall_tau_low']:.2f}-{f['kendall_tau_high']:.2f})")
print("\nmodel     configurations  median|err|  max|err|  within 10%  Kendall tau  per run (run vs run)  outside spread  run spread (median of (max-min)/median)  noise floor: median, max (10-90%), tau (10-90%)")
for model in models:
    rows = [r for r in csv.DictReader(open(f"{out}/{model}/matrix.csv")) if r["in_sample"] == "0"]
    e = [abs(float(r["error"])) for r in rows]
    errors += e
    two_workers += [abs(float(r["error"])) for r in rows if "3 workers" not in r["configuration"] and "+1" not in r["configuration"]]
    base = [r for r in csv.DictReader(open(f"{out}/{model}/matrix.csv")) if r["in_sample"] == "1"]
    if base and float(base[0].get("cpu_per_work") or -1) > 0:  # matrices from before the column have none
        limit = float(base[0]["cpu_per_work"]) * 1.05  # validate's band (kCostlierComputeBand)
        as_calibrated += [abs(float(r["error"])) for r in rows if 0 < float(r["cpu_per_work"]) <= limit]
    spread = statistics.median((float(r["measured_max_s"]) - float(r["measured_min_s"])) / float(r["measured_median_s"]) for r in rows)
    summary = json.load(open(f"{out}/{model}/matrix.json"))  # written with matrix.csv: the taus as validate gave them
    print(f"{model:9} {len(rows):14}  {100*statistics.median(e):10.1f}%  {100*max(e):7.1f}%  {sum(x <= 0.10 for x in e):10}  "
          f"{summary['kendall_tau']:11.2f}  {summary['per_run_tau']:7.2f} ({summary['repeat_tau']:.2f})  "
          f"{sum(r['outside_spread'] == '1' for r in rows):14}  {100*spread:.1f}%" + noise_floor(summary))
print(f"{'all':9} {len(errors):14}  {100*statistics.median(errors):10.1f}%  {100*max(errors):7.1f}%  {sum(x <= 0.10 for x in errors):10}")
if two_workers:
    print(f"{'2 workers':9} {len(two_workers):14}  {100*statistics.median(two_workers):10.1f}%  {100*max(two_workers):7.1f}%  "
          "(without the 3-process configurations, which oversubscribe the 2 cores)")
if as_calibrated:
    print(f"{'as calib.':9} {len(as_calibrated):14}  {100*statistics.median(as_calibrated):10.1f}%  {100*max(as_calibrated):7.1f}%  "
          f"{sum(x <= 0.10 for x in as_calibrated):10}  (those whose compute cost at most 5% more CPU per unit of work than the base's: CPU/work)")
PY
