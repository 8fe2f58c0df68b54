#include "exec/tensor_parallel.h"

#include <cmath>

#include "planner/error.h"

namespace pipetwin::exec {
namespace {

// Identity forward; the gradient summed over the group backward (Megatron's "f").
torch::Tensor copy_to_group(const torch::Tensor& input, const GroupAllReduce& all_reduce) {
  torch::Tensor output = input.clone();
  if (!output.requires_grad()) return output;  // no backward (evaluation)
  output.register_hook([all_reduce](torch::Tensor gradient) {
    torch::Tensor summed = gradient.contiguous().clone();
    all_reduce(summed);
    return summed;
  });
  return output;
}

// Summed over the group forward; the gradient passed through unchanged backward (Megatron's "g").
torch::Tensor reduce_from_group(const torch::Tensor& partial, const GroupAllReduce& all_reduce) {
  torch::Tensor summed = partial.detach().contiguous().clone();
  all_reduce(summed);
  return partial + (summed - partial).detach();
}

// One rank's shard of the zoo's transformer block (model_zoo.cpp): the same children, in the same
// order, with the same parameter names; the split projections hold their slices. Cloneable, as the
// worker's weight versions are clones.
struct TensorParallelBlockImpl : torch::nn::Cloneable<TensorParallelBlockImpl> {
  TensorParallelBlockImpl(torch::nn::Module& whole, std::int64_t heads, int rank, int ranks, GroupAllReduce all_reduce)
      : width_(whole.named_parameters()["qkv.weight"].size(1)), heads_(heads / ranks), ranks_(ranks),
        all_reduce_(std::move(all_reduce)) {
    reset();
    torch::NoGradGuard no_grad;
    auto whole_parameters = whole.named_parameters();
    for (auto& parameter : named_parameters()) {
      parameter.value().copy_(tensor_parallel_shard(parameter.key(), whole_parameters[parameter.key()], rank, ranks));
    }
  }
  void reset() override {
    const std::int64_t held = width_ / ranks_;  // this rank's share of the width (its heads) and of the MLP
    norm1 = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width_})));
    qkv = register_module("qkv", torch::nn::Linear(width_, 3 * held));
    out = register_module("out", torch::nn::Linear(held, width_));
    norm2 = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width_})));
    up = register_module("up", torch::nn::Linear(width_, 4 * held));
    down = register_module("down", torch::nn::Linear(4 * held, width_));
  }

  torch::Tensor forward(const torch::Tensor& x) {
    namespace F = torch::nn::functional;
    const auto batch = x.size(0), length = x.size(1), held = width_ / ranks_, head = held / heads_;
    auto parts = qkv->forward(copy_to_group(norm1->forward(x), all_reduce_)).chunk(3, -1);
    auto split = [&](const torch::Tensor& t) { return t.view({batch, length, heads_, head}).transpose(1, 2); };
    auto scores = torch::matmul(split(parts[0]), split(parts[1]).transpose(-2, -1)) / std::sqrt(double(head));
    scores = scores.masked_fill(torch::ones({length, length}, torch::kBool).triu(1), -1e9);
    auto attended = torch::matmul(torch::softmax(scores, -1), split(parts[2])).transpose(1, 2).reshape({batch, length, held});
    auto h = x + reduce_from_group(F::linear(attended, out->weight), all_reduce_) + out->bias;  // bias once, after the sum
    auto hidden = torch::gelu(up->forward(copy_to_group(norm2->forward(h), all_reduce_)));
    return h + reduce_from_group(F::linear(hidden, down->weight), all_reduce_) + down->bias;
  }

  std::int64_t width_, heads_;  // the whole block's width; this rank's heads
  int ranks_;
  GroupAllReduce all_reduce_;
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  torch::nn::Linear qkv{nullptr}, out{nullptr}, up{nullptr}, down{nullptr};
};
TORCH_MODULE(TensorParallelBlock);

}  // namespace

torch::Tensor tensor_parallel_shard(const std::string& parameter, const torch::Tensor& whole, int rank, int ranks) {
  auto rows = [&](const torch::Tensor& t) { return t.narrow(0, rank * t.size(0) / ranks, t.size(0) / ranks); };
  if (parameter == "qkv.weight" || parameter == "qkv.bias") {  // rows: all queries, then keys, then values
    std::vector<torch::Tensor> parts;
    for (const torch::Tensor& part : whole.chunk(3, 0)) parts.push_back(rows(part));
    return torch::cat(parts, 0);
  }
  if (parameter == "up.weight" || parameter == "up.bias") return rows(whole);
  if (parameter == "out.weight" || parameter == "down.weight") {
    return whole.narrow(1, rank * whole.size(1) / ranks, whole.size(1) / ranks);
  }
  return whole;
}

std::string tensor_parallel_profile_name(const std::string& model, int ranks) {
  return ranks > 1 ? model + "-tp" + std::to_string(ranks) : model;
}

void check_tensor_parallel(const std::string& model, int ranks) {
  if (ranks > 1 && model != "gpt") {
    throw Error({"", 0, "--model"}, "tensor parallelism splits transformer blocks; " + model + " has none",
                "use --model gpt, or --tp 1");
  }
  if (ranks < 1 || kGptAttentionHeads % ranks != 0) {
    throw Error({"", 0, "--tp"},
                "tensor parallelism " + std::to_string(ranks) + " does not divide the gpt model's " +
                    std::to_string(kGptAttentionHeads) + " attention heads",
                "use a divisor of " + std::to_string(kGptAttentionHeads));
  }
}

std::unique_ptr<Model> tensor_parallel_model(std::unique_ptr<Model> model, int rank, int ranks,
                                             GroupAllReduce all_reduce) {
  check_tensor_parallel(model->name(), ranks);
  if (rank < 0 || rank >= ranks) {
    throw Error({"", 0, "--tp"}, "rank " + std::to_string(rank) + " is not one of " + std::to_string(ranks),
                "report this: ranks come from the launcher");
  }
  for (std::size_t l = 0; l < model->layer_count(); ++l) {
    if (model->description(l) != "TransformerBlock") continue;  // whole on every rank
    model->replace_layer(l, torch::nn::AnyModule(TensorParallelBlock(*model->layer(l).ptr(), kGptAttentionHeads, rank,
                                                                     ranks, all_reduce)));
  }
  return model;
}

}  // namespace pipetwin::exec
