#include "exec/tensor_parallel.h"

#include <cmath>
#include <map>

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

// One rank's shard of the zoo's transformer block (model_zoo.cpp): the same parameter names, the
// split projections holding their slices.
struct TensorParallelBlockImpl : torch::nn::Module {
  TensorParallelBlockImpl(torch::nn::Module& whole, std::int64_t heads, int rank, int ranks, GroupAllReduce all_reduce)
      : heads_(heads / ranks), all_reduce_(std::move(all_reduce)) {
    torch::NoGradGuard no_grad;
    for (const auto& child : whole.named_children()) {
      if (child.key() == "norm1" || child.key() == "norm2") {
        register_module(child.key(), child.value());  // whole on every rank, shared with the whole model
        continue;
      }
      auto linear = std::make_shared<torch::nn::Module>();
      for (const auto& parameter : child.value()->named_parameters()) {
        const std::string name = child.key() + "." + parameter.key();
        linear->register_parameter(parameter.key(), tensor_parallel_shard(name, parameter.value(), rank, ranks).clone());
      }
      register_module(child.key(), linear);
    }
    norm1_ = std::dynamic_pointer_cast<torch::nn::LayerNormImpl>(named_children()["norm1"]);
    norm2_ = std::dynamic_pointer_cast<torch::nn::LayerNormImpl>(named_children()["norm2"]);
    for (const auto& parameter : named_parameters()) held_[parameter.key()] = parameter.value();
  }

  torch::Tensor forward(const torch::Tensor& x) {
    namespace F = torch::nn::functional;
    const auto batch = x.size(0), length = x.size(1);
    const std::int64_t width = weight("qkv").size(0) / 3, head = width / heads_;
    auto parts = F::linear(copy_to_group(norm1_->forward(x), all_reduce_), weight("qkv"), bias("qkv")).chunk(3, -1);
    auto split = [&](const torch::Tensor& t) { return t.view({batch, length, heads_, head}).transpose(1, 2); };
    auto scores = torch::matmul(split(parts[0]), split(parts[1]).transpose(-2, -1)) / std::sqrt(double(head));
    scores = scores.masked_fill(torch::ones({length, length}, torch::kBool).triu(1), -1e9);
    auto attended = torch::matmul(torch::softmax(scores, -1), split(parts[2])).transpose(1, 2).reshape({batch, length, width});
    auto h = x + reduce_from_group(F::linear(attended, weight("out")), all_reduce_) + bias("out");
    auto hidden = torch::gelu(F::linear(copy_to_group(norm2_->forward(h), all_reduce_), weight("up"), bias("up")));
    return h + reduce_from_group(F::linear(hidden, weight("down")), all_reduce_) + bias("down");
  }

 private:
  const torch::Tensor& weight(const std::string& projection) const { return held_.at(projection + ".weight"); }
  const torch::Tensor& bias(const std::string& projection) const { return held_.at(projection + ".bias"); }

  std::int64_t heads_;
  GroupAllReduce all_reduce_;
  std::shared_ptr<torch::nn::LayerNormImpl> norm1_, norm2_;
  std::map<std::string, torch::Tensor> held_;  // every parameter by its name ("qkv.weight")
};
TORCH_MODULE(TensorParallelBlock);

class TensorParallelModel : public Model {
 public:
  TensorParallelModel(std::shared_ptr<Model> whole, int rank, int ranks, const GroupAllReduce& all_reduce)
      : Model(whole->name()), whole_(std::move(whole)) {
    for (std::size_t l = 0; l < whole_->layer_count(); ++l) {
      if (whole_->description(l) != "TransformerBlock") {
        add(whole_->layer(l), whole_->description(l));
        continue;
      }
      add(torch::nn::AnyModule(TensorParallelBlock(*whole_->layer(l).ptr(), kGptAttentionHeads, rank, ranks, all_reduce)),
          "TransformerBlock");
    }
  }
  Batch batch(std::uint64_t seed, std::int64_t index, std::int64_t size) const override {
    return whole_->batch(seed, index, size);
  }
  torch::Tensor loss(const torch::Tensor& output, const torch::Tensor& labels) const override {
    return whole_->loss(output, labels);
  }

 private:
  std::shared_ptr<Model> whole_;
};

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

std::unique_ptr<Model> tensor_parallel_model(std::shared_ptr<Model> whole, int rank, int ranks,
                                             GroupAllReduce all_reduce) {
  if (whole->name() != "gpt") {
    throw Error({"", 0, "--model"}, "tensor parallelism splits transformer blocks; " + whole->name() + " has none",
                "use --model gpt, or --tp 1");
  }
  if (ranks < 1 || kGptAttentionHeads % ranks != 0 || rank < 0 || rank >= ranks) {
    throw Error({"", 0, "--tp"},
                "tensor parallelism " + std::to_string(ranks) + " does not divide the gpt model's " +
                    std::to_string(kGptAttentionHeads) + " attention heads",
                "use a divisor of " + std::to_string(kGptAttentionHeads));
  }
  return std::make_unique<TensorParallelModel>(std::move(whole), rank, ranks, all_reduce);
}

}  // namespace pipetwin::exec
