// Where a training process computes: the CPU, or a CUDA device. GPU kernels run asynchronously, so
// every timer of the runtime (worker events, profiler, probe) waits for the device before it reads
// the clock (wait_for); on the CPU that costs nothing.
// A process that forks training children (launcher, probe) must not touch CUDA itself: CUDA cannot
// be used again in a forked child once its parent has initialized it (profile_model_in_child, profiler.h).
#pragma once

#include <torch/torch.h>

#include <string>

namespace pipetwin::exec {

// "cpu", or "cuda" (process `rank` on GPU rank mod the visible GPUs). Throws Error on another name or
// when no CUDA device is visible.
torch::Device device_for_rank(const std::string& name, int rank);

// Blocks until every kernel queued on `device` has finished (nothing on the CPU).
void wait_for(const torch::Device& device);

// Whether `workers` processes on `name` get a GPU each (NCCL refuses two ranks on one GPU; more
// workers than GPUs exchange tensors through host memory and Gloo instead).
bool one_gpu_per_worker(const std::string& name, int workers);

}  // namespace pipetwin::exec
