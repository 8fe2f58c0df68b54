#include "exec/validation.h"

#include <filesystem>
#include <memory>

#include "exec/launcher.h"
#include "exec/profiler.h"
#include "planner/balanced_plan.h"
#include "planner/error.h"
#include "planner/json_fields.h"
#include "planner/partition_optimizer.h"
#include "planner/profile_io.h"
#include "planner/schedule_builder.h"
#include "traces/calibration_report.h"

namespace pipetwin::exec {
namespace {

void write_json(const std::string& path, const nlohmann::json& json) {
  json_fields::write_text_atomically(path, json.dump(2) + "\n");
}

}  // namespace

ValidationResult validate_on_this_machine(const ValidationRequest& request, const Predictor& predict,
                                          const StepReporter& report_step) {
  namespace fs = std::filesystem;
  std::error_code code;
  fs::create_directories(request.output_dir, code);
  if (code) {
    throw Error({request.output_dir, 0, "--output"}, "cannot create the folder: " + code.message(),
                "choose a folder you can write to");
  }
  auto file = [&](const std::string& name) { return (fs::path(request.output_dir) / name).string(); };
  report_step("[1/6] profiling " + request.model + " (batch " + std::to_string(request.batch) + ")");
  ProfilerOptions profiler;
  profiler.model = request.model;
  profiler.batch = request.batch;
  const Profile profile = profile_model(profiler);
  write_profile_json(profile, file("profile.json"));
  const Cluster cluster = load_cluster(request.cluster_path);
  report_step("[2/6] planning");
  Plan plan;
  if (!request.stage_replicas.empty()) {
    plan = balanced_plan(profile, cluster, request.stage_replicas, request.schedule, request.microbatches);
  } else {
    OptimizerOptions options;
    options.straight = true;
    plan = make_plan(profile, cluster, options, optimize_partition(profile, cluster, options), request.schedule,
                     request.microbatches);
  }
  write_plan(plan, file("plan.json"));
  ScheduleRequest schedule;
  schedule.name = request.schedule;
  schedule.microbatches = request.microbatches;
  schedule.iterations = request.iterations;
  schedule.memory_limit_bytes = cluster.device().memory_bytes;
  schedule.memory_limit_source = request.cluster_path;
  const auto built = std::make_shared<const Schedule>(build_schedule(plan, schedule).schedule);

  ValidationResult result;
  report_step("[3/6] simulating");
  const Trace predicted = predict(plan, cluster, request);
  write_trace(predicted, file("predicted.jsonl"));
  report_step("[4/6] running " + std::to_string(built->shape.workers) + " workers");
  LaunchOptions launch;
  launch.worker.plan_path = file("plan.json");
  launch.worker.model = request.model;
  launch.worker.schedule = schedule;
  launch.worker.warmup_iterations = request.warmup;
  launch.worker.timeout = std::chrono::milliseconds(static_cast<long long>(request.timeout_s * 1000));
  launch.worker.built = built;  // the schedule the prediction ran
  launch.workers = built->shape.workers;
  const Trace measured = launch_local(launch);
  write_trace(measured, file("measured.jsonl"));
  report_step("[5/6] comparing");
  result.before = compare_traces(predicted, measured);
  write_json(file("report.json"), comparison_to_json(result.before));
  report_step("[6/6] calibrating and simulating again");
  result.calibration = calibrate(measured, plan, cluster);
  const Cluster calibrated = calibrated_cluster(cluster, result.calibration);
  write_json(file("calibrated-cluster.json"), cluster_to_json(calibrated));
  const Plan recalibrated_plan = calibrated_plan(plan, result.calibration);
  write_plan(recalibrated_plan, file("calibrated-plan.json"));
  const Trace recalibrated = predict(recalibrated_plan, calibrated, request);
  write_trace(recalibrated, file("predicted-calibrated.jsonl"));
  result.after = compare_traces(recalibrated, measured);
  nlohmann::json report = comparison_to_json(result.after);
  report["calibration"] = calibration_to_json(result.calibration);
  report["before_calibration"] = comparison_to_json(result.before);
  write_json(file("report-calibrated.json"), report);
  return result;
}

}  // namespace pipetwin::exec
