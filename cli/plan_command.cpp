// `pipetwin plan`: run the partition optimizer on a profile and a cluster, print the summary and
// optionally write the plan JSON.
#include <iostream>
#include <optional>

#include "cli/commands.h"
#include "planner/cluster.h"
#include "planner/cost_model.h"
#include "planner/partition_optimizer.h"
#include "planner/plan.h"
#include "planner/profile_io.h"

namespace pipetwin::cli {
namespace {

struct PlanArguments {
  std::string profile_path;
  std::string cluster_path;
  std::optional<int> workers;
  std::optional<double> memory_limit_bytes;
  bool straight = false;
  bool no_activation_transfer = false;
  std::string cost_model = "pipedream";
  std::string schedule = "pipedream";
  int microbatches = 8;
  int graph_batch_size = kPipeDreamDefaultBatchSize;
  std::string output_path;
  bool quiet = false;
};

int run_plan(const PlanArguments& arguments) {
  const Profile profile = load_profile(arguments.profile_path, arguments.graph_batch_size);
  Cluster cluster = load_cluster(arguments.cluster_path);
  if (arguments.workers) cluster = cluster.first_workers(*arguments.workers);
  OptimizerOptions options;
  options.cost_model = arguments.cost_model;
  options.straight = arguments.straight;
  options.activation_transfer = !arguments.no_activation_transfer;
  options.memory_limit_bytes = arguments.memory_limit_bytes;
  const PartitionResult result = optimize_partition(profile, cluster, options);
  const Plan plan = make_plan(profile, cluster, options, result, arguments.schedule, arguments.microbatches);
  if (!arguments.output_path.empty()) write_plan(plan, arguments.output_path);
  if (!arguments.quiet) {
    std::cout << plan_summary(plan, profile, result);
    if (!arguments.output_path.empty()) std::cout << "\nPlan written to " << arguments.output_path << "\n";
  }
  return 0;
}

}  // namespace

Command add_plan_command(CLI::App& app) {
  auto arguments = std::make_shared<PlanArguments>();
  CLI::App* command = app.add_subcommand(
      "plan",
      "Find the best split of a model over a cluster (PipeDream's hierarchical dynamic program).\n"
      "Prints per-level splits, per-stage time and replication, the slowest stage and the speedup\n"
      "over data parallelism; -o writes the plan as JSON for `pipetwin schedule/simulate/run`.");
  command->add_option("--profile,-p", arguments->profile_path,
                      "model profile: pipetwin JSON or PipeDream graph.txt (detected from the content)")
      ->required()
      ->check(CLI::ExistingFile);
  command->add_option("--cluster,-c", arguments->cluster_path, "cluster spec JSON, e.g. platforms/pipedream-cluster-a.json")
      ->required()
      ->check(CLI::ExistingFile);
  command->add_option("--workers,-n", arguments->workers,
                      "use only the first N workers of the cluster (8 on Cluster-B is one server: one level)")
      ->check(CLI::PositiveNumber);
  command->add_option("--memory-limit", arguments->memory_limit_bytes,
                      "bytes of memory per worker for stashed weights and activations (default: unlimited)")
      ->check(CLI::PositiveNumber);
  command->add_flag("--straight", arguments->straight, "no data-parallel replication: one worker per stage");
  command->add_flag("--no-activation-transfer", arguments->no_activation_transfer,
                    "ignore the time to send activations and gradients between stages");
  command->add_option("--cost-model", arguments->cost_model,
                      "'pipedream' (PipeDream's optimizer, exactly) or 'overlap' (ring all-reduce overlapped "
                      "with compute)")
      ->capture_default_str()
      ->check(CLI::IsMember(cost_model_names()));
  command->add_option("--schedule", arguments->schedule, "schedule recorded in the plan")->capture_default_str();
  command->add_option("--microbatches", arguments->microbatches, "microbatches per iteration recorded in the plan")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--batch-size", arguments->graph_batch_size,
                      "samples per minibatch of a graph.txt profile (graph.txt does not record it)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--output,-o", arguments->output_path, "write the plan JSON here");
  command->add_flag("--quiet,-q", arguments->quiet, "print nothing (use with -o)");
  return [arguments] { return run_plan(*arguments); };
}

Command add_convert_command(CLI::App& app) {
  auto input = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>();
  auto batch_size = std::make_shared<int>(kPipeDreamDefaultBatchSize);
  CLI::App* command = app.add_subcommand(
      "convert", "Convert a profile (PipeDream graph.txt or pipetwin JSON) to pipetwin's profile JSON.");
  command->add_option("--profile,-p", *input, "profile to read")->required()->check(CLI::ExistingFile);
  command->add_option("--output,-o", *output, "profile JSON to write")->required();
  command->add_option("--batch-size", *batch_size, "samples per minibatch of a graph.txt profile")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  return [input, output, batch_size] {
    const Profile profile = load_profile(*input, *batch_size);
    write_profile_json(profile, *output);
    std::cout << "Wrote " << *output << ": " << profile.layer_count() << " layers, " << profile.edges().size()
              << " edges, fwd " << profile.total_fwd_ms() << " ms, bwd " << profile.total_bwd_ms() << " ms, "
              << profile.total_param_bytes() << " parameter bytes\n";
    return 0;
  };
}

}  // namespace pipetwin::cli
