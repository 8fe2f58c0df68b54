// `pipetwin sweep`: simulate stage counts x replica splits x schedules x microbatch counts (x link
// bandwidth scales) in parallel, write one CSV row per configuration and name the best; for a
// transformer (--preset), the configurations `pipetwin search` lays out (tensor x pipeline x data
// parallel, recomputation, microbatch size, schedule), each simulated.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "cli/command_descriptions.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/planner_options.h"
#include "planner/error.h"
#include "planner/json_fields.h"
#include "planner/parallel_search.h"
#include "planner/schedule_generators.h"
#include "sim/sweep.h"
#include "sim/sweep_merge.h"

namespace pipetwin::cli {
namespace {

struct SweepArguments {
  PlannerArguments planner;
  ModelShapeArguments shape;  // a transformer instead of --profile: search's configurations
  int global_batch = 0;
  std::vector<int> tensor_parallel, microbatch_sizes = {1, 2, 4};
  bool recomputation_given = false;
  bool no_sequence_parallel = false;
  std::vector<int> stages;
  std::vector<std::string> schedules{"1f1b", "gpipe"};
  std::vector<int> microbatches;
  std::vector<double> bandwidth_scales{1.0};
  std::vector<std::string> recomputation{"none"};
  int iterations = 3;
  int warmup = 1;
  int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool ignore_memory = false;
  std::string shard;  // "K/N"
  std::string output_path;
};

// "K/N" with 1 <= K <= N: (K - 1, N).
std::pair<int, int> parse_shard(const std::string& text) {
  int k = 0, n = 0, consumed = 0;
  if (std::sscanf(text.c_str(), "%d/%d%n", &k, &n, &consumed) != 2 || consumed != static_cast<int>(text.size()) || n < 1 ||
      k < 1 || k > n) {
    throw Error({"", 0, "--shard"}, "'" + text + "' is not a shard", "write K/N with 1 <= K <= N, e.g. --shard 2/8");
  }
  return {k - 1, n};
}

struct MergeArguments {
  std::vector<std::string> shard_paths;
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

// Names the best configuration and the place of the optimizer's plan ("dp" rows), or of the first
// feasible row (a transformer sweep: the fastest on paper that fits); exit status 1 when some failed.
int report_best(const std::vector<sim::SweepRow>& rows, const std::string& output_path, bool ignore_memory) {
  const int failed = sim::failed_rows(rows);
  auto status = [&] {  // some failed rows: say so, and exit 1 (the other rows are in the file)
    if (failed == 0) return 0;
    std::cerr << "error: " << failed << " of " << rows.size()
              << " simulations failed (rows with feasible=false and a note starting 'simulation failed'); the other "
                 "rows are in "
              << output_path << "\n";
    return 1;
  };
  const sim::SweepRow* best = sim::best_row(rows);
  if (best == nullptr) {
    std::cout << "No configuration fits the devices' memory: the note column says which worker and stage needs how "
                 "much.\n"
              << (ignore_memory ? "" : "Pass --ignore-memory to time them anyway.\n");
    return status();
  }
  std::cout << "Best:            " << describe(*best) << "\n";
  const bool transformer = std::none_of(rows.begin(), rows.end(), [](const sim::SweepRow& row) {
    return row.plan.rfind("dp", 0) == 0 || row.plan.rfind("balanced", 0) == 0;
  });
  const sim::SweepRow* reference = nullptr;
  for (const auto& row : rows) {
    if (!row.feasible || !row.simulated) continue;
    if (transformer) {  // rows in search's order: the first is the fastest on paper
      if (reference == nullptr) reference = &row;
    } else if (row.plan == "dp" && (reference == nullptr || row.samples_per_s > reference->samples_per_s)) {
      reference = &row;
    }
  }
  const char* label = transformer ? "Fastest on paper: " : "Optimizer's plan: ";
  if (reference != nullptr) {
    char gap[64];
    std::snprintf(gap, sizeof gap, " (%.1f%% below the best)", 100.0 * (1.0 - reference->samples_per_s / best->samples_per_s));
    std::cout << label << describe(*reference) << (reference == best ? " (the best)" : gap) << "\n";
  } else if (!transformer) {
    std::cout << label << "no feasible row (see the note column)\n";
  }
  return status();
}

// What is swept and on what: a measured profile planned as `pipetwin plan` does, its plans, schedules,
// microbatch counts and recomputation; or a transformer's configurations as `pipetwin search` lays
// them out (search_parallel_plans), each with its own profile, cluster of groups and plan.
struct SweptModel {
  std::string name;  // the model's
  Profile profile;   // a transformer's: its first configuration's (the sweep's fingerprint names it)
  Cluster cluster;   // the GPUs
  std::string unit;  // what the cluster's workers are: "workers", or "GPUs" (a transformer's)
};

SweptModel transformer_space(const SweepArguments& arguments, sim::SweepSpace& space) {
  check_one_model(arguments.shape, arguments.planner.profile_path);
  if (arguments.global_batch == 0) {
    throw Error({"", 0, "--global-batch"}, "a transformer's sweep needs the global batch",
                "give --global-batch B (sequences per iteration): each configuration's microbatch count is B / (d b)");
  }
  if (!arguments.microbatches.empty()) {
    throw Error({"", 0, "--microbatches"}, "a transformer's microbatch counts follow from the global batch",
                "leave out --microbatches: each configuration runs --global-batch / (d b) microbatches per pipeline");
  }
  ParallelSearchRequest request;
  request.model = model_spec(arguments.shape);
  request.global_batch = arguments.global_batch;
  request.tensor_parallel = arguments.tensor_parallel;
  request.stages = arguments.stages;
  request.microbatch_sizes = arguments.microbatch_sizes;
  request.recomputation.clear();
  const std::vector<std::string> modes =
      arguments.recomputation_given ? arguments.recomputation : std::vector<std::string>{"none", "selective", "full"};
  for (const std::string& name : modes) request.recomputation.push_back(recomputation_from_name(name, "--recompute"));
  request.schedules = arguments.schedules;
  request.sequence_parallel = !arguments.no_sequence_parallel;
  const Cluster cluster = load_cluster_for(arguments.planner);
  std::cerr << "laying out " << request.model.name << "'s configurations on " << cluster.worker_count() << " GPUs...\n";
  const ParallelSearchResult result = search_parallel_plans(request, cluster);
  std::optional<Profile> first;  // the first configuration's profile, which the sweep's fingerprint names
  for (const ParallelConfiguration& c : result.configurations) {  // fastest on paper first
    ParallelPlan built = parallel_plan(request, cluster, c);
    const std::string name = "t" + std::to_string(c.tensor_parallel) + " b" + std::to_string(c.microbatch_size) + " " +
                             recomputation_name(c.recomputation);
    space.configurations.push_back({name, built.profile.name(), std::move(built.cluster), std::move(built.plan), c.schedule,
                                    c.microbatches * c.data_parallel});
    if (!first) first = std::move(built.profile);
  }
  if (!first) {
    throw Error({"", 0, "--global-batch"}, "no configuration to sweep",
                "try other --tp, --stages or --microbatch-sizes (pipetwin search says what each allows)");
  }
  return {request.model.name, *first, cluster, "GPUs"};
}

SweptModel profile_space(const SweepArguments& arguments, sim::SweepSpace& space) {
  if (arguments.planner.profile_path.empty()) {
    throw Error({"", 0, "--profile"}, "--profile is required", "see pipetwin sweep --help (or describe a transformer: --preset)");
  }
  for (const std::string& mode : arguments.recomputation) {
    if (mode == "selective") {
      throw Error({"", 0, "--recompute"}, "selective recomputation needs a transformer's attention",
                  "use none or full with --profile, or describe a transformer (--preset)");
    }
  }
  const PlannedModel model = plan_model(arguments.planner, "1f1b", std::nullopt);
  space.optimizer_plan = model.plan;
  space.microbatches = arguments.microbatches;
  if (space.microbatches.empty()) space.microbatches = {model.plan.microbatches, 2 * model.plan.microbatches};
  space.recomputation = arguments.recomputation;
  space.stage_counts = arguments.stages;
  if (space.stage_counts.empty()) {
    int compute_layers = 0;
    for (const Layer& layer : model.profile.layers()) compute_layers += !layer.is_input;
    for (int p = 1; p <= model.cluster.worker_count() && p <= compute_layers; p *= 2) {
      if (model.cluster.worker_count() % p == 0) space.stage_counts.push_back(p);
    }
  }
  return {model.profile.name(), model.profile, model.cluster, "workers"};
}

int run_sweep_command(const SweepArguments& arguments) {
  for (const auto& [value, option] : {std::pair{&arguments.planner.cluster_path, "--cluster"},
                                      std::pair{&arguments.output_path, "--output"}}) {
    if (value->empty()) throw Error({"", 0, option}, std::string(option) + " is required", "see pipetwin sweep --help");
  }
  const auto [shard, shards] = arguments.shard.empty() ? std::pair{0, 1} : parse_shard(arguments.shard);
  sim::SweepSpace space;
  space.schedules = arguments.schedules;
  space.bandwidth_scales = arguments.bandwidth_scales;
  space.iterations = arguments.iterations;
  space.warmup_iterations = arguments.warmup;
  space.simulate_infeasible = arguments.ignore_memory;
  space.shard = shard;
  space.shards = shards;
  const SweptModel model =
      describes_transformer(arguments.shape) ? transformer_space(arguments, space) : profile_space(arguments, space);
  ProgressBar bar(::isatty(STDERR_FILENO) != 0);
  const auto rows = sim::run_sweep(model.profile, model.cluster, space, arguments.jobs,
                                   [&bar](int done, int total, const sim::SweepRow& row) { bar.update(done, total, row); });
  json_fields::write_text_atomically(arguments.output_path,
                                     arguments.shard.empty()
                                         ? sim::sweep_csv(rows)
                                         : sim::sweep_shard_csv(rows, sim::sweep_identity(model.profile, model.cluster, space),
                                                                shard, shards));
  if (!arguments.shard.empty()) {
    std::cout << "Shard " << shard + 1 << "/" << shards << ": " << rows.size() << " configurations in " << arguments.output_path
              << "; put the shards together with pipetwin sweep merge\n";
  }
  int feasible = 0;
  for (const auto& row : rows) feasible += row.feasible;
  std::cout << "Swept " << rows.size() << " configurations of " << model.name << " on " << model.cluster.name()
            << " (" << model.cluster.worker_count() << " " << model.unit << "), " << feasible << " feasible; rows in "
            << arguments.output_path << "\n";
  return report_best(rows, arguments.output_path, arguments.ignore_memory);
}

// Merges the shards of a sweep into the CSV the whole sweep would have written, and names the best.
int run_merge_command(const MergeArguments& arguments) {
  std::vector<sim::ShardFile> files;
  for (const std::string& path : arguments.shard_paths) files.push_back({path, json_fields::read_text(path, "sweep shard")});
  const sim::MergedSweep merged = sim::merge_sweep_shards(files);
  json_fields::write_text_atomically(arguments.output_path, merged.csv);
  int feasible = 0;
  for (const auto& row : merged.rows) feasible += row.feasible;
  std::cout << "Merged " << files.size() << " shards: " << merged.rows.size() << " configurations, " << feasible
            << " feasible; rows in " << arguments.output_path << "\n";
  return report_best(merged.rows, arguments.output_path, true);
}

}  // namespace

Command add_sweep_command(CLI::App& app) {
  auto arguments = std::make_shared<SweepArguments>();
  CLI::App* command = app.add_subcommand("sweep", kSweepDescription);
  add_planner_options(command, arguments->planner, /*profile_required=*/false, /*cluster_required=*/false,
                      /*recompute_option=*/false);
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
  command->add_option("--recompute", arguments->recomputation,
                      "recomputation to sweep: none, full (every stage keeps only its input and recomputes its forward "
                      "before each backward; its rows' plan is dp+recompute or balanced+recompute), or none,full; for a "
                      "transformer also selective (default there: none,selective,full)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "selective", "full"}))
      ->each([arguments](const std::string&) { arguments->recomputation_given = true; });
  add_model_shape_options(command, arguments->shape);
  command->add_option("--global-batch,-B", arguments->global_batch,
                      "with a transformer (--preset ...): sequences per iteration; its configurations are pipetwin "
                      "search's (t x p x d, recomputation, microbatch size, schedule), each simulated")
      ->check(CLI::PositiveNumber);
  command->add_option("--tp", arguments->tensor_parallel, "with a transformer: tensor-parallel degrees (default: divisors of a server)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  command->add_option("--microbatch-sizes", arguments->microbatch_sizes, "with a transformer: microbatch sizes")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_flag("--no-sequence-parallel", arguments->no_sequence_parallel,
                    "with a transformer: keep activations whole across the t GPUs");
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
  command->add_option("--shard", arguments->shard,
                      "K/N: run only the K-th of N disjoint slices of the configurations (ids as in the whole sweep) "
                      "and write them with the sweep's fingerprint; `pipetwin sweep merge` puts the N files together");
  command->add_option("--output,-o", arguments->output_path, "CSV to write (required)");
  auto merge = std::make_shared<MergeArguments>();
  CLI::App* merge_command = command->add_subcommand(
      "merge", "Put the shards of one sweep together (`pipetwin sweep merge s1.csv s2.csv ... -o all.csv`): checks they\n"
               "are all the shards of the same sweep, none missing or twice, writes the CSV the whole sweep would\n"
               "have written and names the best configuration.");
  merge_command->add_option("shards", merge->shard_paths, "the shards' CSV files")->required()->check(CLI::ExistingFile);
  merge_command->add_option("--output,-o", merge->output_path, "merged CSV to write")->required();
  return [arguments, merge, merge_command] {
    return merge_command->parsed() ? run_merge_command(*merge) : run_sweep_command(*arguments);
  };
}

}  // namespace pipetwin::cli
