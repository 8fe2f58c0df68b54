// `pipetwin plan`: run the partition optimizer on a profile and a cluster, print the summary and
// optionally write the plan JSON.
#include <iostream>
#include <optional>

#include "cli/commands.h"
#include "cli/planner_options.h"
#include "planner/schedule_generators.h"
#include "planner/cluster.h"
#include "planner/cost_model.h"
#include "planner/partition_optimizer.h"
#include "planner/plan.h"
#include "planner/profile_io.h"

namespace pipetwin::cli {
namespace {

struct PlanArguments {
  PlannerArguments planner;
  std::string schedule = "pipedream";
  std::optional<int> microbatches;
  std::string output_path;
  bool quiet = false;
};

int run_plan(const PlanArguments& arguments) {
  const PlannedModel model = plan_model(arguments.planner, arguments.schedule, arguments.microbatches);
  if (!arguments.output_path.empty()) write_plan(model.plan, arguments.output_path);
  if (!arguments.quiet) {
    std::cout << plan_summary(model.plan, model.profile, model.result);
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
  add_planner_options(command, arguments->planner);
  command->add_option("--schedule", arguments->schedule, "schedule recorded in the plan")
      ->capture_default_str()
      ->check(CLI::IsMember(schedule_names()));
  command->add_option("--microbatches", arguments->microbatches,
                      "microbatches per iteration recorded in the plan (default: a multiple of every stage's replica "
                      "count, at least 8)")
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
