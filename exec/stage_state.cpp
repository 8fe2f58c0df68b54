#include "exec/stage_state.h"

namespace pipetwin::exec {

torch::Tensor flat_gradients(StageState& state) {
  std::vector<torch::Tensor> sums;
  const auto reference = state.current()->parameters();
  for (std::size_t p = 0; p < reference.size(); ++p) {
    torch::Tensor sum = torch::zeros_like(reference[p]);
    for (auto& [version, module] : state.versions) {
      auto parameter = module->parameters()[p];
      if (parameter.grad().defined()) {
        sum += parameter.grad();
        parameter.mutable_grad() = torch::Tensor();
      }
    }
    sums.push_back(sum.reshape({-1}));
  }
  return sums.empty() ? torch::zeros({0}) : torch::cat(sums);
}

void apply_sgd(StageState& state, double learning_rate, double momentum) {
  torch::Tensor gradient = state.reduced.defined() ? state.reduced : flat_gradients(state);
  state.reduced = torch::Tensor();
  // A new version only while a microbatch in flight still uses an older one (weight stashing); else
  // the weights are updated where they are (no copy, and no new allocation each iteration).
  bool stashed = false;
  for (const auto& [version, module] : state.versions) stashed = stashed || state.uses[version] > 0;
  auto next = stashed ? std::dynamic_pointer_cast<torch::nn::SequentialImpl>(state.current()->clone())
                      : state.current().ptr();
  {
    torch::NoGradGuard no_grad;
    std::int64_t offset = 0;
    auto parameters = next->parameters();
    for (std::size_t p = 0; p < parameters.size(); ++p) {
      const auto count = parameters[p].numel();
      const torch::Tensor g = gradient.narrow(0, offset, count).view_as(parameters[p]);
      offset += count;
      state.momentum[p].mul_(momentum).add_(g);
      parameters[p].sub_(learning_rate * state.momentum[p]);
      parameters[p].mutable_grad() = torch::Tensor();
    }
  }
  state.versions[++state.version] = torch::nn::Sequential(next);
  for (auto it = state.versions.begin(); it != state.versions.end();) {
    if (it->first != state.version && state.uses[it->first] == 0) {
      state.uses.erase(it->first);
      it = state.versions.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace pipetwin::exec
