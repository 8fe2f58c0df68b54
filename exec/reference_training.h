// Reference training — the whole model in one process, for checking the pipeline: the same data,
// the same loss scaling (each microbatch's loss over the microbatch count, gradients accumulated) and
// the same SGD with momentum as the workers, for a number of iterations.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

namespace pipetwin::exec {

struct ReferenceOptions {
  std::string model = "mlp";
  bool small = true;
  int microbatch_size = 32;
  int microbatches = 4;
  int iterations = 2;
  double learning_rate = 0.05;
  double momentum = 0.9;
  std::uint64_t data_seed = 7;
};

struct ReferenceResult {
  std::vector<std::vector<torch::Tensor>> parameters;  // per layer, after training
  std::vector<double> losses;                          // per iteration: the minibatch's mean loss
};

ReferenceResult train_reference(const ReferenceOptions& options);

}  // namespace pipetwin::exec
