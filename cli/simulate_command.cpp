// `pipetwin simulate`: plan (or read a plan), build the schedule, run it on the SimGrid model of the
// cluster, write the trace (and Chrome trace), print the summary. `pipetwin platform`: the cluster as
// SimGrid XML.
#include <iostream>

#include "cli/command_descriptions.h"
#include "cli/commands.h"
#include "cli/planner_options.h"
#include "planner/error.h"
#include "planner/json_fields.h"
#include "planner/schedule_generators.h"
#include "sim/platform.h"
#include "sim/simulation.h"

namespace pipetwin::cli {
namespace {

struct SimulateArguments {
  PlannerArguments planner;
  std::string plan_path;
  std::optional<std::string> schedule;
  std::optional<int> microbatches;
  int chunks = 1;
  int iterations = 3;
  int warmup = 1;
  std::string all_reduce = "ring";
  std::string collective_model = "bulk";
  std::string tensor_sums = "links";
  std::string compute_model = "profile";
  std::string platform_xml;
  std::string schedule_csv;
  bool ignore_memory = false;
  std::string output_path;
  std::string chrome_path;
};

int run_simulate(const SimulateArguments& arguments) {
  sim::SimulationConfig config{Plan{}, load_cluster_for(arguments.planner)};
  if (!arguments.plan_path.empty()) {
    config.plan = load_plan(arguments.plan_path);
  } else {
    if (arguments.planner.profile_path.empty()) {
      throw pipetwin::Error({"", 0, "--profile"}, "simulate needs a model", "pass --profile to plan on the fly, or --plan plan.json");
    }
    config.plan = plan_model(arguments.planner, arguments.schedule.value_or("1f1b"), arguments.microbatches).plan;
  }
  config.schedule_name = arguments.schedule.value_or(config.plan.schedule);
  config.microbatches = arguments.microbatches.value_or(config.plan.microbatches);
  config.chunks = arguments.chunks;
  config.iterations = arguments.iterations;
  config.warmup_iterations = arguments.warmup;
  config.all_reduce = arguments.all_reduce;
  config.collective_model = arguments.collective_model;
  config.tensor_sums = arguments.tensor_sums;
  config.compute_model = arguments.compute_model;
  config.platform_xml_path = arguments.platform_xml;
  config.schedule_csv_path = arguments.schedule_csv;
  config.ignore_memory = arguments.ignore_memory;
  const sim::SimulationResult result = sim::simulate(config);
  if (!arguments.output_path.empty()) write_trace(result.trace, arguments.output_path);
  if (!arguments.chrome_path.empty()) write_chrome_trace(result.trace, arguments.chrome_path);
  std::cout << sim::summary_text(config, result);
  if (!arguments.output_path.empty()) std::cout << "Trace written to " << arguments.output_path << "\n";
  if (!arguments.chrome_path.empty()) {
    std::cout << "Chrome trace written to " << arguments.chrome_path << " (open it in https://ui.perfetto.dev)\n";
  }
  return 0;
}

}  // namespace

Command add_simulate_command(CLI::App& app) {
  auto arguments = std::make_shared<SimulateArguments>();
  CLI::App* command = app.add_subcommand("simulate", kSimulateDescription);
  add_planner_options(command, arguments->planner, /*profile_required=*/false);
  command->add_option("--plan", arguments->plan_path, "plan JSON (default: plan on the fly from --profile)")
      ->check(CLI::ExistingFile);
  command->add_option("--schedule,-s", arguments->schedule,
                      schedule_names_text(" | ") + " (default: the plan's; 1f1b on the fly)")
      ->check(CLI::IsMember(schedule_names()));
  command->add_option("--microbatches,-m", arguments->microbatches, "microbatches per iteration (default: the plan's)")
      ->check(CLI::PositiveNumber);
  command->add_option("--chunks,-v", arguments->chunks, "stages per worker for interleaved, looped-bfs, interleaved-zb (zb-v and dualpipe-v: 2)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--iterations", arguments->iterations, "iterations to simulate")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--warmup", arguments->warmup, "first iterations left out of the reported time per iteration")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command->add_option("--all-reduce", arguments->all_reduce,
                      "ring (one ring over the replicas), hierarchical (ring inside each server, across, inside) or tree "
                      "(NCCL's double binary tree: log2(n) latencies instead of n)")
      ->capture_default_str()
      ->check(CLI::IsMember({"ring", "hierarchical", "tree"}));
  command->add_option("--collective-model", arguments->collective_model,
                      "bulk (one flow per ring edge with all its steps' bytes, latency per step: events grow with n) or "
                      "step (every ring step a transfer: 2(n-1) rounds of n; for checking, slow beyond a few hundred replicas)")
      ->capture_default_str()
      ->check(CLI::IsMember({"bulk", "step"}));
  command->add_option("--tensor-sums", arguments->tensor_sums,
                      "a tensor-parallel plan's all-reduces inside each worker's GPUs (pipetwin model --tp): links (rings "
                      "on the GPUs' links, sharing them with the other traffic) or paper (the profile's ring time, no "
                      "flows: about 3x faster at 16,384 GPUs)")
      ->capture_default_str()
      ->check(CLI::IsMember({"links", "paper"}));
  command->add_option("--compute-model", arguments->compute_model,
                      "profile (profiled times / device speed) or flops (profiled FLOPs / device peak FLOP/s, backward 2x)")
      ->capture_default_str()
      ->check(CLI::IsMember({"profile", "flops"}));
  command->add_option("--platform-xml", arguments->platform_xml,
                      "a SimGrid XML platform to use instead of the cluster's levels (its hosts, in name order, are the "
                      "workers)")
      ->check(CLI::ExistingFile);
  command->add_option("--schedule-file", arguments->schedule_csv,
                      "simulate this schedule CSV (from `pipetwin schedule -o`, perhaps edited) as it is: nothing is "
                      "generated; its first line gives the schedule, microbatches, iterations and chunks")
      ->check(CLI::ExistingFile);
  command->add_flag("--ignore-memory", arguments->ignore_memory,
                    "simulate even when a worker needs more than the device's memory");
  command->add_option("--output,-o", arguments->output_path, "trace: JSON lines (pipetwin.trace/1), or CSV for *.csv");
  command->add_option("--chrome", arguments->chrome_path, "Chrome trace JSON, for Perfetto");
  return [arguments] { return run_simulate(*arguments); };
}

Command add_platform_command(CLI::App& app) {
  auto cluster_path = std::make_shared<std::string>();
  auto workers = std::make_shared<std::optional<int>>();
  auto output = std::make_shared<std::string>();
  CLI::App* command = app.add_subcommand("platform", kPlatformDescription);
  command->add_option("--cluster,-c", *cluster_path, "cluster spec JSON")->required()->check(CLI::ExistingFile);
  command->add_option("--workers,-n", *workers, "only the first N workers")->check(CLI::PositiveNumber);
  command->add_option("--output,-o", *output, "XML file to write")->required();
  return [cluster_path, workers, output] {
    Cluster cluster = load_cluster(*cluster_path);
    if (*workers) cluster = cluster.first_workers(**workers);
    json_fields::write_text_atomically(*output, sim::platform_xml(cluster));
    std::cout << "Wrote " << *output << ": " << cluster.worker_count() << " hosts\n";
    return 0;
  };
}

}  // namespace pipetwin::cli
