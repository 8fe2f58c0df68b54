// `pipetwin compare` (predicted vs measured trace), `pipetwin calibrate` (fit a cluster spec to a
// measured trace) and `pipetwin validate` (profile -> plan -> simulate -> run -> compare, calibrate,
// simulate again, compare again; everything in one folder).
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "exec/launcher.h"
#include "exec/model_zoo.h"
#include "exec/profiler.h"
#include "planner/balanced_plan.h"
#include "planner/error.h"
#include "planner/json_fields.h"
#include "planner/partition_optimizer.h"
#include "planner/profile_io.h"
#include "planner/schedule_generators.h"
#include "sim/simulation.h"
#include "traces/calibration.h"
#include "traces/trace_compare.h"

namespace pipetwin::cli {
namespace {

void write_json(const std::string& path, const nlohmann::json& json) {
  json_fields::write_text_atomically(path, json.dump(2) + "\n");
}

nlohmann::json calibration_json(const Calibration& c) {
  return {{"compute_scale", c.compute_scale},
          {"worker_compute_scale", c.worker_compute_scale},
          {"stage_forward_fraction", c.stage_forward_fraction},
          {"stage_optimizer_s", c.stage_optimizer_s},
          {"message_overhead_s", c.message_overhead_s},
          {"bandwidth_bytes_per_s", c.bandwidth_bytes_per_s},
          {"action_overhead_s", c.action_overhead_s},
          {"send_overhead_s", c.send_overhead_s},
          {"send_samples", c.send_samples},
          {"recv_overhead_s", c.recv_overhead_s},
          {"recv_samples", c.recv_samples},
          {"compute_samples", c.compute_samples},
          {"transfer_samples", c.transfer_samples},
          {"compute_rms_relative_error", c.compute_rms_relative_error},
          {"transfer_rms_error_s", c.transfer_rms_error_s}};
}

std::string calibration_text(const Calibration& c) {
  char text[512];
  std::snprintf(text, sizeof text,
                "compute scale %.4f (device speed %.4f; %d operations, rms error %.1f%%), %.6f s between actions\n"
                "%.6f s to post a send (%d sends), %.6f s to take an arrived message (%d receives)\n"
                "per-message overhead %.6f s, bandwidth %s (%d transfers, rms error %.6f s)\n",
                c.compute_scale, 1.0 / c.compute_scale, c.compute_samples, 100 * c.compute_rms_relative_error,
                c.action_overhead_s, c.send_overhead_s, c.send_samples, c.recv_overhead_s, c.recv_samples,
                c.message_overhead_s,
                c.bandwidth_bytes_per_s > 0 ? (std::to_string(c.bandwidth_bytes_per_s / 1e9) + " GB/s").c_str() : "kept",
                c.transfer_samples, c.transfer_rms_error_s);
  std::string out = text;
  out += "compute scale per worker:";
  for (double k : c.worker_compute_scale) {
    std::snprintf(text, sizeof text, " %.4f", k);
    out += text;
  }
  return out + "\n";
}

struct ValidateArguments {
  std::string model = "mlp";
  std::string cluster_path = "platforms/localhost-cpu.json";
  std::vector<int> stage_replicas;
  std::string schedule = "1f1b";
  int microbatches = 8;
  int iterations = 6;
  int warmup = 1;
  int batch = 32;
  double timeout_s = 60.0;
  std::string output_dir;
};

int run_validate(const ValidateArguments& a) {
  namespace fs = std::filesystem;
  fs::create_directories(a.output_dir);
  auto file = [&](const std::string& name) { return (fs::path(a.output_dir) / name).string(); };
  std::cout << "[1/6] profiling " << a.model << " (batch " << a.batch << ")\n";
  exec::ProfilerOptions profiler;
  profiler.model = a.model;
  profiler.batch = a.batch;
  const Profile profile = exec::profile_model(profiler);
  write_profile_json(profile, file("profile.json"));
  const Cluster cluster = load_cluster(a.cluster_path);
  std::cout << "[2/6] planning\n";
  Plan plan;
  if (!a.stage_replicas.empty()) {
    plan = balanced_plan(profile, cluster, a.stage_replicas, a.schedule, a.microbatches);
  } else {
    OptimizerOptions options;
    options.straight = true;
    plan = make_plan(profile, cluster, options, optimize_partition(profile, cluster, options), a.schedule, a.microbatches);
  }
  write_plan(plan, file("plan.json"));
  sim::SimulationConfig config{plan, cluster};
  config.schedule_name = a.schedule;
  config.microbatches = a.microbatches;
  config.iterations = a.iterations;
  config.warmup_iterations = a.warmup;
  config.profile_name = a.model;
  std::cout << "[3/6] simulating\n";
  const sim::SimulationResult predicted = sim::simulate_in_subprocess(config);
  write_trace(predicted.trace, file("predicted.jsonl"));
  std::cout << "[4/6] running " << plan.workers << " workers\n";
  exec::LaunchOptions launch;
  launch.worker.plan_path = file("plan.json");
  launch.worker.model = a.model;
  launch.worker.schedule = a.schedule;
  launch.worker.microbatches = a.microbatches;
  launch.worker.iterations = a.iterations;
  launch.worker.timeout = std::chrono::milliseconds(static_cast<long long>(a.timeout_s * 1000));
  launch.worker.warmup_iterations = a.warmup;
  launch.worker.built = std::make_shared<const Schedule>(sim::prepare_schedule(config).schedule);  // the simulated one
  launch.workers = plan.workers;
  const Trace measured = exec::launch_local(launch);
  write_trace(measured, file("measured.jsonl"));
  std::cout << "[5/6] comparing\n";
  const Comparison before = compare_traces(predicted.trace, measured);
  write_json(file("report.json"), comparison_to_json(before));
  std::cout << "[6/6] calibrating and simulating again\n";
  const Calibration calibration = calibrate(measured, plan, cluster);
  const Cluster calibrated = calibrated_cluster(cluster, calibration);
  write_json(file("calibrated-cluster.json"), cluster_to_json(calibrated));
  config.plan = calibrated_plan(plan, calibration);
  write_plan(config.plan, file("calibrated-plan.json"));
  config.cluster = calibrated;
  const sim::SimulationResult recalibrated = sim::simulate_in_subprocess(config);
  write_trace(recalibrated.trace, file("predicted-calibrated.jsonl"));
  const Comparison after = compare_traces(recalibrated.trace, measured);
  nlohmann::json report = comparison_to_json(after);
  report["calibration"] = calibration_json(calibration);
  report["before_calibration"] = comparison_to_json(before);
  write_json(file("report-calibrated.json"), report);
  std::cout << "\nBefore calibration: " << comparison_text(before) << "\nCalibration: " << calibration_text(calibration)
            << "\nAfter calibration: " << comparison_text(after);
  char line[128];
  std::snprintf(line, sizeof line, "\niteration time error: %+.1f%%\n", 100 * after.iteration_error);
  std::cout << line << "Everything is in " << a.output_dir << "\n";
  return 0;
}

}  // namespace

Command add_compare_command(CLI::App& app) {
  auto predicted = std::make_shared<std::string>(), measured = std::make_shared<std::string>();
  auto json = std::make_shared<std::string>();
  CLI::App* command = app.add_subcommand(
      "compare", "Line up a predicted and a measured trace action by action: iteration time error, per-kind duration\n"
                 "errors, start-time drift along the pipeline, the worst operations and a verdict.");
  command->add_option("predicted", *predicted, "trace from pipetwin simulate -o")->required()->check(CLI::ExistingFile);
  command->add_option("measured", *measured, "trace from pipetwin run -o")->required()->check(CLI::ExistingFile);
  command->add_option("--json", *json, "also write the report as JSON");
  return [predicted, measured, json] {
    const Comparison comparison = compare_traces(load_trace(*predicted), load_trace(*measured));
    std::cout << comparison_text(comparison);
    if (!json->empty()) write_json(*json, comparison_to_json(comparison));
    return 0;
  };
}

Command add_calibrate_command(CLI::App& app) {
  auto trace = std::make_shared<std::string>(), plan = std::make_shared<std::string>();
  auto cluster = std::make_shared<std::string>(), output = std::make_shared<std::string>();
  auto plan_output = std::make_shared<std::string>();
  CLI::App* command = app.add_subcommand(
      "calibrate", "Fit a cluster spec to a measured trace (least squares on the trace's own events): compute scale\n"
                   "(overall and per worker), time between actions, to post a send and to take an arrived message,\n"
                   "per-message overhead, link bandwidth; write the calibrated cluster file, and with --plan-output\n"
                   "the plan with each stage's forward/backward split as measured.");
  command->add_option("--trace", *trace, "measured trace (pipetwin run -o)")->required()->check(CLI::ExistingFile);
  command->add_option("--plan", *plan, "the plan that run used")->required()->check(CLI::ExistingFile);
  command->add_option("--cluster,-c", *cluster, "the cluster spec to calibrate")->required()->check(CLI::ExistingFile);
  command->add_option("--output,-o", *output, "calibrated cluster spec to write")->required();
  command->add_option("--plan-output", *plan_output, "also write the plan with the measured forward/backward split");
  return [trace, plan, cluster, output, plan_output] {
    const Cluster base = load_cluster(*cluster);
    const Plan measured_plan = load_plan(*plan);
    const Calibration calibration = calibrate(load_trace(*trace), measured_plan, base);
    write_json(*output, cluster_to_json(calibrated_cluster(base, calibration)));
    std::cout << calibration_text(calibration) << "Calibrated cluster written to " << *output << "\n";
    if (!plan_output->empty()) {
      write_plan(calibrated_plan(measured_plan, calibration), *plan_output);
      std::cout << "Calibrated plan written to " << *plan_output << "\n";
    }
    return 0;
  };
}

Command add_validate_command(CLI::App& app) {
  auto a = std::make_shared<ValidateArguments>();
  CLI::App* command = app.add_subcommand(
      "validate", "Profile -> plan -> simulate -> run -> compare in one command on this machine, then calibrate the\n"
                  "cluster spec on the measured trace, simulate again and compare again. Prints\n"
                  "`iteration time error: N%` (after calibration) and writes everything to -o DIR.");
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
  command->add_option("--output,-o", a->output_dir, "folder for the profile, plan, traces and reports")->required();
  return [a] { return run_validate(*a); };
}

}  // namespace pipetwin::cli
