#include "planner/transformer_model.h"

#include <algorithm>
#include <cmath>

#include "planner/error.h"
#include "planner/schedule_evaluator.h"

namespace pipetwin {

namespace {

TransformerSpec llama(std::string name, std::string source, int layers, int hidden, int ffn_hidden, int heads,
                      int kv_heads, long long vocabulary, int sequence_length) {
  TransformerSpec spec;
  spec.name = std::move(name);
  spec.source = std::move(source);
  spec.layers = layers, spec.hidden = hidden, spec.ffn_hidden = ffn_hidden;
  spec.heads = heads, spec.kv_heads = kv_heads;
  spec.vocabulary = vocabulary, spec.sequence_length = sequence_length;
  spec.gated_mlp = true;  // SwiGLU, RMSNorm, no biases, no dropout, rotary positions, untied output
  return spec;
}

std::vector<TransformerSpec> presets() {
  TransformerSpec gpt3;
  gpt3.name = "gpt3-175b";
  gpt3.source =
      "Brown et al. 2020, 'Language Models are Few-Shot Learners', Table 2.1 (96 layers, d_model 12288, 96 heads, "
      "context 2048); vocabulary padded to 51200 and GeLU MLP of 4h as Megatron-LM trains it (Narayanan et al. "
      "SC'21, Table 1)";
  gpt3.layers = 96, gpt3.hidden = 12288, gpt3.ffn_hidden = 4 * 12288, gpt3.heads = 96, gpt3.kv_heads = 96;
  gpt3.vocabulary = 51200, gpt3.sequence_length = 2048;
  gpt3.linear_biases = true, gpt3.dropout = true, gpt3.tied_embeddings = true, gpt3.learned_positions = true;
  const std::string llama2 = "Touvron et al. 2023, 'Llama 2', Table 1 (context 4096, GQA for 70B) and the released config.json";
  const std::string llama3 = "Llama Team 2024, 'The Llama 3 Herd of Models', Table 3 (layers, model dimension, FFN "
                             "dimension, heads, 8 key/value heads, vocabulary 128,000 + 256 special tokens); context 8192";
  return {gpt3,
          llama("llama2-7b", llama2, 32, 4096, 11008, 32, 32, 32000, 4096),
          llama("llama2-70b", llama2, 80, 8192, 28672, 64, 8, 32000, 4096),
          llama("llama3-8b", llama3, 32, 4096, 14336, 32, 8, 128256, 8192),
          llama("llama3-70b", llama3, 80, 8192, 28672, 64, 8, 128256, 8192),
          llama("llama3-405b", llama3, 126, 16384, 53248, 128, 8, 128256, 8192)};
}

// Closed forms of one block (header comment).
TransformerLayerCost block_cost(const TransformerSpec& spec, Recomputation mode, int index) {
  const double b = spec.microbatch_size, s = spec.sequence_length, h = spec.hidden, t = spec.tensor_parallel;
  const double d = h / spec.heads, e = spec.element_bytes;
  // One rank's share: heads, key/value heads (replicated when fewer than t) and FFN columns.
  const double a = spec.heads / t, kd = std::max(1.0, spec.kv_heads / t) * d, f = spec.ffn_hidden / t, hq = h / t;
  TransformerLayerCost cost;
  cost.id = "block" + std::to_string(index);
  cost.description = "transformer block " + std::to_string(index);
  const double tokens = b * s;
  cost.weighted = {{tokens, hq + 2 * kd, h, 1}, {tokens, h, hq, 1}, {tokens, f, h, spec.gated_mlp ? 2.0 : 1.0},
                   {tokens, h, f, 1}};
  cost.scores = {{s, s, d, a * b}, {s, d, s, a * b}};
  double weighted_flops = 0, score_flops = 0;
  for (const Gemm& gemm : cost.weighted) weighted_flops += gemm.flops();
  for (const Gemm& gemm : cost.scores) score_flops += gemm.flops();
  cost.forward_flops = weighted_flops + score_flops;
  cost.backward_input_flops = weighted_flops + 2 * score_flops;
  cost.backward_weight_flops = weighted_flops;
  if (mode == Recomputation::full) cost.recomputed = cost.weighted;
  if (mode != Recomputation::none) cost.recomputed.insert(cost.recomputed.end(), cost.scores.begin(), cost.scores.end());
  for (const Gemm& gemm : cost.recomputed) cost.recompute_flops += gemm.flops();

  const double norm = spec.linear_biases ? 2 * h : h;
  cost.parameters = h * (hq + 2 * kd) + h * hq + (spec.gated_mlp ? 3 : 2) * h * f + 2 * norm;
  if (spec.linear_biases) cost.parameters += (hq + 2 * kd) + h + f + h;  // column-parallel split, row-parallel whole

  const double sbh = tokens * h, replicated_share = spec.sequence_parallel ? 1 / t : 1.0;
  double replicated = 2 * e * sbh  // the two norms' inputs
                      + e * sbh    // QKV input
                      + e * sbh;   // MLP input
  if (spec.dropout) replicated += 2 * sbh;  // one-byte masks after attention and after the MLP
  const double split = e * tokens * (hq + kd)  // Q and K
                       + e * tokens * kd       // V
                       + e * tokens * hq       // out projection input
                       + (spec.gated_mlp ? 3 : 2) * e * tokens * f;
  const double linear = replicated * replicated_share + split;
  const double score_elements = a * s * s * b;
  const double scores = e * score_elements + (spec.dropout ? (1 + e) * score_elements : 0.0);
  cost.stashed_bytes = mode == Recomputation::full   ? e * sbh * replicated_share
                       : mode == Recomputation::selective ? linear
                                                          : linear + scores;
  cost.recompute_bytes = linear + scores - cost.stashed_bytes;
  cost.output_bytes = e * sbh / t;
  if (spec.tensor_parallel > 1) {
    cost.tensor_allreduces_forward = 2, cost.tensor_allreduces_backward = 2;
    cost.tensor_allreduces_recomputed = mode == Recomputation::full ? 2 : 0;
    cost.tensor_allreduce_bytes = e * sbh;
  }
  return cost;
}

std::string shape_fix(const std::string& what) { return what + " (see pipetwin model --help)"; }

}  // namespace

std::string recomputation_name(Recomputation mode) {
  switch (mode) {
    case Recomputation::none: return "none";
    case Recomputation::selective: return "selective";
    case Recomputation::full: return "full";
  }
  return "none";
}

Recomputation recomputation_from_name(const std::string& name, const std::string& field) {
  for (Recomputation mode : {Recomputation::none, Recomputation::selective, Recomputation::full}) {
    if (recomputation_name(mode) == name) return mode;
  }
  throw Error({"", 0, field}, "unknown recomputation '" + name + "'", "use none, selective or full");
}

std::vector<std::string> transformer_preset_names() {
  std::vector<std::string> names;
  for (const TransformerSpec& spec : presets()) names.push_back(spec.name);
  return names;
}

TransformerSpec transformer_preset(const std::string& name) {
  std::string known;
  for (const TransformerSpec& spec : presets()) {
    if (spec.name == name) return spec;
    known += (known.empty() ? "" : ", ") + spec.name;
  }
  throw Error({"", 0, "--preset"}, "unknown preset '" + name + "'", "use one of " + known);
}

void check_transformer_spec(const TransformerSpec& spec) {
  auto positive = [](long long value, const char* field, const char* example) {
    if (value < 1) {
      throw Error({"", 0, field}, std::string(field) + " must be >= 1, got " + std::to_string(value),
                  shape_fix(std::string("e.g. ") + field + " " + example));
    }
  };
  positive(spec.layers, "--layers", "32");
  positive(spec.hidden, "--hidden", "4096");
  positive(spec.ffn_hidden, "--ffn-hidden", "11008");
  positive(spec.heads, "--heads", "32");
  positive(spec.kv_heads, "--kv-heads", "8");
  positive(spec.vocabulary, "--vocabulary", "32000");
  positive(spec.sequence_length, "--sequence-length", "4096");
  positive(spec.microbatch_size, "--microbatch-size", "1");
  positive(spec.element_bytes, "--element-bytes", "2");
  positive(spec.tensor_parallel, "--tp", "8");
  if (spec.hidden % spec.heads != 0) {
    throw Error({"", 0, "--heads"},
                "hidden size " + std::to_string(spec.hidden) + " is not divisible by " + std::to_string(spec.heads) + " heads",
                shape_fix("give heads that divide the hidden size"));
  }
  if (spec.kv_heads > spec.heads || spec.heads % spec.kv_heads != 0) {
    throw Error({"", 0, "--kv-heads"},
                std::to_string(spec.kv_heads) + " key/value heads do not divide " + std::to_string(spec.heads) + " heads",
                shape_fix("give kv heads that divide the heads (equal for multi-head attention)"));
  }
  const int t = spec.tensor_parallel;
  if (spec.heads % t != 0 || spec.ffn_hidden % t != 0 || spec.vocabulary % t != 0) {
    throw Error({"", 0, "--tp"},
                "tensor parallelism " + std::to_string(t) + " does not divide the heads (" + std::to_string(spec.heads) +
                    "), the FFN size (" + std::to_string(spec.ffn_hidden) + ") and the vocabulary (" +
                    std::to_string(spec.vocabulary) + ")",
                shape_fix("use a degree that divides all three"));
  }
  if (spec.kv_heads % t != 0 && t % spec.kv_heads != 0) {
    throw Error({"", 0, "--tp"},
                "tensor parallelism " + std::to_string(t) + " and " + std::to_string(spec.kv_heads) +
                    " key/value heads: neither divides the other",
                shape_fix("use a degree that divides the kv heads or a multiple of them"));
  }
  if (!(spec.optimizer_bytes_per_parameter >= 0.0) || !std::isfinite(spec.optimizer_bytes_per_parameter)) {
    throw Error({"", 0, "--optimizer-bytes"}, "optimizer bytes per parameter must be >= 0",
                shape_fix("e.g. 16 for mixed-precision Adam"));
  }
}

std::vector<TransformerLayerCost> transformer_layer_costs(const TransformerSpec& spec, Recomputation mode) {
  check_transformer_spec(spec);
  const double b = spec.microbatch_size, s = spec.sequence_length, h = spec.hidden, e = spec.element_bytes;
  const double t = spec.tensor_parallel, replicated_share = spec.sequence_parallel ? 1 / t : 1.0;
  const double vocabulary = static_cast<double>(spec.vocabulary);
  const double sbh = b * s * h;
  std::vector<TransformerLayerCost> costs;
  auto tensor_parallel_allreduces = [&](TransformerLayerCost& cost, int forward, int backward) {
    if (spec.tensor_parallel == 1) return;
    cost.tensor_allreduces_forward = forward, cost.tensor_allreduces_backward = backward;
    cost.tensor_allreduce_bytes = e * sbh;
  };

  TransformerLayerCost embedding;
  embedding.id = "embedding";
  embedding.description = "token embedding" + std::string(spec.learned_positions ? " and learned positions" : "");
  embedding.parameters = vocabulary / t * h + (spec.learned_positions ? s * h : 0.0);  // vocabulary-parallel
  embedding.stashed_bytes = 8 * b * s + (spec.dropout ? sbh * replicated_share : 0.0);
  embedding.output_bytes = e * sbh / t;
  tensor_parallel_allreduces(embedding, 1, 0);
  costs.push_back(embedding);

  for (int layer = 0; layer < spec.layers; ++layer) costs.push_back(block_cost(spec, mode, layer));

  TransformerLayerCost output;
  output.id = "output";
  output.description = "final norm, logits and cross-entropy loss";
  output.weighted = {{b * s, vocabulary / t, h, 1}};
  output.forward_flops = output.weighted.front().flops();
  output.backward_input_flops = output.backward_weight_flops = output.forward_flops;
  output.parameters = (spec.linear_biases ? 2 * h : h) + (spec.tied_embeddings ? 0.0 : vocabulary / t * h);
  output.stashed_bytes = 2 * e * sbh * replicated_share + 4 * b * s * vocabulary / t;
  output.output_bytes = 4;
  tensor_parallel_allreduces(output, 0, 1);
  costs.push_back(output);
  return costs;
}

double TensorParallelLink::allreduce_s(double bytes, int ranks) const {
  return CommunicationCost{bandwidth_bytes_per_s, latency_s}.ring_allreduce_s(bytes, ranks);
}

Cluster tensor_parallel_groups(const Cluster& cluster, int tensor_parallel) {
  std::vector<ClusterLevel> levels = cluster.levels();
  if (tensor_parallel < 1 || levels.front().count % tensor_parallel != 0) {
    throw Error({cluster.source_path(), 0, "--tp"},
                "tensor parallelism " + std::to_string(tensor_parallel) + " does not divide the " +
                    std::to_string(levels.front().count) + " GPUs of a " + levels.front().name,
                "tensor-parallel groups stay inside the innermost level: use a divisor of its count");
  }
  if (tensor_parallel == 1) return cluster;
  if (cluster.fabric().kind == "rail-optimized") {
    throw Error({cluster.source_path(), 0, "fabric.kind"}, "a rail-optimized fabric has one NIC per GPU, not per group",
                "plan tensor-parallel groups on the cluster's levels (a copy of the file without \"fabric\")");
  }
  levels.front().count /= tensor_parallel;
  return Cluster(cluster.name() + "-tp" + std::to_string(tensor_parallel),
                 cluster.description() + " Seen as groups of " + std::to_string(tensor_parallel) +
                     " tensor-parallel GPUs, one worker each.",
                 cluster.device(), levels, cluster.source_path(), cluster.fabric());
}

double GemmRate::seconds(const Gemm& gemm) const {
  double rate = peak_flops * efficiency;
  if (half_dimension > 0.0) {
    for (double dimension : {gemm.m, gemm.n, gemm.k}) rate *= dimension / (dimension + half_dimension);
  }
  return gemm.flops() / rate;
}

Profile transformer_profile(const TransformerSpec& spec, Recomputation mode, const GemmRate& rate,
                            const TensorParallelLink& link) {
  if (spec.tensor_parallel > 1 && !(link.bandwidth_bytes_per_s > 0.0)) {
    throw Error({"", 0, "--tp"}, "tensor parallelism needs the bandwidth of the GPUs' innermost link",
                "give --cluster (its innermost level is the tensor-parallel link)");
  }
  if (!(rate.peak_flops > 0.0) || !(rate.efficiency > 0.0) || rate.efficiency > 1.0 || rate.half_dimension < 0.0) {
    throw Error({"", 0, "--efficiency"}, "the GEMM rate needs a peak > 0, an efficiency in (0, 1] and a half dimension >= 0",
                "e.g. --peak-tflops 312 --efficiency 0.6");
  }
  std::vector<Layer> layers;
  std::vector<Profile::Edge> edges;
  for (const TransformerLayerCost& cost : transformer_layer_costs(spec, mode)) {
    double weighted_s = 0, scores_s = 0, recompute_s = 0;
    for (const Gemm& gemm : cost.weighted) weighted_s += rate.seconds(gemm);
    for (const Gemm& gemm : cost.scores) scores_s += rate.seconds(gemm);
    for (const Gemm& gemm : cost.recomputed) recompute_s += rate.seconds(gemm);
    Layer layer;
    layer.id = cost.id;
    layer.description = cost.description;
    const double allreduce_s = link.allreduce_s(cost.tensor_allreduce_bytes, spec.tensor_parallel);
    const double forward_comm_s = cost.tensor_allreduces_forward * allreduce_s;
    const double backward_comm_s = cost.tensor_allreduces_backward * allreduce_s;
    layer.fwd_ms = 1000.0 * (weighted_s + scores_s + forward_comm_s);
    layer.bwd_input_ms = 1000.0 * (weighted_s + 2 * scores_s + backward_comm_s);
    if (!cost.recomputed.empty()) {  // a RECOMPUTE before the backward (schedule_lowering.h)
      layer.recompute_ms = 1000.0 * (recompute_s + cost.tensor_allreduces_recomputed * allreduce_s);
      layer.recompute_bytes = cost.recompute_bytes;
    }
    layer.bwd_weight_ms = 1000.0 * weighted_s;
    if (spec.tensor_parallel > 1) {
      layer.tensor_sums.ranks = spec.tensor_parallel;
      for (auto [pass, count] : {std::pair{&layer.tensor_sums.forward, cost.tensor_allreduces_forward},
                                 std::pair{&layer.tensor_sums.backward, cost.tensor_allreduces_backward},
                                 std::pair{&layer.tensor_sums.recompute, cost.recomputed.empty() ? 0 : cost.tensor_allreduces_recomputed}}) {
        *pass = {count, count * cost.tensor_allreduce_bytes, count * allreduce_s};
      }
    }
    layer.bwd_ms = *layer.bwd_input_ms + *layer.bwd_weight_ms;
    layer.flops = cost.forward_flops;
    layer.activation_bytes = cost.output_bytes;
    layer.stashed_bytes = cost.stashed_bytes;
    layer.param_bytes = cost.parameters * spec.element_bytes;
    layer.optimizer_bytes = cost.parameters * spec.optimizer_bytes_per_parameter;
    if (!layers.empty()) edges.emplace_back(layers.size() - 1, layers.size());
    layers.push_back(std::move(layer));
  }
  const std::string name = spec.name.empty() ? "transformer" : spec.name;
  const std::string parallel = spec.tensor_parallel > 1 ? "-tp" + std::to_string(spec.tensor_parallel) : "";
  return Profile(name + parallel + "-" + recomputation_name(mode), spec.microbatch_size, std::move(layers), std::move(edges));
}

}  // namespace pipetwin
