#include "planner/balanced_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "planner/error.h"
#include "planner/stage_figures.h"

namespace pipetwin {

Plan balanced_plan(const Profile& profile, const Cluster& cluster, int stages, const std::string& schedule,
                   int microbatches) {
  const int workers = cluster.worker_count();
  if (stages < 1 || workers % stages != 0) {
    throw Error({"", 0, "--stages"}, std::to_string(stages) + " stages cannot share " + std::to_string(workers) + " workers evenly",
                "use a divisor of the worker count");
  }
  return balanced_plan(profile, cluster, std::vector<int>(stages, workers / stages), schedule, microbatches);
}

Plan balanced_plan(const Profile& profile, const Cluster& cluster, const std::vector<int>& replicas,
                   const std::string& schedule, int microbatches) {
  const int workers = cluster.worker_count();
  const int stages = static_cast<int>(replicas.size());
  int total = 0;
  for (int r : replicas) total += r;
  std::vector<std::size_t> compute_layers;
  for (std::size_t l = 0; l < profile.layer_count(); ++l) {
    if (!profile.layer(l).is_input) compute_layers.push_back(l);
  }
  const int n = static_cast<int>(compute_layers.size());
  if (stages < 1 || total != workers || stages > n) {
    throw Error({"", 0, "--stages"},
                std::to_string(stages) + " stages on " + std::to_string(total) + " replicas do not fit " +
                    std::to_string(workers) + " workers and " + std::to_string(n) + " layers",
                "give at most one stage per layer and as many replicas in all as the cluster has workers");
  }
  // Linear partition of the compute layers: best[k][i] = smallest max stage time of the first i layers in k stages.
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i) {
    const Layer& layer = profile.layer(compute_layers[i]);
    prefix[i + 1] = prefix[i] + compute_ms(layer) / 1000.0;
  }
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> cut(stages + 1, std::vector<int>(n + 1, 0));
  best[0][0] = 0.0;
  for (int k = 1; k <= stages; ++k) {
    for (int i = k; i <= n; ++i) {
      for (int j = k - 1; j < i; ++j) {
        const double value = std::max(best[k - 1][j], prefix[i] - prefix[j]);
        if (value < best[k][i]) {
          best[k][i] = value;
          cut[k][i] = j;
        }
      }
    }
  }
  std::vector<int> boundaries(stages + 1, n);
  for (int k = stages; k > 0; --k) boundaries[k - 1] = cut[k][boundaries[k]];
  std::vector<int> stage_of(profile.layer_count(), 0);
  for (int s = 0; s < stages; ++s) {
    for (int i = boundaries[s]; i < boundaries[s + 1]; ++i) stage_of[compute_layers[i]] = s;
  }
  Plan plan;
  plan.profile_name = profile.name();
  plan.profile_path = profile.source_path();
  plan.cluster_name = cluster.name();
  plan.cluster_path = cluster.source_path();
  plan.workers = workers;
  plan.device_memory_bytes = cluster.device().memory_bytes;
  plan.cost_model = "balanced";
  plan.schedule = schedule;
  plan.microbatch_size = profile.batch_size();
  plan.microbatches = microbatches;
  plan.stages.resize(stages);
  for (std::size_t l = 0; l < profile.layer_count(); ++l) {
    PlanStage& stage = plan.stages[stage_of[l]];
    const Layer& layer = profile.layer(l);
    stage.layer_ids.push_back(layer.id);
    stage.layer_indices.push_back(l);
    // What leaves the stage: outputs consumed by a later stage.
    for (std::size_t next : profile.successors(l)) {
      if (stage_of[next] > stage_of[l]) {
        stage.output_activation_bytes += layer.activation_bytes;
        break;
      }
    }
  }
  int before = 0;
  for (int s = 0; s < stages; ++s) {
    PlanStage& stage = plan.stages[s];
    set_stage_figures(stage, stage_figures(profile, stage.layer_indices));
    stage.replicas = replicas[s];
    for (int r = 0; r < replicas[s]; ++r) stage.devices.push_back(before + r);
    set_stage_memory(stage, workers, before);
    before += replicas[s];
    plan.slowest_stage_s = std::max(plan.slowest_stage_s, stage.compute_s / replicas[s]);
    if (!plan.configuration.empty()) plan.configuration += "-";
    plan.configuration += std::to_string(replicas[s]);
  }
  plan.time_per_iteration_s = microbatches * plan.slowest_stage_s;
  plan.samples_per_s = plan.microbatch_size / plan.slowest_stage_s;
  return plan;
}

}  // namespace pipetwin
