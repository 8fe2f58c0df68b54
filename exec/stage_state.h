// Stage state — what a worker keeps for one stage it holds: the weight versions (weight stashing:
// an update never overwrites a version an in-flight microbatch still needs; it makes a new one, and
// versions nobody uses any more are dropped), the microbatches in flight with what their backward
// needs, tensors received or handed over, and the optimizer's momentum.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <vector>

namespace pipetwin::exec {

struct InFlight {
  torch::Tensor input, output, output_gradient;
  // Split backward only: each layer's output but the last, and their gradients once BACKWARD_INPUT
  // ran, so BACKWARD_WEIGHT takes each layer's weights from its own output gradient alone.
  std::vector<torch::Tensor> layer_outputs, layer_output_gradients;
  int version = 0;
};

struct StageState {
  int stage = 0;
  bool first = false, last = false;
  std::vector<int> group;  // replicas, sorted, when more than one
  std::vector<std::int64_t> input_shape, output_shape;
  std::map<int, torch::nn::Sequential> versions;  // version -> weights; the largest is current
  std::map<int, int> uses;                        // version -> in-flight microbatches
  int version = 0;
  // By the microbatch's number within this run (iteration x microbatches + microbatch):
  std::map<int, InFlight> in_flight;  // forwarded, backward not finished
  std::map<int, torch::Tensor> activations, gradients, input_gradients;  // received, or handed over on this worker
  std::vector<torch::Tensor> momentum;
  torch::Tensor reduced;  // gradient summed over versions (and replicas), waiting for the update
  std::map<int, std::pair<int, int>> version_log;  // microbatch of the training run -> (forward version, backward version)

  torch::nn::Sequential& current() { return versions.rbegin()->second; }
};

// The gradients of every version of the stage's weights, summed and flattened into one tensor (their
// .grad fields are cleared): what the all-reduce sums over replicas and the update applies.
torch::Tensor flat_gradients(StageState& state);

// SGD with momentum on a new version made from the newest, with the all-reduced gradient if there is
// one, else the stage's own; versions no microbatch needs are dropped.
void apply_sgd(StageState& state, double learning_rate, double momentum);

}  // namespace pipetwin::exec
