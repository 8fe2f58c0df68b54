// The options every command that plans shares (plan, simulate, sweep), and the planning they drive.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "planner/cluster.h"
#include "planner/partition_optimizer.h"
#include "planner/plan.h"
#include "planner/profile.h"
#include "planner/profile_io.h"

namespace pipetwin::cli {

struct PlannerArguments {
  std::string profile_path;
  std::string cluster_path;
  std::optional<int> workers;
  std::optional<double> memory_limit_bytes;
  bool straight = false;
  bool no_activation_transfer = false;
  std::string cost_model = "pipedream";
  int graph_batch_size = kPipeDreamDefaultBatchSize;
  bool merge_branches = false;  // merge every block of parallel branches (also done when the graph is too wide)
  std::string recompute = "none";  // "full": every stage recomputes its forward before each backward;
                                   // "auto": the stages over the device's memory (recompute_stages_over_memory)
};

// Registers --profile, --cluster, --workers, --memory-limit, --straight, --no-activation-transfer,
// --cost-model, --batch-size, --merge-branches and --recompute. `profile_required`, `cluster_required`: whether they must be given
// (a command with subcommands of its own checks them itself).
// `recompute_option`: whether to register --recompute (sweep has its own, a list to sweep).
void add_planner_options(CLI::App* command, PlannerArguments& arguments, bool profile_required = true,
                         bool cluster_required = true, bool recompute_option = true);

OptimizerOptions optimizer_options(const PlannerArguments& arguments);
Cluster load_cluster_for(const PlannerArguments& arguments);  // --workers applied

struct PlannedModel {
  Profile profile;  // as planned: with its parallel branches merged when that was needed or asked for
  Cluster cluster;
  PartitionResult result;
  Plan plan;
};

// Plans the model; `microbatches` unset: default_microbatches() of the result. A graph with more
// antichain states than the optimizer can take (or --merge-branches) has its parallel branches merged
// first, with a note on stderr saying so. --recompute full applies recompute_every_stage to the plan,
// --recompute auto recompute_stages_over_memory
// (after the optimizer, which plans without it).
PlannedModel plan_model(const PlannerArguments& arguments, const std::string& schedule, std::optional<int> microbatches);

}  // namespace pipetwin::cli
