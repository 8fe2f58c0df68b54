// Profiler — measures a zoo model layer by layer and writes the profile format the planner reads.
//
// For each layer: its forward and backward times as a worker's stage runs them, timed layer after
// layer over whole microbatches (forward on each layer's real input, recording the graph; then
// backward in reverse with the gradient the next layer gave), and its split backward (input part,
// then weight part, as zero-bubble workers run them), timed on the layer alone and scaled by its
// backward's cost in sequence over alone; after warm-up microbatches, the median of `repeats`. Also
// output (activation) bytes, parameter bytes and, on CPU, the bytes its forward keeps for the
// backward (stashed_bytes: output and saved tensors, counted by the allocator,
// exec/counting_allocator.h; the memory model's per-microbatch figure). Layers form a chain named
// "layer<i>". The first layer's forward also counts making the microbatch's inputs (the first
// stage's data) and the last layer's forward and backward the loss (the last stage's), so both move
// with their layer wherever a plan cuts the model. Times in ms per minibatch of `batch` samples, on
// one thread, as workers run (on a GPU: kernel time included, each timed piece waits for the device).
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
