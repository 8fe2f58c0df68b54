#!/usr/bin/env bash
# make demo: plan VGG-16 on PipeDream's Cluster-A (16 V100 in 4 servers) and write the plan JSON.
set -euo pipefail
build_dir=${1:-build}
profiles=${2:-../shared/profiles/pipedream}
profile="$profiles/vgg16.txt"
if [ ! -f "$profile" ]; then
  echo "demo: $profile not found; pass PROFILES=<folder with PipeDream's vgg16.txt> to make" >&2
  exit 1
fi
mkdir -p "$build_dir/demo"
"$build_dir/pipetwin" plan --profile "$profile" --cluster platforms/pipedream-cluster-a.json \
  -o "$build_dir/demo/vgg16-cluster-a.plan.json"
