// `pipetwin model`: write the profile of a decoder-only transformer from its description (a preset,
// shape options, or a preset with some shape options changed), timed on a cluster's device.
#include <cstdio>
#include <iostream>
#include <optional>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "planner/cluster.h"
#include "planner/error.h"
#include "planner/json_fields.h"
#include "planner/profile_io.h"
#include "planner/transformer_model.h"

namespace pipetwin::cli {
namespace {

struct ModelArguments {
  ModelShapeArguments shape;
  int microbatch_size = 1;
  int tensor_parallel = 1;
  bool sequence_parallel = false;
  std::string groups_cluster_path;
  std::string recompute = "none";
  std::string cluster_path;
  std::optional<double> peak_tflops, efficiency, half_dimension;
  std::string output_path;
  bool list_presets = false;
};

TransformerSpec spec_from(const ModelArguments& arguments) {
  TransformerSpec spec = model_spec(arguments.shape);
  spec.microbatch_size = arguments.microbatch_size;
  spec.tensor_parallel = arguments.tensor_parallel;
  spec.sequence_parallel = arguments.sequence_parallel;
  check_transformer_spec(spec);
  return spec;
}

GemmRate rate_from(const ModelArguments& arguments) {
  GemmRate rate = gemm_rate(arguments.cluster_path.empty() ? DeviceSpec{} : load_cluster(arguments.cluster_path).device());
  if (arguments.peak_tflops) rate.peak_flops = *arguments.peak_tflops * 1e12;
  take(arguments.efficiency, rate.efficiency);
  take(arguments.half_dimension, rate.half_dimension);
  if (!(rate.peak_flops > 0.0)) {
    if (arguments.cluster_path.empty()) {
      throw pipetwin::Error({"", 0, "--cluster"}, "no device to time the model on",
                  "give --cluster FILE (its device's peak_flops and matmul_efficiency) or --peak-tflops N");
    }
    throw pipetwin::Error({arguments.cluster_path, 0, "device.peak_flops"}, "the cluster does not give the device's peak FLOP/s",
                "add device.peak_flops (e.g. 3.12e14 for an A100's bf16), or give --peak-tflops N");
  }
  return rate;
}

std::string figure(double value, const char* unit) {
  char text[64];
  std::snprintf(text, sizeof text, "%.4g %s", value, unit);
  return text;
}

int run_model(const ModelArguments& arguments) {
  if (arguments.list_presets) {
    for (const std::string& name : transformer_preset_names()) {
      const TransformerSpec spec = transformer_preset(name);
      std::cout << name << ": L=" << spec.layers << " h=" << spec.hidden << " f=" << spec.ffn_hidden
                << " heads=" << spec.heads << " kv=" << spec.kv_heads << " V=" << spec.vocabulary
                << " s=" << spec.sequence_length << "\n  source: " << spec.source << "\n";
    }
    return 0;
  }
  if (arguments.output_path.empty()) {
    throw pipetwin::Error({"", 0, "--output"}, "no output file", "give -o PROFILE.json (or --list-presets)");
  }
  const TransformerSpec spec = spec_from(arguments);
  const Recomputation mode = recomputation_from_name(arguments.recompute, "--recompute");
  const GemmRate rate = rate_from(arguments);
  TensorParallelLink link;
  std::optional<Cluster> groups;
  if (spec.tensor_parallel > 1) {
    if (arguments.cluster_path.empty()) {
      throw pipetwin::Error({"", 0, "--tp"}, "tensor parallelism needs the cluster its groups run on",
                            "give --cluster FILE: its innermost level is the tensor-parallel link");
    }
    const Cluster cluster = load_cluster(arguments.cluster_path);
    link = {cluster.levels().front().bandwidth_bytes_per_s, cluster.levels().front().latency_s};
    groups = tensor_parallel_groups(cluster, spec.tensor_parallel);
  }
  if (!arguments.groups_cluster_path.empty() && !groups) {
    throw pipetwin::Error({"", 0, "--groups-cluster"}, "no tensor-parallel groups to write", "give --tp 2 or more");
  }
  const Profile profile = transformer_profile(spec, mode, rate, link);
  write_profile_json(profile, arguments.output_path);
  if (groups && !arguments.groups_cluster_path.empty()) {
    json_fields::write_text_atomically(arguments.groups_cluster_path, cluster_to_json(*groups).dump(2) + "\n");
  }

  double parameters = 0, flops = 0;
  for (const TransformerLayerCost& cost : transformer_layer_costs(spec, mode)) {
    parameters += cost.parameters;
    flops += cost.forward_flops + cost.backward_input_flops + cost.backward_weight_flops + cost.recompute_flops;
  }
  const Layer& block = profile.layer(1);
  double compute_s = 0;
  for (const Layer& layer : profile.layers()) compute_s += compute_ms(layer) / 1000.0;
  std::cout << "Wrote " << arguments.output_path << ": " << profile.name() << ", " << profile.layer_count()
            << " layers (embedding, " << spec.layers << " blocks, output), microbatch " << spec.microbatch_size << " x "
            << spec.sequence_length << " tokens, recomputation " << recomputation_name(mode) << "\n"
            << "  parameters" << (spec.tensor_parallel > 1 ? " per GPU " : " ") << figure(parameters / 1e9, "B") << " (" << figure(parameters * spec.element_bytes / 1e9, "GB")
            << " of weights, " << figure(parameters * spec.optimizer_bytes_per_parameter / 1e9, "GB")
            << " of gradients and optimizer state)\n"
            << "  per microbatch: " << figure(flops / 1e12, "TFLOP") << " (forward, backward, recomputation), "
            << figure(compute_s, "s") << " on one device at " << figure(rate.peak_flops / 1e12, "TFLOP/s") << " peak x "
            << rate.efficiency << (rate.half_dimension > 0 ? " x shape factor" : "") << " = "
            << figure(flops / compute_s / 1e12, "TFLOP/s") << " achieved\n"
            << "  per block: forward " << figure(block.fwd_ms, "ms") << ", backward " << figure(block.bwd_ms, "ms")
            << (block.recompute_ms ? ", recomputation " + figure(*block.recompute_ms, "ms") + " (before its backward)" : "")
            << ", stashed " << figure(stashed_bytes(block) / 1e9, "GB") << ", sends "
            << figure(block.activation_bytes / 1e6, "MB") << "\n";
  if (groups) {
    std::cout << "  per GPU of a tensor-parallel group of " << spec.tensor_parallel
              << " (its all-reduces in the times for the planner; simulate runs them on the GPUs' links): plan it on a "
                 "cluster of one worker per group, "
              << groups->worker_count() << " workers"
              << (arguments.groups_cluster_path.empty() ? " (--groups-cluster FILE writes it)"
                                                         : ", written to " + arguments.groups_cluster_path)
              << "\n";
  }
  return 0;
}

}  // namespace

Command add_model_command(CLI::App& app) {
  auto arguments = std::make_shared<ModelArguments>();
  CLI::App* command = app.add_subcommand(
      "model",
      "Describe a decoder-only transformer and write its profile without running it: an embedding, one\n"
      "layer per block and an output layer, each with forward, backward-input and backward-weight times\n"
      "(GEMM FLOPs over the device's peak x matmul_efficiency, with a shape factor when the cluster gives\n"
      "matmul_half_dimension), FLOPs, weights, gradient/optimizer bytes, activations stashed under the\n"
      "recomputation mode and bytes sent to the next stage (closed forms: planner/transformer_model.h).\n"
      "Start from a --preset (--list-presets shows them and their sources) and change any figure, or\n"
      "give the whole shape. Example:\n"
      "  pipetwin model --preset llama2-70b --recompute selective --cluster platforms/dgx-h100.json -o llama.json");
  add_model_shape_options(command, arguments->shape);
  command->add_flag("--list-presets", arguments->list_presets, "print the presets, their shapes and sources");
  command->add_option("--microbatch-size,-b", arguments->microbatch_size, "samples per microbatch")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--recompute", arguments->recompute,
                      "activation recomputation: none, selective (attention core) or full (whole blocks)")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "selective", "full"}));
  command->add_option("--tp", arguments->tensor_parallel,
                      "tensor-parallel degree t: the profile is one GPU's share of a group of t on the innermost level")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_flag("--sequence-parallel", arguments->sequence_parallel,
                    "split the activations outside attention and MLP across the t GPUs too");
  command->add_option("--groups-cluster", arguments->groups_cluster_path,
                      "with --tp: write the cluster seen as one worker per tensor-parallel group (plan and simulate on it)");
  command->add_option("--cluster,-c", arguments->cluster_path, "cluster whose device times the model")
      ->check(CLI::ExistingFile);
  command->add_option("--peak-tflops", arguments->peak_tflops, "device peak in TFLOP/s (instead of, or over, --cluster)")
      ->check(CLI::PositiveNumber);
  command->add_option("--efficiency", arguments->efficiency, "share of the peak a large GEMM reaches (0..1]")
      ->check(CLI::Range(1e-6, 1.0));
  command->add_option("--half-dimension", arguments->half_dimension,
                      "GEMM dimension at which the rate halves (0: none)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--output,-o", arguments->output_path, "profile JSON to write");
  return [arguments] { return run_model(*arguments); };
}

}  // namespace pipetwin::cli
