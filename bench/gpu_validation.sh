#!/usr/bin/env bash
# The out-of-sample protocol (bench/validation_matrix.sh) on a GPU machine, in two halves:
#  1. here, on the GPU machine: build pipetwin against the machine's CUDA libtorch (SimGrid is not
#     needed: -DPIPETWIN_WITH_SIMGRID=OFF), then for each model `validate --matrix --measure-only
#     --device cuda`: profile on the GPU, cut the 14 configurations, run each RUNS times round-robin,
#     probe 1..3 processes sharing the GPU;
#  2. where SimGrid is: predict from the same folders without running again,
#       VALIDATE_FLAGS=--reuse-runs bench/validation_matrix.sh build <output-dir> <models...>
# Usage: bench/gpu_validation.sh [output-dir] [models...]      (default: bench-results/gpu-matrix vgg16 gpt)
# Environment: RUNS (3); DEPS_PREFIX: a prefix with the headers and CMake configs of Boost,
# nlohmann_json and CLI11 when the machine has none (GPU images rarely do); NCCL=ON also builds the
# NCCL transport (used when every worker has its own GPU; with one GPU the workers share it through
# Gloo and host memory); BUDGET_S: start no new model after this many seconds (default: no limit).
set -euo pipefail
out=${1:-bench-results/gpu-matrix}
shift $(( $# > 0 ? 1 : 0 ))
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(vgg16 gpt)
build=${BUILD_DIR:-build-gpu}
export PATH=/usr/local/cuda/bin:$PATH
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
echo "== torch $(python3 -c 'import torch; print(torch.__version__, torch.version.cuda)'), $(nproc) cores" >&2
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DPIPETWIN_WITH_SIMGRID=OFF \
  -DPIPETWIN_WITH_NCCL="${NCCL:-OFF}" -DCMAKE_PREFIX_PATH="$torch_prefix;${DEPS_PREFIX:-/usr}" \
  -DCMAKE_POLICY_VERSION_MINIMUM=3.5 >&2
cmake --build "$build" -j "$(nproc)" --target pipetwin pipetwin-exec >&2
mkdir -p "$out"
start=$SECONDS
for model in "${models[@]}"; do
  if [ -n "${BUDGET_S:-}" ] && [ $((SECONDS - start)) -gt "$BUDGET_S" ]; then
    echo "== $model skipped: past BUDGET_S=$BUDGET_S s" >&2
    continue
  fi
  echo "== $model" >&2
  "$build/pipetwin" validate --matrix --measure-only --device cuda --model "$model" --runs "${RUNS:-3}" -o "$out/$model"
done
echo "== measured in $((SECONDS - start)) s; predict with: VALIDATE_FLAGS=--reuse-runs bench/validation_matrix.sh build $out ${models[*]}" >&2
