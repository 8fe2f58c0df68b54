// Helpers for simulator tests: plans and clusters built by hand, so every number is known.
#pragma once

#include <vector>

#include "planner/cluster.h"
#include "planner/plan.h"

namespace pipetwin::testing {

struct StageSpec {
  std::vector<int> devices;
  double forward_s = 1.0, backward_s = 2.0;
  double output_bytes = 0.0, param_bytes = 0.0;
};

inline Plan hand_plan(const std::vector<StageSpec>& stages, int workers, int microbatches = 4) {
  Plan plan;
  plan.profile_name = "hand";
  plan.cluster_name = "hand";
  plan.workers = workers;
  plan.microbatch_size = 32;
  plan.microbatches = microbatches;
  plan.schedule = "1f1b";
  for (std::size_t s = 0; s < stages.size(); ++s) {
    PlanStage stage;
    stage.layer_ids = {"layer" + std::to_string(s)};
    stage.replicas = static_cast<int>(stages[s].devices.size());
    stage.devices = stages[s].devices;
    stage.forward_s = stages[s].forward_s;
    stage.backward_s = stages[s].backward_s;
    stage.compute_s = stage.forward_s + stage.backward_s;
    stage.output_activation_bytes = stages[s].output_bytes;
    stage.param_bytes = stages[s].param_bytes;
    plan.stages.push_back(stage);
  }
  return plan;
}

// `stages` stages of one worker each, uniform times.
inline Plan straight_plan(int stages, double forward_s, double backward_s, double output_bytes = 1e6) {
  std::vector<StageSpec> specs;
  for (int s = 0; s < stages; ++s) specs.push_back({{s}, forward_s, backward_s, output_bytes, 1e6});
  return hand_plan(specs, stages);
}

inline Cluster link_cluster(const std::vector<std::tuple<int, double, double>>& levels) {
  std::vector<ClusterLevel> out;
  for (std::size_t l = 0; l < levels.size(); ++l) {
    const auto [count, bandwidth, latency] = levels[l];
    out.push_back({"level" + std::to_string(l), count, "link", bandwidth, latency});
  }
  return Cluster("links", "", DeviceSpec{"dev", 1.0, 0.0, 80e9}, out, "links.json");
}

}  // namespace pipetwin::testing
