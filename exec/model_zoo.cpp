#include "exec/model_zoo.h"

#include "planner/error.h"

namespace pipetwin::exec {
namespace {

torch::Generator generator(std::uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }

// The generator of microbatch `index`'s samples.
torch::Generator microbatch_generator(std::uint64_t seed, std::int64_t index) { return generator(seed * 1000003 + index); }

// The classes of template_images' microbatch: the first draw of its generator.
torch::Tensor template_labels(torch::Generator& random, std::int64_t size) {
  return torch::randint(10, {size}, random, torch::kLong);
}

// Images of class c: a fixed random template of that class plus noise, so convolutions can learn it.
Batch template_images(std::uint64_t seed, std::int64_t index, std::int64_t size, std::int64_t side) {
  auto random = microbatch_generator(seed, index);
  const torch::Tensor templates = torch::randn({10, 3, side, side}, generator(424242));
  const torch::Tensor labels = template_labels(random, size);
  return {templates.index_select(0, labels) + 0.5 * torch::randn({size, 3, side, side}, random), labels};
}

torch::Tensor template_labels(std::uint64_t seed, std::int64_t index, std::int64_t size) {
  auto random = microbatch_generator(seed, index);
  return template_labels(random, size);
}

struct ResidualBlockImpl : torch::nn::Cloneable<ResidualBlockImpl> {
  ResidualBlockImpl(std::int64_t in, std::int64_t out, std::int64_t stride) : in_(in), out_(out), stride_(stride) { reset(); }
  void reset() override {
    conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(in_, out_, 3).stride(stride_).padding(1)));
    conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(out_, out_, 3).padding(1)));
    if (in_ != out_ || stride_ != 1) {
      project = register_module("project", torch::nn::Conv2d(torch::nn::Conv2dOptions(in_, out_, 1).stride(stride_)));
    } else {
      project = nullptr;
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const torch::Tensor skip = project ? project->forward(x) : x;
    return torch::relu(conv2->forward(torch::relu(conv1->forward(x))) + skip);
  }
  std::int64_t in_, out_, stride_;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, project{nullptr};
};
TORCH_MODULE(ResidualBlock);

// Token and position embeddings, summed.
struct EmbeddingLayerImpl : torch::nn::Cloneable<EmbeddingLayerImpl> {
  EmbeddingLayerImpl(std::int64_t vocabulary, std::int64_t length, std::int64_t width)
      : vocabulary_(vocabulary), length_(length), width_(width) { reset(); }
  void reset() override {
    tokens = register_module("tokens", torch::nn::Embedding(vocabulary_, width_));
    positions = register_parameter("positions", torch::randn({length_, width_}) * 0.02);
  }
  torch::Tensor forward(const torch::Tensor& ids) { return tokens->forward(ids) + positions; }
  std::int64_t vocabulary_, length_, width_;
  torch::nn::Embedding tokens{nullptr};
  torch::Tensor positions;
};
TORCH_MODULE(EmbeddingLayer);

// Pre-norm causal self-attention and MLP.
struct TransformerBlockImpl : torch::nn::Cloneable<TransformerBlockImpl> {
  TransformerBlockImpl(std::int64_t width, std::int64_t heads) : width_(width), heads_(heads) { reset(); }
  void reset() override {
    norm1 = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width_})));
    qkv = register_module("qkv", torch::nn::Linear(width_, 3 * width_));
    out = register_module("out", torch::nn::Linear(width_, width_));
    norm2 = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width_})));
    up = register_module("up", torch::nn::Linear(width_, 4 * width_));
    down = register_module("down", torch::nn::Linear(4 * width_, width_));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const auto batch = x.size(0), length = x.size(1), head = width_ / heads_;
    auto parts = qkv->forward(norm1->forward(x)).chunk(3, -1);
    auto split = [&](const torch::Tensor& t) { return t.view({batch, length, heads_, head}).transpose(1, 2); };
    auto scores = torch::matmul(split(parts[0]), split(parts[1]).transpose(-2, -1)) / std::sqrt(double(head));
    const auto mask = torch::ones({length, length}, torch::kBool).triu(1);
    scores = scores.masked_fill(mask, -1e9);
    auto attended = torch::matmul(torch::softmax(scores, -1), split(parts[2])).transpose(1, 2).reshape({batch, length, width_});
    auto h = x + out->forward(attended);
    return h + down->forward(torch::gelu(up->forward(norm2->forward(h))));
  }
  std::int64_t width_, heads_;
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  torch::nn::Linear qkv{nullptr}, out{nullptr}, up{nullptr}, down{nullptr};
};
TORCH_MODULE(TransformerBlock);

class Mlp : public Model {
 public:
  Mlp() : Model("mlp") {
    const std::int64_t widths[] = {32, 64, 64, 64, 10};
    for (int l = 0; l < 4; ++l) {
      add(torch::nn::AnyModule(torch::nn::Linear(widths[l], widths[l + 1])), "Linear");
      if (l < 3) add(torch::nn::AnyModule(torch::nn::ReLU()), "ReLU");
    }
    initialise_for_relu();
  }
  Batch batch(std::uint64_t seed, std::int64_t index, std::int64_t size) const override {
    auto x = torch::randn({size, 32}, microbatch_generator(seed, index));
    return {x, x.narrow(1, 0, 10).argmax(1)};  // the largest of the first ten features
  }
};

