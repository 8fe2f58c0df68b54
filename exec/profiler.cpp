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

// The time once the device has finished what was queued (the timers of every timed piece).
std::chrono::steady_clock::time_point device_now(const torch::Device& device) {
  wait_for(device);
  return std::chrono::steady_clock::now();
}

double ms_between(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// Times of the whole model's microbatch as a worker's stages run it (ms, medians over the repeats).
struct InSequence {
  double making_inputs_ms = 0.0;
  std::vector<double> forward_ms, backward_ms;  // per layer
  double loss_forward_ms = 0.0, loss_backward_ms = 0.0;
};

// Layer after layer on each layer's real input, the loss, then layer after layer back, each with
// the gradient the layer after it gave: what a stage's layers cost in a run, where one layer's work
// follows another's (a layer timed alone, again and again on the same tensors, finds them in the
// cache and its setup done: small layers cost 1.2-2x more in sequence).
InSequence time_in_sequence(const ProfilerOptions& options, Model& model, const torch::Device& device) {
  const std::size_t n = model.layer_count();
  std::vector<double> inputs, loss_forward, loss_backward;
  std::vector<std::vector<double>> forward(n), backward(n);
  auto now = [&] { return device_now(device); };
  for (int i = 0; i < options.warmup + options.repeats; ++i) {
    const bool timed = i >= options.warmup;
    const auto made_from = now();
    torch::Tensor x = model.batch(1, i, options.batch).inputs.to(device);
    const auto made = now();
    if (timed) inputs.push_back(ms_between(made_from, made));
    const torch::Tensor labels = model.labels(1, i, options.batch).to(device);
    std::vector<torch::Tensor> layer_inputs(n), layer_outputs(n);
    for (std::size_t l = 0; l < n; ++l) {
      // The model's first layer takes the data, whose gradient no worker computes.
      layer_inputs[l] = x.is_floating_point() && l > 0 ? x.detach().requires_grad_(true) : x;
      const auto from = now();
      layer_outputs[l] = model.layer(l).forward(layer_inputs[l]);
      const auto to = now();
      if (timed) forward[l].push_back(ms_between(from, to));
      x = layer_outputs[l];
    }
    const torch::Tensor output = x.detach().requires_grad_(true);
    const auto loss_from = now();
    const torch::Tensor loss = model.loss(output, labels);
    const auto loss_to = now();
    loss.backward();
    const auto loss_back = now();
    if (timed) loss_forward.push_back(ms_between(loss_from, loss_to)), loss_backward.push_back(ms_between(loss_to, loss_back));
    torch::Tensor gradient = output.grad();
    for (std::size_t l = n; l-- > 0;) {
      const auto from = now();
      if (layer_outputs[l].requires_grad()) layer_outputs[l].backward(gradient);
      const auto to = now();
      if (timed) backward[l].push_back(ms_between(from, to));
      if (layer_inputs[l].requires_grad()) gradient = layer_inputs[l].grad();
    }
  }
  for (std::size_t l = 0; l < n; ++l) {
    for (auto& parameter : model.layer(l).ptr()->parameters()) parameter.mutable_grad() = torch::Tensor();
  }
  InSequence times;
  times.making_inputs_ms = median_ms(inputs);
  for (std::size_t l = 0; l < n; ++l) {
    times.forward_ms.push_back(median_ms(forward[l]));
    times.backward_ms.push_back(median_ms(backward[l]));
  }
  times.loss_forward_ms = median_ms(loss_forward);
  times.loss_backward_ms = median_ms(loss_backward);
  return times;
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
  for (std::size_t l = 0; l < model.layer_count(); ++l) model.layer(l).ptr()->to(device);
  const InSequence in_sequence = time_in_sequence(options, model, device);
  torch::Tensor input = model.batch(1, 0, options.batch).inputs.to(device);
  std::vector<Layer> layers;
  for (std::size_t l = 0; l < model.layer_count(); ++l) {
    auto& module = model.layer(l);
    Layer layer;
    layer.id = "layer" + std::to_string(l);
    layer.description = model.description(l);
    // The model's first layer takes the data, whose gradient no worker computes.
    const bool float_input = input.is_floating_point() && l > 0;
    const torch::Tensor output = module.forward(float_input ? input.detach().requires_grad_(true) : input);
    layer.fwd_ms = in_sequence.forward_ms[l];
    // The layer's backward alone, then split as zero-bubble workers run it; the parts are scaled by
    // the backward's cost in sequence over its cost alone. Backward alone: a fresh forward each time
    // (not timed), then the timed backward of a unit gradient.
    std::vector<double> backward;
    for (int i = 0; i < options.warmup + options.repeats; ++i) {
      torch::Tensor x = float_input ? input.detach().requires_grad_(true) : input;
      torch::Tensor y = module.forward(x);
      torch::Tensor gradient = torch::ones_like(y);
      const auto start = device_now(device);
      if (y.requires_grad()) y.backward(gradient);
      const auto end = device_now(device);
      if (i >= options.warmup) backward.push_back(ms_between(start, end));
    }
    for (auto& parameter : module.ptr()->parameters()) parameter.mutable_grad() = torch::Tensor();
    const double backward_alone_ms = median_ms(backward);
    layer.bwd_ms = in_sequence.backward_ms[l];
    const double in_sequence_over_alone = backward_alone_ms > 0.0 ? layer.bwd_ms / backward_alone_ms : 1.0;
    // The split backward: the input's gradient first (graph kept), then the weights' gradients alone.
    std::vector<double> input_part, weight_part;
    const auto parameters = module.ptr()->parameters();
    for (int i = 0; i < options.warmup + options.repeats; ++i) {
      torch::Tensor x = float_input ? input.detach().requires_grad_(true) : input;
      torch::Tensor y = module.forward(x);
      if (!y.requires_grad()) break;
      torch::Tensor gradient = torch::ones_like(y);
      const auto start = device_now(device);
      if (float_input) torch::autograd::grad({y}, {x}, {gradient}, true);
      const auto middle = device_now(device);
      if (!parameters.empty()) torch::autograd::grad({y}, parameters, {gradient}, false, false, true);
      const auto end = device_now(device);
      if (i >= options.warmup) {
        input_part.push_back(ms_between(start, middle));
        weight_part.push_back(ms_between(middle, end));
      }
    }
    layer.bwd_input_ms = input_part.empty() ? 0.0 : median_ms(input_part) * in_sequence_over_alone;
    layer.bwd_weight_ms = weight_part.empty() ? 0.0 : median_ms(weight_part) * in_sequence_over_alone;
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
  layers.front().fwd_ms += in_sequence.making_inputs_ms;
  Layer& last = layers.back();
  last.fwd_ms += in_sequence.loss_forward_ms;
  last.bwd_ms += in_sequence.loss_backward_ms;
  if (last.bwd_input_ms) *last.bwd_input_ms += in_sequence.loss_backward_ms;
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
