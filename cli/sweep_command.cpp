// `pipetwin sweep`: simulate stage counts x replica splits x schedules x microbatch counts (x link
// bandwidth scales) in parallel, write one CSV row per configuration and name the best.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <sstream>
#include <thread>

#include "cli/command_descriptions.h"
#include "cli/commands.h"
#include "cli/planner_options.h"
#include "planner/error.h"
#include "planner/json_fields.h"
#include "planner/schedule_generators.h"
#include "sim/sweep.h"

namespace pipetwin::cli {
namespace {

struct SweepArguments {
  PlannerArguments planner;
  std::vector<int> stages;
  std::vector<std::string> schedules{"1f1b", "gpipe"};
  std::vector<int> microbatches;
  std::vector<double> bandwidth_scales{1.0};
  int iterations = 3;
  int warmup = 1;
  int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool ignore_memory = false;
  std::string output_path;
};

// A progress bar on stderr: redrawn in place on a terminal, a line per tenth otherwise.
class ProgressBar {
 public:
  explicit ProgressBar(bool terminal) : terminal_(terminal) {}
  void update(int done, int total, const sim::SweepRow& row) {
    if (row.feasible && row.samples_per_s > best_) best_ = row.samples_per_s;
    if (!terminal_ && done * 10 / total == shown_ * 10 / total && done != total) return;
    shown_ = done;
    const int width = 30, filled = done * width / total;
    std::fprintf(stderr, "%ssweep [%s%s] %d/%d configurations, best %.1f samples/s%s", terminal_ ? "\r" : "",
                 std::string(filled, '=').c_str(), std::string(width - filled, ' ').c_str(), done, total, best_,
                 terminal_ && done != total ? "" : "\n");
    std::fflush(stderr);
  }

 private:
  bool terminal_;
  int shown_ = 0;
  double best_ = 0.0;
};

std::string describe(const sim::SweepRow& row) {
  char text[256];
  std::snprintf(text, sizeof text, "#%d %s plan, %d stages (%s), %s, %d microbatches%s: %.6f s per iteration, %.1f samples/s",
                row.id, row.plan.c_str(), row.stages, row.replicas.c_str(), row.schedule.c_str(), row.microbatches,
                row.bandwidth_scale != 1.0 ? (", bandwidth x" + std::to_string(row.bandwidth_scale)).c_str() : "",
                row.iteration_s, row.samples_per_s);
  return text;
}

int run_sweep_command(const SweepArguments& arguments) {
  const PlannedModel model = plan_model(arguments.planner, "1f1b", std::nullopt);
  sim::SweepSpace space;
  space.optimizer_plan = model.plan;
  space.schedules = arguments.schedules;
  space.microbatches = arguments.microbatches;
  if (space.microbatches.empty()) space.microbatches = {model.plan.microbatches, 2 * model.plan.microbatches};
  space.bandwidth_scales = arguments.bandwidth_scales;
  space.iterations = arguments.iterations;
  space.warmup_iterations = arguments.warmup;
  space.stage_counts = arguments.stages;
  space.simulate_infeasible = arguments.ignore_memory;
  if (space.stage_counts.empty()) {
    int compute_layers = 0;
    for (const Layer& layer : model.profile.layers()) compute_layers += !layer.is_input;
    for (int p = 1; p <= model.cluster.worker_count() && p <= compute_layers; p *= 2) {
      if (model.cluster.worker_count() % p == 0) space.stage_counts.push_back(p);
    }
  }
  ProgressBar bar(::isatty(STDERR_FILENO) != 0);
  const auto rows = sim::run_sweep(model.profile, model.cluster, space, arguments.jobs,
                                   [&bar](int done, int total, const sim::SweepRow& row) { bar.update(done, total, row); });
  json_fields::write_text_atomically(arguments.output_path, sim::sweep_csv(rows));
  int feasible = 0;
  for (const auto& row : rows) feasible += row.feasible;
  std::cout << "Swept " << rows.size() << " configurations of " << model.profile.name() << " on " << model.cluster.name()
            << " (" << model.cluster.worker_count() << " workers), " << feasible << " feasible; rows in "
            << arguments.output_path << "\n";
  const int failed = sim::failed_rows(rows);
  auto status = [&] {  // some failed rows: say so, and exit 1 (the other rows are in the file)
    if (failed == 0) return 0;
    std::cerr << "error: " << failed << " of " << rows.size()
              << " simulations failed (rows with feasible=false and a note starting 'simulation failed'); the other "
                 "rows are in "
              << arguments.output_path << "\n";
    return 1;
  };
  const sim::SweepRow* best = sim::best_row(rows);
  if (best == nullptr) {
    std::cout << "No configuration fits the devices' memory: the note column says which worker and stage needs how "
                 "much.\n"
              << (arguments.ignore_memory ? "" : "Pass --ignore-memory to time them anyway.\n");
    return status();
  }
  std::cout << "Best:            " << describe(*best) << "\n";
  const sim::SweepRow* best_dp = nullptr;
  for (const auto& row : rows) {
    if (row.plan == "dp" && row.feasible && (best_dp == nullptr || row.samples_per_s > best_dp->samples_per_s)) best_dp = &row;
  }
  if (best_dp != nullptr) {
    char gap[64];
    std::snprintf(gap, sizeof gap, " (%.1f%% below the best)", 100.0 * (1.0 - best_dp->samples_per_s / best->samples_per_s));
    std::cout << "Optimizer's plan: " << describe(*best_dp) << (best_dp == best ? " (the best)" : gap) << "\n";
  } else {
    std::cout << "Optimizer's plan: no feasible row (see the note column)\n";
  }
  return status();
}

}  // namespace

Command add_sweep_command(CLI::App& app) {
  auto arguments = std::make_shared<SweepArguments>();
  CLI::App* command = app.add_subcommand("sweep", kSweepDescription);
  add_planner_options(command, arguments->planner);
  command->add_option("--stages", arguments->stages,
                      "stage counts of the balanced plans, e.g. 1,2,4 (default: powers of two dividing the workers)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  command->add_option("--schedules", arguments->schedules, "schedules to try")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::IsMember(schedule_names()));
  command->add_option("--microbatches", arguments->microbatches,
                      "microbatch counts to try (default: the plan's default and twice it)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  command->add_option("--bandwidth-scales", arguments->bandwidth_scales, "multiply every link's bandwidth by each, e.g. 0.5,1,2")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--iterations", arguments->iterations, "iterations per simulation")->capture_default_str()->check(CLI::PositiveNumber);
  command->add_option("--warmup", arguments->warmup, "warm-up iterations left out")->capture_default_str()->check(CLI::NonNegativeNumber);
  command->add_option("--jobs,-j", arguments->jobs, "simulations at a time (default: the cores)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_flag("--ignore-memory", arguments->ignore_memory,
                   "also simulate configurations that need more than the device's memory (still marked infeasible)");
  command->add_option("--output,-o", arguments->output_path, "CSV to write")->required();
  return [arguments] { return run_sweep_command(*arguments); };
}

}  // namespace pipetwin::cli