class Vgg16 : public Model {
 public:
  explicit Vgg16(bool small) : Model("vgg16"), image_(small ? 32 : 224) {
    const int divide = small ? 8 : 1;
    const std::vector<std::int64_t> plan = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
    std::int64_t channels = 3;
    for (std::int64_t width : plan) {
      if (width == 0) {
        add(torch::nn::AnyModule(torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(2).stride(2))), "MaxPool2d");
        continue;
      }
      add(torch::nn::AnyModule(torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, width / divide, 3).padding(1))),
          "Conv2d");
      add(torch::nn::AnyModule(torch::nn::ReLU()), "ReLU");
      channels = width / divide;
    }
    const std::int64_t spatial = image_ / 32, hidden = 4096 / (small ? 64 : 1);
    add(torch::nn::AnyModule(torch::nn::Flatten()), "Flatten");
    add(torch::nn::AnyModule(torch::nn::Linear(channels * spatial * spatial, hidden)), "Linear");
    add(torch::nn::AnyModule(torch::nn::ReLU()), "ReLU");
    add(torch::nn::AnyModule(torch::nn::Linear(hidden, hidden)), "Linear");
    add(torch::nn::AnyModule(torch::nn::ReLU()), "ReLU");
    add(torch::nn::AnyModule(torch::nn::Linear(hidden, 10)), "Linear");
    initialise_for_relu();
  }
  Batch batch(std::uint64_t seed, std::int64_t index, std::int64_t size) const override {
    return template_images(seed, index, size, image_);
  }
  torch::Tensor labels(std::uint64_t seed, std::int64_t index, std::int64_t size) const override {
    return template_labels(seed, index, size);
  }

 private:
  std::int64_t image_;
};

class ResNet : public Model {
 public:
  ResNet() : Model("resnet") {
    add(torch::nn::AnyModule(torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 16, 3).padding(1))), "Conv2d");
    add(torch::nn::AnyModule(torch::nn::ReLU()), "ReLU");
    const std::int64_t blocks[][3] = {{16, 16, 1}, {16, 16, 1}, {16, 32, 2}, {32, 32, 1}, {32, 64, 2}, {64, 64, 1}};
    for (const auto& b : blocks) add(torch::nn::AnyModule(ResidualBlock(b[0], b[1], b[2])), "ResidualBlock");
    add(torch::nn::AnyModule(torch::nn::AdaptiveAvgPool2d(torch::nn::AdaptiveAvgPool2dOptions(1))), "AdaptiveAvgPool2d");
    add(torch::nn::AnyModule(torch::nn::Flatten()), "Flatten");
    add(torch::nn::AnyModule(torch::nn::Linear(64, 10)), "Linear");
    initialise_for_relu();
  }
  Batch batch(std::uint64_t seed, std::int64_t index, std::int64_t size) const override {
    return template_images(seed, index, size, 16);
  }
  torch::Tensor labels(std::uint64_t seed, std::int64_t index, std::int64_t size) const override {
    return template_labels(seed, index, size);
  }
};

class Gpt : public Model {
 public:
  Gpt() : Model("gpt") {
    add(torch::nn::AnyModule(EmbeddingLayer(kVocabulary, kLength, kWidth)), "Embedding");
    for (int b = 0; b < 4; ++b) add(torch::nn::AnyModule(TransformerBlock(kWidth, kGptAttentionHeads)), "TransformerBlock");
    add(torch::nn::AnyModule(torch::nn::LayerNorm(torch::nn::LayerNormOptions({kWidth}))), "LayerNorm");
    add(torch::nn::AnyModule(torch::nn::Linear(kWidth, kVocabulary)), "Linear");
  }
  Batch batch(std::uint64_t seed, std::int64_t index, std::int64_t size) const override {
    auto ids = torch::randint(kVocabulary, {size, kLength}, microbatch_generator(seed, index), torch::kLong);
    return {ids, (ids + 1) % kVocabulary};
  }
  torch::Tensor loss(const torch::Tensor& output, const torch::Tensor& labels) const override {
    return torch::nn::functional::cross_entropy(output.reshape({-1, kVocabulary}), labels.reshape({-1}));
  }

 private:
  static constexpr std::int64_t kVocabulary = 32, kLength = 16, kWidth = 32;
};

}  // namespace

void Model::initialise_for_relu() {
  torch::NoGradGuard no_grad;
  for (auto& layer : layers_) {
    for (auto& parameter : layer.ptr()->named_parameters()) {
      if (parameter.key().find("weight") == std::string::npos || parameter.value().dim() < 2) continue;
      torch::nn::init::kaiming_normal_(parameter.value(), 0.0, torch::kFanIn, torch::kReLU);
    }
  }
}

void Model::add(torch::nn::AnyModule module, std::string description) {
  layers_.push_back(std::move(module));
  descriptions_.push_back(std::move(description));
}

torch::Tensor Model::labels(std::uint64_t seed, std::int64_t index, std::int64_t size) const {
  return batch(seed, index, size).labels;
}

torch::Tensor Model::loss(const torch::Tensor& output, const torch::Tensor& labels) const {
  return torch::nn::functional::cross_entropy(output, labels);
}

torch::nn::Sequential Model::stage(std::size_t first, std::size_t last) {
  torch::nn::Sequential sequential;
  for (std::size_t l = first; l <= last; ++l) sequential->push_back("layer" + std::to_string(l), layers_.at(l));
  return sequential;
}

std::vector<std::string> model_names() { return {"mlp", "vgg16", "resnet", "gpt"}; }

std::unique_ptr<Model> make_model(const std::string& name, bool small, std::uint64_t seed) {
  torch::manual_seed(seed);
  if (name == "mlp") return std::make_unique<Mlp>();
  if (name == "vgg16") return std::make_unique<Vgg16>(small);
  if (name == "resnet") return std::make_unique<ResNet>();
  if (name == "gpt") return std::make_unique<Gpt>();
  throw Error({"", 0, "--model"}, "unknown model '" + name + "'", "use mlp, vgg16, resnet or gpt");
}

}  // namespace pipetwin::exec
