#include "exec/validation_matrix.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "planner/error.h"
#include "planner/json_fields.h"
#include "planner/profile_io.h"
#include "traces/trace_metrics.h"

namespace pipetwin::exec {
namespace {

std::string folder_name(const std::string& name) {
  std::string folder = name;
  for (char& c : folder) {
    if (c == ' ' || c == '/' || c == ',') c = '_';
  }
  return folder;
}

// The cluster with `workers` workers: one level's count changed (a single-level cluster only).
Cluster with_workers(const Cluster& cluster, int workers) {
  if (workers <= 0 || workers == cluster.worker_count()) return cluster;
  std::vector<ClusterLevel> levels = cluster.levels();
  if (levels.size() != 1) {
    throw Error({cluster.source_path(), 0, "levels"},
                "a matrix configuration needs " + std::to_string(workers) + " workers and the cluster has " +
                    std::to_string(cluster.worker_count()) + " on several levels",
                "validate --matrix on a one-level cluster of this machine (platforms/localhost-cpu.json)");
  }
  levels.front().count = workers;
  return Cluster(cluster.name(), cluster.description(), cluster.device(), levels, cluster.source_path());
}

std::vector<double> measured_peaks(const Trace& measured) {
  std::vector<double> peaks;
  const auto it = measured.header.extra.find("peak_memory_bytes");
  if (it != measured.header.extra.end() && it->is_array()) {
    for (const auto& value : *it) peaks.push_back(value.is_number() ? value.get<double>() : -1.0);
  }
  return peaks;
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f s", seconds);
  return text;
}

}  // namespace

std::vector<MatrixConfiguration> default_matrix(const std::string& schedule, int microbatches) {
  const std::string m = " m=" + std::to_string(microbatches);
  std::vector<MatrixConfiguration> matrix = {{schedule + m, schedule, microbatches}};
  for (const char* other : {"gpipe", "1f1b", "pipedream", "2bw", "zb-h1", "zb-h2"}) {
    if (other != schedule) matrix.push_back({other + m, other, microbatches});
  }
  for (int count : {4, 16, 32}) {
    if (count != microbatches) matrix.push_back({"1f1b m=" + std::to_string(count), "1f1b", count});
  }
  for (int count : {4, 16}) {
    if (count != microbatches) matrix.push_back({"gpipe m=" + std::to_string(count), "gpipe", count});
  }
  matrix.push_back({"1f1b" + m + " balanced 1,1", "1f1b", microbatches, 2, {1, 1}});
  matrix.push_back({"1f1b" + m + " optimizer 3 workers", "1f1b", microbatches, 3, {}});
  matrix.push_back({"1f1b" + m + " balanced 1,1,1", "1f1b", microbatches, 3, {1, 1, 1}});
  matrix.push_back({"1f1b" + m + " replicated 2,1", "1f1b", microbatches, 3, {2, 1}});
  return matrix;
}

MatrixResult validate_matrix(const ValidationRequest& base, const std::vector<MatrixConfiguration>& matrix, int runs,
                             const Predictor& predict, const StepReporter& report_step) {
  namespace fs = std::filesystem;
  if (runs < 1) throw Error({"", 0, "--runs"}, "runs must be at least 1", "pass --runs 3 (the default)");
  if (matrix.empty()) throw Error({"", 0, "matrix"}, "the matrix is empty", "give at least one configuration");
  create_output_folder(base.output_dir);
  auto file = [&](const std::string& name) { return (fs::path(base.output_dir) / name).string(); };
  const std::size_t steps = matrix.size() + 2;
  auto step = [&](std::size_t k, const std::string& text) {
    report_step("[" + std::to_string(k) + "/" + std::to_string(steps) + "] " + text);
  };

  step(1, "profiling " + base.model + " (batch " + std::to_string(base.batch) + ")");
  const Profile profile = profile_for_validation(base);
  write_profile_json(profile, file("profile.json"));
  const Cluster cluster = load_cluster(base.cluster_path);

  step(2, "calibrating on one run of " + base.schedule + " m=" + std::to_string(base.microbatches));
  create_output_folder(file("calibration"));
  const Plan base_plan = plan_for_validation(profile, cluster, base.stage_replicas, base.schedule, base.microbatches);
  write_plan(base_plan, file("calibration/plan.json"));
  const auto base_built = std::make_shared<const Schedule>(schedule_for_validation(base_plan, cluster, base).schedule);
  const Trace base_measured = run_for_validation(file("calibration/plan.json"), base, base_built);
  write_trace(base_measured, file("calibration/measured.jsonl"));
  MatrixResult result;
  result.calibration = calibrate(base_measured, base_plan, cluster);
  result.layers = calibrate_layers(base_measured, base_plan);
  const Profile calibrated = calibrated_profile(profile, result.layers);
  const Cluster network = calibrated_network(cluster, result.calibration);
  write_profile_json(calibrated, file("calibration/calibrated-profile.json"));
  json_fields::write_text_atomically(file("calibration/calibrated-cluster.json"), cluster_to_json(network).dump(2) + "\n");
  json_fields::write_text_atomically(file("calibration/layer-calibration.json"),
                                     layer_calibration_to_json(result.layers).dump(2) + "\n");

  for (std::size_t k = 0; k < matrix.size(); ++k) {
    const MatrixConfiguration& configuration = matrix[k];
    ValidationRequest request = base;
    request.schedule = configuration.schedule;
    request.microbatches = configuration.microbatches;
    request.stage_replicas = configuration.stage_replicas;
    const Cluster machine = with_workers(network, configuration.workers);
    const std::string folder = file(folder_name(configuration.name));
    create_output_folder(folder);
    const Plan plan = with_optimizer_steps(
        plan_for_validation(calibrated, machine, request.stage_replicas, request.schedule, request.microbatches),
        result.layers);
    const std::string plan_path = (fs::path(folder) / "plan.json").string();
    write_plan(plan, plan_path);
    const BuiltSchedule built = schedule_for_validation(plan, machine, request);
    const auto schedule = std::make_shared<const Schedule>(built.schedule);

    ConfigurationAccuracy row;
    row.name = configuration.name;
    bool same_cut = plan.stages.size() == base_plan.stages.size() && base_measured.header.workers == built.schedule.shape.workers;
    for (std::size_t s = 0; same_cut && s < plan.stages.size(); ++s) {
      same_cut = plan.stages[s].layer_ids == base_plan.stages[s].layer_ids && plan.stages[s].replicas == base_plan.stages[s].replicas;
    }
    row.in_sample = same_cut && configuration.schedule == base.schedule && configuration.microbatches == base.microbatches;
    const Trace predicted = predict(plan, machine, request);
    write_trace(predicted, (fs::path(folder) / "predicted.jsonl").string());
    row.predicted_s = trace_metrics(predicted).median_iteration_s;
    for (const WorkerMemory& memory : built.report.memory) row.predicted_peak_bytes.push_back(memory.total_bytes());
    std::vector<std::vector<double>> peaks;  // per run, per worker
    for (int r = 0; r < runs; ++r) {
      step(k + 3, configuration.name + ": predicted " + seconds_text(row.predicted_s) + ", run " + std::to_string(r + 1) +
                      "/" + std::to_string(runs));
      const Trace measured = run_for_validation(plan_path, request, schedule);
      write_trace(measured, (fs::path(folder) / ("measured-" + std::to_string(r + 1) + ".jsonl")).string());
      row.measured_s.push_back(trace_metrics(measured).median_iteration_s);
      peaks.push_back(measured_peaks(measured));
    }
    for (std::size_t w = 0; w < row.predicted_peak_bytes.size(); ++w) {
      std::vector<double> worker;
      for (const auto& run : peaks) {
        if (w < run.size() && run[w] >= 0) worker.push_back(run[w]);
      }
      row.measured_peak_bytes.push_back(worker.empty() ? -1.0 : median_of(worker));
    }
    result.configurations.push_back(row);
  }
  result.summary = summarize_accuracy(result.configurations);
  nlohmann::json rows = nlohmann::json::array();
  for (const ConfigurationAccuracy& c : result.configurations) {
    rows.push_back({{"configuration", c.name},
                    {"in_sample", c.in_sample},
                    {"predicted_s", c.predicted_s},
                    {"measured_s", c.measured_s},
                    {"measured_median_s", c.measured_median_s},
                    {"error", c.error},
                    {"outside_spread", c.outside_spread},
                    {"predicted_peak_bytes", c.predicted_peak_bytes},
                    {"measured_peak_bytes", c.measured_peak_bytes}});
  }
  const AccuracySummary& s = result.summary;
  const nlohmann::json summary = {{"model", base.model},
                                  {"base", base.schedule + " m=" + std::to_string(base.microbatches)},
                                  {"runs", runs},
                                  {"configurations", s.configurations},
                                  {"median_abs_error", s.median_abs_error},
                                  {"max_abs_error", s.max_abs_error},
                                  {"kendall_tau", s.kendall_tau},
                                  {"outside_spread", s.outside_spread},
                                  {"rows", rows}};
  json_fields::write_text_atomically(file("matrix.json"), summary.dump(2) + "\n");
  json_fields::write_text_atomically(file("matrix.csv"), accuracy_csv(result.configurations));
  return result;
}

}  // namespace pipetwin::exec
