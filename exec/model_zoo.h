// Model zoo — the models the exec back end trains, each a sequence of layers that plans cut at layer
// boundaries, with a synthetic task a small model can learn.
//
//   mlp     Linear/ReLU stack on 32 features, 10 classes (the label is the largest of the first 10 features)
//   vgg16   VGG-16's 13 convolutions and 3 classifier layers as separate layers; `small` uses 32x32
//           inputs and 1/8 of the channels so it trains on a CPU; images are a class template plus noise
//   resnet  a stem, residual blocks (each one layer: two 3x3 convolutions and the skip), pooling, fc
//   gpt     token+position embedding, pre-norm transformer blocks, a head; learns next = token + 1
// Layers are named "layer<i>" (matching `pipetwin profile`) and built from a fixed seed, so every
// process builds identical weights. Unknown names throw pipetwin::Error.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

namespace pipetwin::exec {

struct Batch {
  torch::Tensor inputs;
  torch::Tensor labels;
};

class Model {
 public:
  virtual ~Model() = default;
  const std::string& name() const { return name_; }
  std::size_t layer_count() const { return layers_.size(); }
  torch::nn::AnyModule& layer(std::size_t index) { return layers_.at(index); }
  const std::string& description(std::size_t index) const { return descriptions_.at(index); }

  // The samples of one microbatch: a deterministic function of (seed, index, size).
  virtual Batch batch(std::uint64_t seed, std::int64_t index, std::int64_t size) const = 0;
  // batch(seed, index, size).labels, without making the inputs where a model can (the last stage
  // needs only the labels: making a small VGG microbatch's images costs about 1 ms on this machine).
  virtual torch::Tensor labels(std::uint64_t seed, std::int64_t index, std::int64_t size) const;
  // Mean loss of a microbatch's output against its labels.
  virtual torch::Tensor loss(const torch::Tensor& output, const torch::Tensor& labels) const;

  // A stage: layers [first, last] wrapped in one Sequential (shares the layers' parameters).
  torch::nn::Sequential stage(std::size_t first, std::size_t last);
  // Puts `module` in place of layer `index` (its description kept): tensor parallelism's shards.
  void replace_layer(std::size_t index, torch::nn::AnyModule module) { layers_.at(index) = std::move(module); }

 protected:
  Model(std::string name) : name_(std::move(name)) {}
  void add(torch::nn::AnyModule module, std::string description);
  // He initialisation of every weight matrix and kernel, so deep ReLU stacks train in a few steps.
  void initialise_for_relu();

 private:
  std::string name_;
  std::vector<torch::nn::AnyModule> layers_;
  std::vector<std::string> descriptions_;
};

// The gpt model's attention heads per block (its width is 32): tensor parallelism splits them.
constexpr std::int64_t kGptAttentionHeads = 2;

std::vector<std::string> model_names();
// `small`: the CPU-sized variant (vgg16 only changes). Builds with torch::manual_seed(seed).
std::unique_ptr<Model> make_model(const std::string& name, bool small = true, std::uint64_t seed = 2026);

}  // namespace pipetwin::exec
