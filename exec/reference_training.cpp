#include "exec/reference_training.h"

#include "exec/model_zoo.h"

namespace pipetwin::exec {

ReferenceResult train_reference(const ReferenceOptions& options) {
  torch::set_num_threads(1);
  auto model = make_model(options.model, options.small);
  auto whole = model->stage(0, model->layer_count() - 1);
  auto parameters = whole->parameters();
  std::vector<torch::Tensor> momentum;
  for (const auto& p : parameters) momentum.push_back(torch::zeros_like(p));
  ReferenceResult result;
  for (int iteration = 0; iteration < options.iterations; ++iteration) {
    double loss_sum = 0.0;
    for (int b = 0; b < options.microbatches; ++b) {
      const Batch data = model->batch(options.data_seed, iteration * options.microbatches + b, options.microbatch_size);
      torch::Tensor loss = model->loss(whole->forward(data.inputs), data.labels) / options.microbatches;
      loss.backward();
      loss_sum += loss.item<double>();
    }
    torch::NoGradGuard no_grad;
    for (std::size_t p = 0; p < parameters.size(); ++p) {
      momentum[p].mul_(options.momentum).add_(parameters[p].grad());
      parameters[p].sub_(options.learning_rate * momentum[p]);
      parameters[p].mutable_grad() = torch::Tensor();
    }
    result.losses.push_back(loss_sum);
  }
  for (std::size_t l = 0; l < model->layer_count(); ++l) {
    std::vector<torch::Tensor> layer;
    for (const auto& p : model->layer(l).ptr()->parameters()) layer.push_back(p.detach().clone());
    result.parameters.push_back(layer);
  }
  return result;
}

}  // namespace pipetwin::exec
