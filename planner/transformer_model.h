// Transformer model — a decoder-only transformer described by its shape, turned into a profile
// without running it: per layer, FLOPs, parameters, stashed activations and the bytes it sends, from
// closed forms; times from FLOPs over the device's peak times a GEMM efficiency.
//
// Notation (all per microbatch): b samples, s tokens each, h hidden size, a attention heads of
// d = h/a channels, k key/value heads (GQA; k = a is plain multi-head attention), f FFN size, V vocabulary,
// L blocks, e bytes per activation element (2: bf16/fp16). FLOPs count 2 per multiply-add, GEMMs only
// (norms, softmax, activations and the embedding lookup are left to the efficiency, as in Megatron's
// accounting); attention scores over the full s x s (causal masking not discounted, as Megatron counts).
//
// One block, forward (Narayanan et al., SC'21, appendix, generalised to GQA and gated MLPs):
//   QKV projection   2bsh(h + 2kd)           (GEMM bs x (h + 2kd) x h)
//   scores QK^T      2bs^2 h                 (a batched GEMMs s x s x d per sample)
//   scores x V       2bs^2 h                 (s x d x s)
//   out projection   2bsh^2                  (bs x h x h)
//   MLP              4bshf, gated 6bshf      (bs x f x h up (twice when gated), bs x h x f down)
// GPT-3's shape (k = a, f = 4h, not gated) gives 24bsh^2 + 4bs^2h, Narayanan's per-layer figure.
// Backward: the input gradient of every GEMM costs its forward again, the weight gradient of every
// weighted GEMM too; the two score GEMMs have no weights, so their input gradient is 2x their forward:
//   backward_input = W + 2C, backward_weight = W (W: weighted GEMMs' forward, C = 4bs^2h the scores')
// i.e. backward = 2 x forward. Recomputation is its own action before the backward (the layer's
// recompute_ms, a RECOMPUTE of the schedule): full recomputes the whole block forward (W + C and, with
// tensor parallelism, its two all-reduces), selective the attention core (C).
// With full recomputation and GPT-3's shape the iteration costs Narayanan's
//   F = 96 B s L h^2 (1 + s/(6h) + V/(16 L h)) FLOPs for a batch of B sequences.
//
// Parameters per block: attention h(h + 2kd) + h^2, MLP 2hf (gated 3hf), two norms of 2h (LayerNorm,
// with bias) or h (RMSNorm); with linear biases (GPT) + (h + 2kd) + h + f + h. Embedding Vh (+ sh
// learned positions); the output layer a final norm and, untied, another Vh. GPT-3: 12h^2 + 13h per
// block, Narayanan's P = 12 L h^2 (1 + 13/(12h) + (V + s)/(12 L h)) (less the final norm's 2h).
//
// Activations stashed for the backward per block (Korthikanti et al. 2022, "Reducing Activation
// Recomputation in Large Transformer Models", Table 2, generalised the same way), in bytes:
//   norms' inputs 2esbh; QKV input esbh; Q and K e sb(h + kd); V e sbkd; out-projection input esbh;
//   MLP input esbh; then 2 esbf (GeLU's input, the down projection's input) or, gated, 3 esbf (the
//   gate's and up projection's outputs, their product); with dropout 2sbh one-byte masks;
//   scores: softmax output e a s^2 b, and with dropout its mask a s^2 b and its output e a s^2 b.
// GPT-3's shape with e = 2 and dropout: sbh(34 + 5as/h) without recomputation, 34sbh selective
// (= sbh(18 + 4f/h), Megatron's theoretical_memory_usage), and 2sbh (the block's input) with full.
// Embedding: the token ids (8sb) and, with dropout, its mask sbh; output layer: the final norm's and
// the logits GEMM's inputs 2esbh and the fp32 logits for the loss 4sbV (Megatron: 4sbh(1 + V/h)).
// Each block sends esbh to the next (its output); the output layer's loss is 4 bytes.
// Memory per parameter: e bytes of weights (param_bytes) and `optimizer_bytes_per_parameter`
// beside them (optimizer_bytes; 16 = fp32 gradient 4 + fp32 master weight 4 + Adam's two moments 8,
// Megatron's 18 bytes per parameter with the 2-byte weights, no distributed optimizer).
// Tensor parallelism (Megatron, Shoeybi et al. 2019; Korthikanti et al. 2022) of degree t: the profile
// is one rank's share. QKV and the MLP's up projections are split by columns (n / t), the out and down
// projections by rows (k / t), heads a / t and key/value heads max(k / t, 1) per rank; weights likewise
// (norms and row-parallel biases replicated). Stashed activations: the norms', QKV's and MLP's inputs
// and the dropout masks are replicated (Korthikanti's sbh(10 + 24/t + 5as/(ht)) for GPT-3's shape),
// all divided by t with sequence parallelism. Each block all-reduces esbh bytes among the t ranks twice
// in forward and twice in backward (sequence parallelism: reduce-scatter + all-gather, the same volume),
// the embedding once in forward and the output layer once in backward; full recomputation repeats the
// forward ones. A stage sends esbh / t per rank (Megatron's scatter/gather over the pipeline link).
// These collectives are folded into the layer's times as ring all-reduces on the innermost cluster
// level (2(t-1)/t x bytes / bandwidth + 2(t-1) latencies): they are not actions of the schedule and do
// not contend with other traffic on the simulated links.
// The activations one block rebuilds by recomputation are held during its backward (recompute_bytes:
// what recomputation spared, the block's stash without it less its stash with it); blocks are
// recomputed one at a time, so a stage holds one block's at most.
// Not modelled: the tied output layer's copy of the embedding on the last stage, memory-bound kernels'
// own time.
#pragma once

