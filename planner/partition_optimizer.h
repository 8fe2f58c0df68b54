// PartitionOptimizer — PipeDream's hierarchical dynamic program over a profile and a cluster.
//
// For each cluster level, innermost first, A[i][j][m] is the best time per minibatch slot of states
// i..j on m+1 units of that level: either one stage replicated m+1 times, or the best split after a
// state k with m' replicas for the last stage k+1..j and A[i][k][m-m'] for the rest. A solved level's
// A[.][.][last] becomes the next level's compute time, so a stage at level L is itself pipelined over
// the units of level L-1. Semantics follow PipeDream's optimizer_graph_hierarchical.py under the
// "pipedream" cost model (including its quirks); see cost_model.h for the alternative.
//
// Errors: throws pipetwin::Error when no partition fits the memory limit (naming the limit and the
// smallest stage that would be needed), or when the cluster or options are unusable.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "planner/antichain_states.h"
#include "planner/cluster.h"
#include "planner/profile.h"

namespace pipetwin {

struct OptimizerOptions {
  std::string cost_model = "pipedream";
  bool straight = false;                     // no replication: one worker per stage
  bool activation_transfer = true;           // count activation/gradient transfer between stages
  std::optional<double> memory_limit_bytes;  // per worker; none = unlimited
  bool use_chain_fast_path = true;           // on chains, prune split points by bounds (same answer)
};

// One stage at one level: states [first_state, end_state) on `replicas` units of that level.
struct LevelStage {
  std::size_t first_state = 0;
  std::size_t end_state = 0;
  int replicas = 1;
  int first_unit = 0;      // index of its first unit inside the parent unit
  double compute_s = 0.0;  // the compute the level sees (summed fwd+bwd, or the pipeline time below)
  double stage_time_s = 0.0;  // cost model's time of this stage, without activation transfer
};

struct LevelPartition {
  std::string level_name;
  int units = 1;             // units at this level (level's count)
  double bandwidth_bytes_per_s = 0.0;
  std::vector<std::vector<LevelStage>> segments;  // one split per segment handed down from above
};

// A stage of the final pipeline (after all levels), in pipeline order.
struct PipelineStage {
  std::size_t first_state = 0, end_state = 0;
  std::vector<std::size_t> layers;  // profile layer indices, ascending
  int replicas = 1;                 // product over levels
  std::vector<int> devices;         // worker ids, ascending
  double compute_s = 0.0;           // summed fwd+bwd (+ recomputation) of its layers, per minibatch
  double forward_s = 0.0;           // summed fwd
  double backward_s = 0.0;          // summed bwd
  double backward_input_s = 0.0;    // summed bwd_input where every layer has one, else 0
  double backward_weight_s = 0.0;   // summed bwd_weight where every layer has both parts, else 0
  double compute_share = 1.0;       // weight in a machine's shared compute (stage_figures.h)
  double forward_flops = 0.0;       // summed forward FLOPs where every compute layer has them, else 0
  double param_bytes = 0.0;
  double activation_bytes = 0.0;    // summed stashed activation bytes of its layers
  double output_gradient_bytes = 0.0;  // held from a split backward's I to its W (stage_figures.h)
  double optimizer_bytes = 0.0;     // gradients and optimizer state per replica (stage_figures.h)
  double output_activation_bytes = 0.0;  // what it sends to the next stage
  bool recomputed = false;          // its backwards follow a RECOMPUTE of their forward (stage_figures.h)
  double recompute_s = 0.0;         // one RECOMPUTE, per minibatch
  double recompute_bytes = 0.0;     // held from a RECOMPUTE to the end of its backward, besides the stash
  TensorSums tensor_sums;           // its layers' tensor-parallel all-reduces (tensor_sums.h)
};

struct PartitionResult {
  AntichainStates states;
  std::vector<LevelPartition> levels;  // innermost first
  std::vector<PipelineStage> stages;
  double pipeline_time_s = 0.0;       // A[0][N-1][W-1] of the outermost level: the slowest stage
  double data_parallel_time_s = 0.0;  // data parallelism over the same workers, same cost model
  double single_worker_time_s = 0.0;  // summed fwd+bwd of everything
  int workers = 0;
  std::string configuration;          // replicas per stage, e.g. "15-1"
  double speedup_over_data_parallel() const { return data_parallel_time_s / pipeline_time_s; }
};

PartitionResult optimize_partition(const Profile& profile, const Cluster& cluster, const OptimizerOptions& options);

// Data parallelism over every worker under the cost model, level by level (PipeDream's baseline).
double data_parallel_time_s(double compute_s, double param_bytes, const Cluster& cluster, const std::string& cost_model);

}  // namespace pipetwin
