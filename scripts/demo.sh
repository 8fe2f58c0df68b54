#!/usr/bin/env bash
# make demo: plan VGG-16 (PipeDream's profile) on PipeDream's Cluster-A (16 V100 in 4 servers) with
# PipeDream's optimizer, then simulate the plan with PipeDream's asynchronous 1F1B schedule on a
# SimGrid model of the cluster, and print both summaries; then search plans of VGG-16 that fit the
# V100s' memory (PipeDream's does not, unless it recomputes), and the fastest plan of Llama 2 70B on 256 H100 that fits, and
# simulate it. Outputs land in build/demo/.
set -euo pipefail
build_dir=${1:-build}
profiles=${2:-../shared/profiles/pipedream}
profile="$profiles/vgg16.txt"
if [ ! -f "$profile" ]; then
  echo "demo: $profile not found; pass PROFILES=<folder with PipeDream's vgg16.txt> to make" >&2
  exit 1
fi
out="$build_dir/demo"
mkdir -p "$out"
echo "== pipetwin plan"
"$build_dir/pipetwin" plan --profile "$profile" --cluster platforms/pipedream-cluster-a.json \
  -o "$out/vgg16-cluster-a.plan.json"
echo
echo "== pipetwin simulate (the plan's schedule: PipeDream's asynchronous 1F1B)"
echo "PipeDream's VGG-16 profile stashes 14.7 GB of activations per minibatch, so stage 0 is over the V100's"
echo "16 GB in pipetwin's memory model (simulate refuses such a plan); --ignore-memory shows its timing anyway."
"$build_dir/pipetwin" simulate --ignore-memory --cluster platforms/pipedream-cluster-a.json --plan "$out/vgg16-cluster-a.plan.json" \
  --iterations 4 --warmup 1 -o "$out/vgg16-cluster-a.trace.jsonl" --chrome "$out/vgg16-cluster-a.chrome.json"
echo
echo "== pipetwin simulate --recompute auto (PipeDream's split kept: the stage over the 16 GB keeps only its"
echo "   input per microbatch in flight and runs its forward again before each backward; it fits, one forward slower)"
"$build_dir/pipetwin" plan --profile "$profile" --cluster platforms/pipedream-cluster-a.json --recompute auto -q \
  -o "$out/vgg16-cluster-a-recomputed.plan.json"
"$build_dir/pipetwin" simulate --cluster platforms/pipedream-cluster-a.json --plan "$out/vgg16-cluster-a-recomputed.plan.json" \
  --iterations 4 --warmup 1 | sed -n '1,6p'
echo
echo "== pipetwin search (plans of the same VGG-16 that fit the V100s' 16 GB: stage counts, data parallelism,"
echo "   microbatches of 64, 32, 16 or 8 samples, 1024 samples per iteration)"
"$build_dir/pipetwin" search --profile "$profile" --cluster platforms/pipedream-cluster-a.json --global-batch 1024 \
  --top 3 2>/dev/null
echo
echo "== pipetwin search (a transformer described, not measured: which TP x PP x DP, recomputation,"
echo "   microbatch and schedule train Llama 2 70B fastest on 256 H100 within their 80 GB?)"
"$build_dir/pipetwin" search --preset llama2-70b --cluster platforms/dgx-h100.json --global-batch 512 --top 5 \
  -o "$out/llama2-70b" 2>/dev/null
echo
echo "== pipetwin simulate (the chosen plan, with contention on the simulated links)"
"$build_dir/pipetwin" simulate --cluster "$out/llama2-70b/cluster.json" --plan "$out/llama2-70b/plan.json" \
  --iterations 1 --warmup 0 | sed -n '1,4p'