#include <string>
#include <vector>

#include "planner/cluster.h"
#include "planner/profile.h"

namespace pipetwin {

enum class Recomputation { none, selective, full };
std::string recomputation_name(Recomputation mode);  // "none", "selective", "full"
// Throws Error naming `field` for an unknown name.
Recomputation recomputation_from_name(const std::string& name, const std::string& field);

struct TransformerSpec {
  std::string name;    // e.g. "llama2-70b"
  std::string source;  // where the figures come from
  int layers = 0;      // L transformer blocks
  int hidden = 0;      // h
  int ffn_hidden = 0;  // f
  int heads = 0;       // a
  int kv_heads = 0;    // k (GQA), a for plain multi-head attention
  long long vocabulary = 0;  // V (padded as trained)
  int sequence_length = 0;   // s
  int microbatch_size = 1;   // b
  bool gated_mlp = false;         // SwiGLU (three FFN matrices)
  bool linear_biases = false;     // biases in every linear layer and LayerNorm (GPT); else RMSNorm, none
  bool dropout = false;           // dropout masks stashed
  bool tied_embeddings = false;   // output layer shares the embedding's weights
  bool learned_positions = false; // a learned position embedding of s x h
  int element_bytes = 2;          // e: weights and activations (bf16)
  int tensor_parallel = 1;        // t: GPUs of the innermost level sharing every layer
  bool sequence_parallel = false; // activations outside the attention and MLP split across the t GPUs too
  double optimizer_bytes_per_parameter = 16.0;
};

// The presets' names, and a preset by name (throws Error listing the names for an unknown one).
std::vector<std::string> transformer_preset_names();
TransformerSpec transformer_preset(const std::string& name);

// Throws Error naming the field ("--heads") and the fix for an impossible shape.
void check_transformer_spec(const TransformerSpec& spec);

// One GEMM of a layer's forward: m x n x k, `count` times (FLOPs 2mnk each).
struct Gemm {
  double m = 0, n = 0, k = 0, count = 1;
  double flops() const { return 2.0 * m * n * k * count; }
};

// One layer of the profile in closed form (header comment), per microbatch.
struct TransformerLayerCost {
  std::string id, description;
  std::vector<Gemm> weighted;  // forward GEMMs with weights (input and weight gradients in backward)
  std::vector<Gemm> scores;    // forward GEMMs without weights (attention core: input gradient x2)
  std::vector<Gemm> recomputed;  // forward GEMMs run again before the backward (the recomputation mode's)
  double forward_flops = 0, backward_input_flops = 0, backward_weight_flops = 0, recompute_flops = 0;
  double parameters = 0;
  double stashed_bytes = 0;  // kept for the backward under the recomputation mode
  double recompute_bytes = 0;  // rebuilt by the recomputation and held during the block's backward (none: 0)
  double output_bytes = 0;   // sent to the next layer
  int tensor_allreduces_forward = 0, tensor_allreduces_backward = 0;  // among the t ranks, each of
  double tensor_allreduce_bytes = 0;                                  // this many bytes
  int tensor_allreduces_recomputed = 0;  // forward ones repeated by the recomputation (full)
};

std::vector<TransformerLayerCost> transformer_layer_costs(const TransformerSpec& spec, Recomputation mode);

// How fast a device runs GEMMs: peak FLOP/s x efficiency x, per dimension d of the GEMM,
// d / (d + half_dimension) (a small dimension under-fills the device; 0: shape-independent).
struct GemmRate {
  double peak_flops = 0.0;
  double efficiency = 1.0;
  double half_dimension = 0.0;
  double seconds(const Gemm& gemm) const;
};
// From the cluster's device: peak_flops (0 when the cluster gives none), matmul_efficiency, matmul_half_dimension.
inline GemmRate gemm_rate(const DeviceSpec& device) {
  return {device.peak_flops, device.matmul_efficiency, device.matmul_half_dimension};
}

// The link the t ranks of a tensor-parallel group all-reduce over (the innermost cluster level).
struct TensorParallelLink {
  double bandwidth_bytes_per_s = 0.0;
  double latency_s = 0.0;
  double allreduce_s(double bytes, int ranks) const;  // ring: 2(t-1)/t x bytes / bandwidth + 2(t-1) latencies
};

// The profile of the model on a device: layers embedding, block0 .. block{L-1}, output in a chain;
// fwd/bwd times from the GEMMs at `rate` (plus the tensor-parallel all-reduces over `link`), FLOPs,
// parameter, stashed, optimizer and output bytes, all per tensor-parallel rank.
Profile transformer_profile(const TransformerSpec& spec, Recomputation mode, const GemmRate& rate,
                            const TensorParallelLink& link = {});

// The cluster seen by a plan of a tensor-parallel profile: one worker per group of t GPUs of the
// innermost level (its count divided by t). Throws Error naming "--tp" when t does not divide it.
Cluster tensor_parallel_groups(const Cluster& cluster, int tensor_parallel);

}  // namespace pipetwin
