// `pipetwin validate` (in pipetwin-exec): profile -> plan -> simulate -> run -> compare, calibrate,
// simulate again, compare again, everything in one folder (exec/validation.h); SimGrid predicts.
#include <cstdio>
#include <iostream>

#include "cli/command_descriptions.h"
#include "cli/commands.h"
#include "cli/executable_folder.h"
#include "exec/model_zoo.h"
#include "exec/tensor_parallel.h"
#include "exec/validation.h"
#include "exec/validation_matrix.h"
#include "planner/schedule_generators.h"
#include "planner/error.h"
#include "traces/calibration_report.h"
#ifdef PIPETWIN_WITH_SIMGRID
#include "sim/simulation.h"
#endif

namespace pipetwin::cli {
namespace {

Trace simulated([[maybe_unused]] const Plan& plan, [[maybe_unused]] const Cluster& cluster, const exec::ValidationRequest& request) {
#ifdef PIPETWIN_WITH_SIMGRID
  sim::SimulationConfig config{plan, cluster};
  config.schedule_name = request.schedule;
  config.microbatches = request.microbatches;
  config.iterations = request.iterations;
  config.warmup_iterations = request.warmup;
  config.profile_name = request.model;
  return sim::simulate_in_subprocess(config).trace;
#else
  throw Error({"", 0, "validate"}, "this pipetwin-exec was built without SimGrid (-DPIPETWIN_WITH_SIMGRID=OFF) and cannot predict " +
                                       request.schedule + " m=" + std::to_string(request.microbatches),
              "measure here with `validate --matrix --measure-only -o DIR`, then predict with `validate --matrix "
              "--reuse-runs -o DIR` where SimGrid is");
#endif
}

int run_validate(const exec::ValidationRequest& request) {
  const exec::ValidationResult result =
      exec::validate_on_this_machine(request, simulated, [](const std::string& step) { std::cout << step << "\n" << std::flush; });
  std::cout << "\nBefore calibration: " << comparison_text(result.before)
            << "\nCalibration: " << calibration_text(result.calibration) << "\nAfter calibration: " << comparison_text(result.after);
  char line[128];
  std::snprintf(line, sizeof line, "\niteration time error: %+.1f%%\n", 100 * result.after.iteration_error);
  std::cout << line << "Everything is in " << request.output_dir << "\n";
  return 0;
}

int run_validate_matrix(const exec::ValidationRequest& request, const exec::MatrixOptions& options) {
  auto matrix = exec::default_matrix(request.schedule, request.microbatches);
  matrix.front().stage_replicas = request.stage_replicas;
  const exec::MatrixResult result = exec::validate_matrix(
      request, matrix, options, simulated, [](const std::string& step) { std::cout << step << "\n" << std::flush; });
  if (result.measured_only) {
    std::cout << "\nMeasured " << matrix.size() << " configurations on " << request.device << "; predict them with\n  pipetwin validate --matrix --reuse-runs --model "
              << request.model << " --schedule " << request.schedule << " -m " << request.microbatches << " -o " << request.output_dir
              << "\n(where SimGrid is: the same folder, the same options)\n";
    return 0;
  }
  std::cout << "\nconfiguration                       predicted   measured median (min-max)    error  CPU/work\n";
  char line[256], cpu_per_work[16];
  for (const ConfigurationAccuracy& c : result.configurations) {
    if (c.median_cpu_per_work > 0.0) {
      std::snprintf(cpu_per_work, sizeof cpu_per_work, "%8.2f", c.median_cpu_per_work);
    } else {
      std::snprintf(cpu_per_work, sizeof cpu_per_work, "%8s", "-");
    }
    std::snprintf(line, sizeof line, "%-34s %8.3f s  %8.3f s (%.3f-%.3f)  %+6.1f%%%s%s%s\n", c.name.c_str(), c.predicted_s,
                  c.measured_median_s, c.measured_min_s, c.measured_max_s, 100 * c.error, cpu_per_work,
                  c.outside_spread ? "  outside spread" : "", c.in_sample ? "  (in sample)" : "");
    std::cout << line;
  }
  std::cout << "\n" << accuracy_text(result.summary) << "\nEverything is in " << request.output_dir
            << " (matrix.csv, matrix.json)\n";
  return 0;
}

}  // namespace

Command add_validate_command(CLI::App& app) {
  auto a = std::make_shared<exec::ValidationRequest>();
  CLI::App* command = app.add_subcommand("validate", kValidateDescription);
  command->add_option("--model", a->model, "mlp | vgg16 | resnet | gpt")
      ->capture_default_str()
      ->check(CLI::IsMember(exec::model_names()));
  command->add_option("--cluster,-c", a->cluster_path, "cluster spec of this machine")->capture_default_str()->check(CLI::ExistingFile);
  command->add_option("--stage-replicas", a->stage_replicas,
                      "replicas per stage of a balanced plan, e.g. 2,1 (default: the optimizer's straight plan)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  command->add_option("--schedule,-s", a->schedule, "schedule")->capture_default_str()->check(CLI::IsMember(schedule_names()));
  command->add_option("--microbatches,-m", a->microbatches, "microbatches per iteration")->capture_default_str()->check(CLI::PositiveNumber);
  command->add_option("--iterations", a->iterations, "iterations to simulate and run")->capture_default_str()->check(CLI::PositiveNumber);
  command->add_option("--warmup", a->warmup, "warm-up iterations left out")->capture_default_str()->check(CLI::NonNegativeNumber);
  command->add_option("--batch", a->batch, "samples per microbatch (profile and run)")->capture_default_str()->check(CLI::PositiveNumber);
  command->add_option("--timeout", a->timeout_s, "seconds a worker waits for a peer")->capture_default_str()->check(CLI::PositiveNumber);
  command->add_option("--device", a->device, "where the profile, runs and probe compute: cpu (Gloo) or cuda (workers on GPU r mod GPUs; NCCL when each has its own, else Gloo through host memory)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  command->add_option("--tp", a->tensor_parallel,
                      "tensor-parallel degree (gpt only): profile and run every plan worker as this many processes "
                      "(as profile --tp and run --tp); not with --matrix")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--output,-o", a->output_dir, "folder for the profile, plan, traces and reports")->required();
  auto matrix = std::make_shared<bool>(false);
  auto options = std::make_shared<exec::MatrixOptions>();
  command->add_flag("--matrix", *matrix,
                    "out of sample: calibrate on one run of --schedule/--microbatches, then predict and run the six "
                    "schedules, 4-32 microbatches, balanced and 3-worker partitions, a replicated stage (matrix.csv)");
  command->add_option("--runs", options->runs, "runs of each matrix configuration but the base (median and min-max)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  auto matrix_only = std::make_shared<std::vector<CLI::Option*>>();  // refused without --matrix
  matrix_only->push_back(
      command->add_option("--base-runs", options->base_runs,
                          "matrix: runs of the base, spread through the rounds; each calibrates the machine once and a "
                          "configuration's prediction is the median over those calibrations "
                          "(default: twice --runs plus one, an odd count; with --reuse-runs, the base runs the folder holds)")
          ->check(CLI::PositiveNumber));
  command->add_flag("!--no-shared-compute", options->shared_compute,
                    "matrix: per-layer mean slow-downs instead of fitting how co-located workers share the machine");
  command->add_flag("!--no-probe", options->probe,
                    "matrix: skip the probes of 1..N processes and of messages (capacity the same for every count of "
                    "computing workers, the link's bandwidth fitted from the base's runs or the cluster's)");
  auto busy_wake_ms = std::make_shared<double>(options->busy_wake_s * 1e3);
  matrix_only->push_back(
      command->add_option("--busy-wake-ms", *busy_wake_ms,
                          "matrix: CPU a worker's wake-up costs the machine when its message arrives while every core is "
                          "held by another worker's compute (more workers than cores; 2 fitted on the 2-core machine of "
                          "bench/README.md, 0 for none)")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber));
  exec::SlowSpellOptions& spells = options->slow_spells;
  matrix_only->push_back(
      command->add_option("--spell-tolerance", spells.tolerance,
                          "matrix: a core whose kernel runs this much slower than the fastest seen is in a slow spell of "
                          "the machine; runs wait it out and a run ending in one is taken again (0: no watch)")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber));
  matrix_only->push_back(command->add_option("--spell-wait-s", spells.max_wait_s,
                                             "matrix: longest wait before a run for a slow spell to pass")
                             ->capture_default_str()
                             ->check(CLI::NonNegativeNumber));
  matrix_only->push_back(command->add_option("--spell-retakes", spells.retakes,
                                             "matrix: more takes of a run that ended in a slow spell, or that computed "
                                             "costlier than the base (--costlier-tolerance); the last is kept")
                             ->capture_default_str()
                             ->check(CLI::NonNegativeNumber));
  matrix_only->push_back(
      command->add_option("--costlier-tolerance", options->costlier_compute_tolerance,
                          "matrix, on CPU: a run whose compute cost this much more CPU per unit of work than the machine's "
                          "usual state (the lower quartile of the base's runs) ran in a slower state, and is set aside "
                          "and taken again, the base's first (0: never)")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber));
  matrix_only->push_back(command->add_flag(
      "--reuse-runs", options->reuse_runs,
      "matrix: take the profile, cuts, probe and measured runs already in --output (re-predict without running again)"));
  matrix_only->push_back(command->add_flag(
      "--measure-only", options->measure_only,
      "matrix: profile, run and probe, then stop (a GPU machine without SimGrid); predict later with --reuse-runs"));
  return [a, matrix, options, busy_wake_ms, matrix_only] {
    options->busy_wake_s = *busy_wake_ms * 1e-3;
    for (const CLI::Option* option : *matrix_only) {
      if (!*matrix && option->count() > 0) {
        throw Error({"", 0, option->get_name()}, "this option belongs to the matrix", "add --matrix");
      }
    }
    if (*matrix && a->tensor_parallel > 1) {
      throw Error({"", 0, "--tp"}, "the matrix runs its own configurations without tensor parallelism",
                  "drop --tp, or validate one tensor-parallel configuration without --matrix");
    }
    exec::check_tensor_parallel(a->model, a->tensor_parallel);
    a->cluster_path = exec::resolve_cluster_path(a->cluster_path, executable_folder());
    return *matrix ? run_validate_matrix(*a, *options) : run_validate(*a);
  };
}

}  // namespace pipetwin::cli
