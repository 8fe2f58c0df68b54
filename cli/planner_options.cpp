#include "cli/planner_options.h"

#include <iostream>

#include "planner/antichain_states.h"
#include "planner/branch_merging.h"
#include "planner/cost_model.h"

namespace pipetwin::cli {

void add_planner_options(CLI::App* command, PlannerArguments& arguments, bool profile_required, bool cluster_required,
                         bool recompute_option) {
  auto* profile = command->add_option("--profile,-p", arguments.profile_path,
                                      "model profile: pipetwin JSON or PipeDream graph.txt (detected from the content)")
                      ->check(CLI::ExistingFile);
  if (profile_required) profile->required();
  auto* cluster = command->add_option("--cluster,-c", arguments.cluster_path,
                                      "cluster spec JSON, e.g. platforms/pipedream-cluster-a.json")
                      ->check(CLI::ExistingFile);
  if (cluster_required) cluster->required();
  command->add_option("--workers,-n", arguments.workers,
                      "use only the first N workers of the cluster (8 on Cluster-B is one server: one level)")
      ->check(CLI::PositiveNumber);
  command->add_option("--memory-limit", arguments.memory_limit_bytes,
                      "bytes of memory per worker for stashed weights and activations (default: unlimited)")
      ->check(CLI::PositiveNumber);
  command->add_flag("--straight", arguments.straight, "no data-parallel replication: one worker per stage");
  command->add_flag("--no-activation-transfer", arguments.no_activation_transfer,
                    "ignore the time to send activations and gradients between stages");
  command->add_option("--cost-model", arguments.cost_model,
                      "'pipedream' (PipeDream's optimizer, exactly) or 'overlap' (ring all-reduce overlapped "
                      "with compute)")
      ->capture_default_str()
      ->check(CLI::IsMember(cost_model_names()));
  command->add_option("--batch-size", arguments.graph_batch_size,
                      "samples per minibatch of a graph.txt profile (graph.txt does not record it)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_flag("--merge-branches", arguments.merge_branches,
                    "merge every block of parallel branches into one layer before planning, as PipeDream's tooling "
                    "does (done anyway, with a note, when the graph has too many antichain states to plan)");
  if (!recompute_option) return;
  command->add_option("--recompute", arguments.recompute,
                      "'full': every stage keeps only its input per microbatch in flight and runs its forward again "
                      "before each backward (less memory, one more forward); 'auto': only the stages that would not "
                      "fit the device's memory do; the split is chosen without it")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "full", "auto"}));
}

OptimizerOptions optimizer_options(const PlannerArguments& arguments) {
  OptimizerOptions options;
  options.cost_model = arguments.cost_model;
  options.straight = arguments.straight;
  options.activation_transfer = !arguments.no_activation_transfer;
  options.memory_limit_bytes = arguments.memory_limit_bytes;
  return options;
}

Cluster load_cluster_for(const PlannerArguments& arguments) {
  Cluster cluster = load_cluster(arguments.cluster_path);
  if (arguments.workers) cluster = cluster.first_workers(*arguments.workers);
  return cluster;
}

PlannedModel plan_model(const PlannerArguments& arguments, const std::string& schedule, std::optional<int> microbatches) {
  Profile profile = load_profile(arguments.profile_path, arguments.graph_batch_size);
  const bool too_wide = !arguments.merge_branches && !build_antichain_states_within_limit(profile);
  if (arguments.merge_branches || too_wide) {
    MergedProfile merged = merge_parallel_branches(profile);
    std::cerr << "note: " << (too_wide ? "the graph has more than " + std::to_string(kMaxAntichainStates) +
                                              " antichain states; "
                                        : std::string())
              << "merged " << merged.merged_layers << " layers in " << merged.merged_blocks
              << " blocks of parallel branches into one layer each (" << profile.layer_count() << " layers -> "
              << merged.profile.layer_count() << ")\n";
    profile = std::move(merged.profile);
  }
  Cluster cluster = load_cluster_for(arguments);
  const OptimizerOptions options = optimizer_options(arguments);
  PartitionResult result = optimize_partition(profile, cluster, options);
  Plan plan = make_plan(profile, cluster, options, result, schedule, microbatches.value_or(default_microbatches(result)));
  if (arguments.recompute == "full") recompute_every_stage(plan);
  if (arguments.recompute == "auto") recompute_stages_over_memory(plan);
  return {std::move(profile), std::move(cluster), std::move(result), std::move(plan)};
}

}  // namespace pipetwin::cli
