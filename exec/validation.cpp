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

void create_output_folder(const std::string& folder) {
  std::error_code code;
  std::filesystem::create_directories(folder, code);
  if (code) {
    throw Error({folder, 0, "--output"}, "cannot create the folder: " + code.message(), "choose a folder you can write to");
  }
}

std::string resolve_cluster_path(const std::string& path, const std::string& executable_dir) {
  namespace fs = std::filesystem;
  if (fs::exists(path)) return path;
  if (fs::path(path).is_relative() && !executable_dir.empty()) {
    const fs::path beside_build = fs::path(executable_dir).parent_path() / path;
    if (fs::exists(beside_build)) return beside_build.string();
  }
  std::error_code code;
  const fs::path here = fs::current_path(code);
  throw Error({path, 0, "--cluster"},
              "no cluster spec of this machine at " + path + (code ? "" : " (from " + here.string() + ")"),
              "pass --cluster FILE (a one-level cluster of this machine, as the repository's platforms/localhost-cpu.json), "
              "or run from the repository's root");
}

Profile profile_for_validation(const ValidationRequest& request) {
  ProfilerOptions profiler;
  profiler.model = request.model;
  profiler.batch = request.batch;
  profiler.device = request.device;
  profiler.tensor_parallel = request.tensor_parallel;
  if (request.device == "cpu") return profile_model(profiler);
  return profile_model_in_child(profiler, (std::filesystem::path(request.output_dir) / "profile.json.part").string());
}

Plan plan_for_validation(const Profile& profile, const Cluster& cluster, const std::vector<int>& stage_replicas,
                         const std::string& schedule, int microbatches) {
  if (!stage_replicas.empty()) return balanced_plan(profile, cluster, stage_replicas, schedule, microbatches);
  OptimizerOptions options;
  options.straight = true;
  return make_plan(profile, cluster, options, optimize_partition(profile, cluster, options), schedule, microbatches);
}

BuiltSchedule schedule_for_validation(const Plan& plan, const Cluster& cluster, const ValidationRequest& request) {
  ScheduleRequest schedule;
  schedule.name = request.schedule;
  schedule.microbatches = request.microbatches;
  schedule.iterations = request.iterations;
  schedule.memory_limit_bytes = cluster.device().memory_bytes;
  schedule.runtime_memory_bytes = cluster.device().runtime_memory_bytes;
  schedule.memory_limit_source = request.cluster_path;
  return build_schedule(plan, schedule);
}

Trace run_for_validation(const std::string& plan_path, const ValidationRequest& request,
                         const std::shared_ptr<const Schedule>& built) {
  LaunchOptions launch;
  launch.worker.plan_path = plan_path;
  launch.worker.model = request.model;
  launch.worker.schedule.name = request.schedule;
  launch.worker.schedule.microbatches = request.microbatches;
  launch.worker.schedule.iterations = request.iterations;
  launch.worker.warmup_iterations = request.warmup;
  launch.worker.timeout = std::chrono::milliseconds(static_cast<long long>(request.timeout_s * 1000));
  launch.worker.built = built;  // the schedule the prediction ran
  launch.worker.device = request.device;
  launch.worker.tensor_parallel = request.tensor_parallel;
  launch.workers = built->shape.workers;
  return launch_local(launch);
}

ValidationResult validate_on_this_machine(const ValidationRequest& request, const Predictor& predict,
                                          const StepReporter& report_step) {
  namespace fs = std::filesystem;
  create_output_folder(request.output_dir);
  auto file = [&](const std::string& name) { return (fs::path(request.output_dir) / name).string(); };
  report_step("[1/6] profiling " + request.model + " (batch " + std::to_string(request.batch) + ")");
  const Profile profile = profile_for_validation(request);
  write_profile_json(profile, file("profile.json"));
  const Cluster cluster = load_cluster(request.cluster_path);
  report_step("[2/6] planning");
  const Plan plan = plan_for_validation(profile, cluster, request.stage_replicas, request.schedule, request.microbatches);
  write_plan(plan, file("plan.json"));
  const auto built = std::make_shared<const Schedule>(schedule_for_validation(plan, cluster, request).schedule);

  ValidationResult result;
  report_step("[3/6] simulating");
  const Trace predicted = predict(plan, cluster, request);
  write_trace(predicted, file("predicted.jsonl"));
  report_step("[4/6] running " + std::to_string(built->shape.workers) + " workers");
  const Trace measured = run_for_validation(file("plan.json"), request, built);
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
