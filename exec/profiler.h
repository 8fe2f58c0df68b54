// Profiler — measures a zoo model layer by layer and writes the profile format the planner reads.
//
// For each layer, with the previous layer's output as input: forward (recording the graph, as a
// worker's forward does), backward and split backward (input part, then weight part, as zero-bubble
// workers run them) times (after warm-up runs, the median of `repeats`), output (activation) bytes,
// parameter bytes and, on CPU, the bytes its forward keeps for the backward (stashed_bytes: output
// and saved tensors, counted by the allocator, exec/counting_allocator.h; the memory model's
// per-microbatch figure). Layers form a chain named "layer<i>". The first layer's forward also
// counts making the microbatch's inputs (the first stage's data) and the last layer's forward and
// backward the loss (the last stage's), so both move with their layer wherever a plan cuts the
// model. Times in ms per minibatch of `batch` samples, on one thread, as workers run (on a GPU:
// kernel time included, each timed piece waits for the device).
// With tensor parallelism t (gpt only), t processes each measure their rank's shard at once, summing
// inside every block as workers do (exec/tensor_parallel.h): rank 0's times, per-rank parameter bytes.
#pragma once

#include <string>

#include <torch/torch.h>

#include <vector>

#include "exec/model_zoo.h"
#include "planner/profile.h"

namespace pipetwin::exec {

struct ProfilerOptions {
  std::string model = "mlp";
  int batch = 32;
  int warmup = 2;
  int repeats = 5;
  bool small = true;
  std::string device = "cpu";  // "cpu" or "cuda" (compute_device.h: the timers wait for the GPU)
  int tensor_parallel = 1;     // t ranks of a tensor-parallel group (run --tp)
};

Profile profile_model(const ProfilerOptions& options);

// The layers of `model` (options.model aside) on `device`, in order, as profile_model measures them.
std::vector<Layer> measure_layers(const ProfilerOptions& options, Model& model, const torch::Device& device);

// profile_model in a child process, its profile handed back through `scratch_path` (removed after):
// for a process that forks CUDA workers later and so must not initialize CUDA itself.
Profile profile_model_in_child(const ProfilerOptions& options, const std::string& scratch_path);

}  // namespace pipetwin::exec
