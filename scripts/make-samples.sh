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

# The MLP on this machine: measured by pipetwin run, predicted by pipetwin simulate from the same plan.
"$p" profile --model mlp --batch 64 -o "$tmp/mlp.profile.json" > /dev/null
"$p" plan -q --straight -p "$tmp/mlp.profile.json" -c platforms/localhost-cpu.json -o "$out/mlp-2stages.plan.json"
"$p" run --plan "$out/mlp-2stages.plan.json" --model mlp -s 1f1b -m 8 --iterations 3 --warmup 1 \
  -o "$out/mlp-2stages-1f1b.measured.jsonl" > /dev/null
"$p" simulate -c platforms/localhost-cpu.json --plan "$out/mlp-2stages.plan.json" -s 1f1b -m 8 \
  --iterations 3 --warmup 1 -o "$out/mlp-2stages-1f1b.sim.jsonl" > /dev/null

# A sweep of VGG-16 over one server of Cluster-A.
"$p" sweep --ignore-memory -p "$profiles/vgg16.txt" -c platforms/pipedream-cluster-a.json -n 4 --stages 1,2,4 \
  --schedules 1f1b,gpipe --microbatches 4,8,16 --iterations 2 -o "$out/vgg16-cluster-a-4.sweep.csv" > /dev/null 2>&1
ls -l "$out"
