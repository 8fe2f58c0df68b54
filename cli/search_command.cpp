// `pipetwin search`: the fastest tensor x pipeline x data parallel split, recomputation, microbatch
// size and schedule of a transformer on a cluster that fits in memory (planner/parallel_search.h);
// prints the ranking and why the choice is what it is, and writes the chosen plan to simulate.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "planner/cluster.h"
#include "planner/error.h"
#include "planner/json_fields.h"
#include "planner/parallel_search.h"
#include "planner/plan.h"
#include "planner/profile_io.h"

namespace pipetwin::cli {
namespace {

struct SearchArguments {
  ModelShapeArguments shape;
  std::string profile_path;
  int graph_batch_size = kPipeDreamDefaultBatchSize;
  bool microbatch_sizes_given = false;
  std::string cluster_path;
  int global_batch = 0;
  std::vector<int> tensor_parallel, stages, microbatch_sizes = {1, 2, 4};
  std::vector<std::string> recomputation = {"none", "selective", "full"};
  std::vector<std::string> schedules = {"1f1b", "gpipe", "interleaved", "zb-h1", "zb-v"};
  bool no_sequence_parallel = false;
  std::optional<int> workers;
  bool ignore_memory = false;
  int top = 10;
  std::string output_dir;
  std::string csv_path;
};

std::string row(const ParallelConfiguration& c) {
  char text[200], tflops[32] = "       -";
  if (c.model_tflops_per_gpu > 0.0) std::snprintf(tflops, sizeof tflops, "%8.1f", c.model_tflops_per_gpu);
  std::snprintf(text, sizeof text, "  %-44s %10.4f %9.4f %s %9.1f  %s", c.label().c_str(), c.iteration_s, c.allreduce_s,
                tflops, c.peak_memory_bytes / 1e9, c.fits ? "yes" : "no");
  return text;
}

int run_search(const SearchArguments& arguments) {
  ParallelSearchRequest request;
  check_one_model(arguments.shape, arguments.profile_path);
  if (arguments.profile_path.empty()) {
    request.model = model_spec(arguments.shape);
  } else {
    request.measured = load_profile(arguments.profile_path, arguments.graph_batch_size);
    request.model.name = request.measured->name();
  }
  request.global_batch = arguments.global_batch;
  request.tensor_parallel = arguments.tensor_parallel;
  request.stages = arguments.stages;
  request.microbatch_sizes = arguments.microbatch_sizes;
  if (request.measured && !arguments.microbatch_sizes_given) {  // the profile's batch, halved up to 3 times
    request.microbatch_sizes.clear();
    for (int b = request.measured->batch_size(), halvings = 0; b >= 1 && halvings < 4; b /= 2, ++halvings) {
      request.microbatch_sizes.push_back(b);
      if (b % 2 != 0) break;
    }
  }
  request.recomputation.clear();
  for (const std::string& name : arguments.recomputation) {
    request.recomputation.push_back(recomputation_from_name(name, "--recompute"));
  }
  request.schedules = arguments.schedules;
  request.sequence_parallel = !arguments.no_sequence_parallel;
  Cluster cluster = load_cluster(arguments.cluster_path);
  if (arguments.workers) cluster = cluster.first_workers(*arguments.workers);
  std::cerr << "searching " << cluster.worker_count() << " GPUs for " << request.model.name << "...\n";
  ParallelSearchResult result = search_parallel_plans(request, cluster);
  if (arguments.ignore_memory) result.best_fit = result.best_overall;

  if (!arguments.csv_path.empty()) json_fields::write_text_atomically(arguments.csv_path, parallel_search_csv(result));
  std::cout << "Search for " << request.model.name << " on " << cluster.name() << " (" << cluster.worker_count()
            << " GPUs, " << cluster.device().memory_bytes / 1e9 << " GB each), global batch " << request.global_batch
            << (request.measured ? " samples: " : " sequences: ") << result.configurations.size() << " configurations"
            << (result.skipped ? " (" + std::to_string(result.skipped) + " not laid out)" : "") << "\n"
            << "  t: tensor parallel, p: stages, d: data parallel, b: microbatch size, m: microbatches per pipeline\n"
            << (request.measured ? "  r: PipeDream's own plan, replicas per stage (its microbatches round robin over them)\n" : "")
            << "  (iteration time on paper, no contention: simulate the written plan for the prediction)\n\n"
            << "  configuration                                 iteration_s  allreduce  TFLOP/s  memory_GB  fits\n";
  const int shown = std::min<int>(arguments.top, static_cast<int>(result.configurations.size()));
  for (int i = 0; i < shown; ++i) std::cout << row(result.configurations[i]) << "\n";
  if (result.best_fit >= shown) std::cout << "  ...\n" << row(result.configurations[result.best_fit]) << "\n";
  std::cout << "\n";
  if (result.best_fit < 0) {
    std::cout << "No configuration fits. Bound by " << result.binding_constraint()
              << " (fix: more GPUs or more memory per GPU in " << arguments.cluster_path
              << ", full recomputation or smaller microbatches if not tried, or --ignore-memory to see the fastest)\n";
    return 1;
  }
  const ParallelConfiguration& best = result.configurations[result.best_fit];
  std::cout << "Chosen: " << best.label() << ", " << best.iteration_s << " s per iteration, "
            << best.peak_memory_bytes / 1e9 << " GB on its busiest GPU"
            << (best.fits ? "" : ", over the device's memory (chosen anyway: --ignore-memory)") << ".\nBound by "
            << result.binding_constraint() << ".\n";
  if (!arguments.output_dir.empty()) {
    const ParallelPlan chosen = parallel_plan(request, cluster, best);
    std::filesystem::create_directories(arguments.output_dir);
    const std::string dir = arguments.output_dir + "/";
    write_profile_json(chosen.profile, dir + "profile.json");
    json_fields::write_text_atomically(dir + "cluster.json", cluster_to_json(chosen.cluster).dump(2) + "\n");
    write_plan(chosen.plan, dir + "plan.json");
    std::cout << "Wrote " << dir << "profile.json, cluster.json (one worker per tensor-parallel group) and plan.json:\n"
              << "  pipetwin simulate --cluster " << dir << "cluster.json --plan " << dir << "plan.json -s "
              << best.schedule << " -m " << best.microbatches * best.data_parallel << "\n";
  }
  return 0;
}

}  // namespace

Command add_search_command(CLI::App& app) {
  auto arguments = std::make_shared<SearchArguments>();
  CLI::App* command = app.add_subcommand(
      "search",
      "Find the fastest way to train a transformer on a cluster that fits in its GPUs' memory: tensor\n"
      "parallel degree t (inside a server) x pipeline stages p x data-parallel replicas d = GPUs/(t p),\n"
      "recomputation, microbatch size and schedule, for a global batch of sequences (or, with --profile, the\n"
      "stages, replicas and microbatch size of a measured model). Each configuration\n"
      "is built as `pipetwin model` and `schedule` would (memory from the validated schedule) and run on\n"
      "paper; prints the fastest, the chosen one that fits and which constraint bound the choice; -o DIR\n"
      "writes its profile, cluster and plan for `pipetwin simulate`. Example:\n"
      "  pipetwin search --preset llama2-70b --cluster platforms/dgx-h100.json --global-batch 512 -o best/");
  add_model_shape_options(command, arguments->shape);
  command->add_option("--profile,-p", arguments->profile_path,
                      "a measured profile instead of a transformer (PipeDream graph.txt or pipetwin JSON): searched "
                      "without tensor parallelism or recomputation, at its batch size halved up to 3 times")
      ->check(CLI::ExistingFile);
  command->add_option("--batch-size", arguments->graph_batch_size, "samples per minibatch of a graph.txt profile")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--cluster,-c", arguments->cluster_path, "cluster of GPUs (its device gives peak_flops, memory)")
      ->required()
      ->check(CLI::ExistingFile);
  command->add_option("--global-batch,-B", arguments->global_batch, "sequences per iteration")
      ->required()
      ->check(CLI::PositiveNumber);
  command->add_option("--tp", arguments->tensor_parallel, "tensor-parallel degrees to try (default: divisors of a server)")
      ->delimiter(',');
  command->add_option("--stages", arguments->stages, "pipeline stage counts to try (default: all that divide)")
      ->delimiter(',');
  command->add_option("--microbatch-sizes", arguments->microbatch_sizes, "microbatch sizes to try")
      ->delimiter(',')
      ->capture_default_str()
      ->each([arguments](const std::string&) { arguments->microbatch_sizes_given = true; });
  command->add_option("--recompute", arguments->recomputation, "recomputation modes to try")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "selective", "full"}));
  command->add_option("--schedules", arguments->schedules,
                      "schedules to try (looped, V and zero-bubble ones only where d = 1: they need one worker per stage)")
      ->delimiter(',')
      ->capture_default_str();
  command->add_option("--workers,-n", arguments->workers, "use only the first N GPUs of the cluster")
      ->check(CLI::PositiveNumber);
  command->add_flag("--ignore-memory", arguments->ignore_memory,
                    "choose the fastest even when it needs more than the device's memory (still reported)");
  command->add_flag("--no-sequence-parallel", arguments->no_sequence_parallel, "keep activations whole across t");
  command->add_option("--top", arguments->top, "configurations to print")->capture_default_str()->check(CLI::PositiveNumber);
  command->add_option("--output,-o", arguments->output_dir, "folder for the chosen profile, cluster and plan");
  command->add_option("--csv", arguments->csv_path,
                      "write every configuration as CSV (notebooks/partition_sweep.ipynb plots it)");
  return [arguments] { return run_search(*arguments); };
}

}  // namespace pipetwin::cli
