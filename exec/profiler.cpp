#include "exec/profiler.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "exec/child_processes.h"
#include "exec/compute_device.h"
#include "exec/counting_allocator.h"
#include "exec/model_zoo.h"
#include "exec/process_setup.h"
#include "exec/tensor_parallel.h"
#include "exec/transport.h"
#include "planner/error.h"
#include "planner/profile_io.h"

namespace pipetwin::exec {
namespace {

double median_ms(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

template <typename Work>
double time_ms(int warmup, int repeats, const torch::Device& device, Work work) {
  for (int i = 0; i < warmup; ++i) work();
  std::vector<double> samples;
  for (int i = 0; i < repeats; ++i) {
    wait_for(device);
    const auto start = std::chrono::steady_clock::now();
    work();
    wait_for(device);
    samples.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return median_ms(samples);
}

struct LossTimes {
  double forward_ms = 0.0, backward_ms = 0.0;
};

// The last stage's loss on the model's output as the worker computes it (recording the graph), then
// its backward to the output.
LossTimes measure_loss(const ProfilerOptions& options, const Model& model, const torch::Tensor& output,
                       const torch::Device& device) {
  const torch::Tensor labels = model.labels(1, 0, options.batch).to(device);
  std::vector<double> forward, backward;
  for (int i = 0; i < options.warmup + options.repeats; ++i) {
    const torch::Tensor x = output.detach().requires_grad_(true);
    wait_for(device);
    const auto start = std::chrono::steady_clock::now();
    const torch::Tensor loss = model.loss(x, labels);
    wait_for(device);
    const auto middle = std::chrono::steady_clock::now();
    loss.backward();
    wait_for(device);
    if (i >= options.warmup) {
      forward.push_back(std::chrono::duration<double, std::milli>(middle - start).count());
      backward.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - middle).count());
    }
  }
  return {median_ms(forward), median_ms(backward)};
}


// The figures of a layer measure_layers takes, in the order a tensor-parallel rank hands them back.
constexpr std::size_t kLayerFigures = 7;

std::vector<double> layer_figures(const std::vector<Layer>& layers) {
  std::vector<double> figures;
  for (const Layer& l : layers) {
    const double figures_of_layer[kLayerFigures] = {l.fwd_ms, l.bwd_ms, l.bwd_input_ms.value_or(0.0), l.bwd_weight_ms.value_or(0.0), l.activation_bytes, l.param_bytes,
                                                    l.stashed_bytes.value_or(-1.0)};
    figures.insert(figures.end(), figures_of_layer, figures_of_layer + kLayerFigures);
  }
  return figures;
}

// Rank 0's layers of a tensor-parallel profile: every rank measures its shard at once (they sum
// inside each block, so each waits for the others as in a run), each on its own core.
std::vector<Layer> measure_tensor_parallel_layers(const ProfilerOptions& options) {
  const auto whole = make_model(options.model, options.small);
  std::vector<int> group(options.tensor_parallel);
  for (int k = 0; k < options.tensor_parallel; ++k) group[k] = k;
  const std::size_t numbers = kLayerFigures * whole->layer_count();
  const std::vector<double> figures = run_connected_children(
      options.tensor_parallel, numbers, std::chrono::milliseconds(60000), {group},
      [&](Transport& transport, int rank) {
        auto model = tensor_parallel_model(make_model(options.model, options.small), rank, options.tensor_parallel,
                                           [&](torch::Tensor& tensor) { transport.all_reduce(tensor, group, "profile"); });
        return layer_figures(measure_layers(options, *model, device_for_rank(options.device, rank)));
      },
      "tensor-parallel profiler", "read its message above")[0];
  std::vector<Layer> layers;
  for (std::size_t l = 0; l < whole->layer_count(); ++l) {
    Layer layer;
    layer.id = "layer" + std::to_string(l);
    layer.description = whole->description(l);
    const double* f = figures.data() + kLayerFigures * l;
    layer.fwd_ms = f[0], layer.bwd_ms = f[1], layer.bwd_input_ms = f[2], layer.bwd_weight_ms = f[3];
    layer.activation_bytes = f[4], layer.param_bytes = f[5];
    if (f[6] >= 0.0) layer.stashed_bytes = f[6];
    layers.push_back(layer);
  }
  return layers;
}

}  // namespace

std::vector<Layer> measure_layers(const ProfilerOptions& options, Model& model, const torch::Device& device) {
  torch::Tensor input;
  const double making_inputs_ms =
      time_ms(options.warmup, options.repeats, device, [&] { input = model.batch(1, 0, options.batch).inputs.to(device); });
  std::vector<Layer> layers;
  for (std::size_t l = 0; l < model.layer_count(); ++l) {
    auto& module = model.layer(l);
    module.ptr()->to(device);
    Layer layer;
    layer.id = "layer" + std::to_string(l);
    layer.description = model.description(l);
    // The model's first layer takes the data, whose gradient no worker computes.
    const bool float_input = input.is_floating_point() && l > 0;
    torch::Tensor output;
    // Forward as a worker runs it: recording the graph and keeping what the backward needs.
    layer.fwd_ms = time_ms(options.warmup, options.repeats, device, [&] {
      const torch::Tensor x = float_input ? input.detach().requires_grad_(true) : input;
      output = module.forward(x);
    });
    // Backward: a fresh forward each time (not timed), then the timed backward of a unit gradient.
    std::vector<double> backward;
    for (int i = 0; i < options.warmup + options.repeats; ++i) {
      torch::Tensor x = float_input ? input.detach().requires_grad_(true) : input;
      torch::Tensor y = module.forward(x);
      torch::Tensor gradient = torch::ones_like(y);
      wait_for(device);
      const auto start = std::chrono::steady_clock::now();
      if (y.requires_grad()) y.backward(gradient);
      wait_for(device);
      if (i >= options.warmup) {
        backward.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      }
    }
    for (auto& parameter : module.ptr()->parameters()) parameter.mutable_grad() = torch::Tensor();
    layer.bwd_ms = median_ms(backward);
    // The split backward as zero-bubble workers run it: the input's gradient first (graph kept), then
    // the weights' gradients alone.
    std::vector<double> input_part, weight_part;
    const auto parameters = module.ptr()->parameters();
    for (int i = 0; i < options.warmup + options.repeats; ++i) {
      torch::Tensor x = float_input ? input.detach().requires_grad_(true) : input;
      torch::Tensor y = module.forward(x);
      if (!y.requires_grad()) break;
      torch::Tensor gradient = torch::ones_like(y);
      wait_for(device);
      const auto start = std::chrono::steady_clock::now();
      if (float_input) torch::autograd::grad({y}, {x}, {gradient}, true);
      wait_for(device);
      const auto middle = std::chrono::steady_clock::now();
      if (!parameters.empty()) torch::autograd::grad({y}, parameters, {gradient}, false, false, true);
      wait_for(device);
      const auto end = std::chrono::steady_clock::now();
      if (i >= options.warmup) {
        input_part.push_back(std::chrono::duration<double, std::milli>(middle - start).count());
        weight_part.push_back(std::chrono::duration<double, std::milli>(end - middle).count());
      }
    }
    layer.bwd_input_ms = input_part.empty() ? 0.0 : median_ms(input_part);
    layer.bwd_weight_ms = weight_part.empty() ? 0.0 : median_ms(weight_part);
    layer.activation_bytes = static_cast<double>(output.numel() * output.element_size());
    // What a microbatch in flight keeps of the layer until its backward (W's, when split): the CPU bytes
    // its forward leaves allocated, output and saved tensors, the least over two forwards (the first
    // may fill a cache). The output counts even where the next layer would not keep it (a convolution's
    // before its ReLU): on VGG's GPipe runs this is 1.3x the growth per microbatch measured, and
    // counting the whole chain in one forward instead (such outputs freed) 0.8x (bench/README.md).
    if (device.is_cpu()) {
      std::int64_t kept = -1;
      for (int i = 0; i < 2; ++i) {
        const CountingCpuAllocation counting;
        torch::Tensor x = float_input ? input.detach().requires_grad_(true) : input;
        const std::int64_t before = counting.live_bytes();
        const torch::Tensor y = module.forward(x);
        const std::int64_t after = counting.live_bytes() - before;
        kept = kept < 0 ? after : std::min(kept, after);
      }
      layer.stashed_bytes = static_cast<double>(std::max<std::int64_t>(kept, 0));
    }
    for (const auto& parameter : module.ptr()->parameters()) {
      layer.param_bytes += static_cast<double>(parameter.numel() * parameter.element_size());
    }
    layers.push_back(layer);
    input = output.detach();
  }
  // What the first and last stages do beside their layers, charged to the layers they always hold.
  layers.front().fwd_ms += making_inputs_ms;
  const LossTimes loss = measure_loss(options, model, input, device);
  Layer& last = layers.back();
  last.fwd_ms += loss.forward_ms;
  last.bwd_ms += loss.backward_ms;
  if (last.bwd_input_ms) *last.bwd_input_ms += loss.backward_ms;
  return layers;
}

Profile profile_model(const ProfilerOptions& options) {
  if (options.batch < 1 || options.repeats < 1 || options.warmup < 0) {
    throw Error({"", 0, "--batch"}, "batch and repeats must be >= 1, warm-up >= 0", "e.g. --batch 32 --repeats 5");
  }
  check_tensor_parallel(options.model, options.tensor_parallel);
  std::vector<Layer> layers;
  if (options.tensor_parallel > 1) {
    layers = measure_tensor_parallel_layers(options);  // its processes set up as workers (run_connected_children)
  } else {
    keep_freed_memory();  // as the workers run (run_worker), so profiled times match theirs
    torch::set_num_threads(1);
    auto model = make_model(options.model, options.small);
    layers = measure_layers(options, *model, device_for_rank(options.device, 0));
  }
  std::vector<Profile::Edge> edges;
  for (std::size_t l = 1; l < layers.size(); ++l) edges.emplace_back(l - 1, l);
  return Profile(tensor_parallel_profile_name(options.model, options.tensor_parallel), options.batch, layers, edges,
                 "profile of " + options.model);
}

Profile profile_model_in_child(const ProfilerOptions& options, const std::string& scratch_path) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw Error({"", 0, "profile"}, "cannot start the profiling process", "free memory");
  if (pid == 0) {
    int status = 0;
    try {
      write_profile_json(profile_model(options), scratch_path);
    } catch (const std::exception& error) {
      std::fprintf(stderr, "pipetwin: error: profiling %s: %s\n", options.model.c_str(), error.what());
      status = 1;
    }
    std::fflush(nullptr);
    ::_exit(status);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw Error({"", 0, "profile"}, "profiling " + options.model + " on " + options.device + " failed",
                "read its message above");
  }
  Profile profile = load_profile(scratch_path);
  std::filesystem::remove(scratch_path);
  return profile;
}

}  // namespace pipetwin::exec
