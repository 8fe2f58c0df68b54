#!/usr/bin/env bash
# Regenerates the sample files under traces/samples/ with the real commands (the notebooks read them).
# Measured traces depend on this machine; everything else is deterministic.
set -euo pipefail
build_dir=${1:-build}
profiles=${2:-../shared/profiles/pipedream}
p="$build_dir/pipetwin"
out=traces/samples
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"

# A simulated VGG-16 pipeline: 4 unreplicated stages on one server of Cluster-B, 1F1B (PipeDream's profile
# stashes more than a V100 holds in pipetwin's memory model: timed anyway, as in make demo).
"$p" plan -q --straight -n 4 -p "$profiles/vgg16.txt" -c platforms/pipedream-cluster-b.json -o "$tmp/vgg16.plan.json"
"$p" simulate --ignore-memory -c platforms/pipedream-cluster-b.json -n 4 --plan "$tmp/vgg16.plan.json" -s 1f1b -m 8 \
  --iterations 2 --warmup 1 -o "$out/vgg16-cluster-b-1f1b.sim.jsonl" > /dev/null

# Out of sample on this machine (notebooks/predicted_vs_measured.ipynb): validate --matrix on the small
# VGG-16, calibrated on 1F1B with 8 microbatches; the matrix and one configuration it never saw (ZB-H1).
"$p" validate --matrix --model vgg16 -o "$tmp/matrix" > /dev/null
cp "$tmp/matrix/matrix.csv" "$out/vgg16-matrix.csv"
cp "$tmp/matrix/zb-h1_m=8/predicted.jsonl" "$out/vgg16-zb-h1.predicted.jsonl"
cp "$tmp/matrix/zb-h1_m=8/measured-1.jsonl" "$out/vgg16-zb-h1.measured.jsonl"

# A sweep of VGG-16 over one server of Cluster-A.
"$p" sweep --ignore-memory -p "$profiles/vgg16.txt" -c platforms/pipedream-cluster-a.json -n 4 --stages 1,2,4 \
  --schedules 1f1b,gpipe --microbatches 4,8,16 --iterations 2 -o "$out/vgg16-cluster-a-4.sweep.csv" > /dev/null 2>&1
ls -l "$out"
