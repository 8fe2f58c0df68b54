#include "sim/sweep.h"

#include <cstdio>
#include <deque>
#include <nlohmann/json.hpp>

#include "planner/balanced_plan.h"
#include "planner/error.h"
#include "sim/simulation.h"
#include "sim/subprocess.h"

namespace pipetwin::sim {
namespace {

struct Job {
  SweepRow row;
  SimulationConfig config;
};

Cluster scaled(const Cluster& cluster, double scale) {
  std::vector<ClusterLevel> levels = cluster.levels();
  for (ClusterLevel& level : levels) level.bandwidth_bytes_per_s *= scale;
  return Cluster(cluster.name(), cluster.description(), cluster.device(), levels, cluster.source_path());
}

std::string replicas_of(const Plan& plan) {
  std::string text;
  for (const PlanStage& stage : plan.stages) text += (text.empty() ? "" : "-") + std::to_string(stage.replicas);
  return text;
}

std::vector<Job> make_jobs(const Profile& profile, const Cluster& cluster, const SweepSpace& space) {
  std::vector<std::pair<std::string, Plan>> plans{{"dp", space.optimizer_plan}};
  for (int stages : space.stage_counts) {
    plans.emplace_back("balanced", balanced_plan(profile, cluster, stages, "1f1b", 8));
  }
  std::vector<Job> jobs;
  for (const auto& [kind, plan] : plans) {
    for (const std::string& schedule : space.schedules) {
      for (int microbatches : space.microbatches) {
        for (double scale : space.bandwidth_scales) {
          Job job{SweepRow{}, SimulationConfig{plan, scaled(cluster, scale)}};
          job.row = {static_cast<int>(jobs.size()), kind, static_cast<int>(plan.stages.size()), replicas_of(plan),
                     schedule, microbatches, scale};
          job.config.schedule_name = schedule;
          job.config.microbatches = microbatches;
          job.config.iterations = space.iterations;
          job.config.warmup_iterations = space.warmup_iterations;
          job.config.profile_name = profile.name();
          jobs.push_back(std::move(job));
        }
      }
    }
  }
  return jobs;
}

std::string run_one(const SimulationConfig& config) {
  const SimulationResult result = simulate(config);
  double peak = 0.0;
  for (double bytes : result.summary.peak_memory_bytes) peak = std::max(peak, bytes);
  return nlohmann::json{{"iteration_s", result.summary.iteration_s},
                        {"samples_per_s", result.summary.samples_per_s},
                        {"peak_memory_bytes", peak}}
      .dump();
}

void fill(SweepRow& row, const std::string& text, double device_memory_bytes) {
  const nlohmann::json json = nlohmann::json::parse(text);
  if (json.contains("error")) {
    row.note = json.at("error").get<std::string>();
    return;
  }
  row.iteration_s = json.at("iteration_s");
  row.samples_per_s = json.at("samples_per_s");
  row.peak_memory_bytes = json.at("peak_memory_bytes");
  row.feasible = device_memory_bytes <= 0.0 || row.peak_memory_bytes <= device_memory_bytes;
  if (!row.feasible) {
    char note[128];
    std::snprintf(note, sizeof note, "needs %.3f GB per worker, the device has %.3f GB", row.peak_memory_bytes / 1e9,
                  device_memory_bytes / 1e9);
    row.note = note;
  }
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c == '\n' ? ' ' : c);
  return quoted + "\"";
}

}  // namespace

std::vector<SweepRow> run_sweep(const Profile& profile, const Cluster& cluster, const SweepSpace& space, int jobs,
                                const SweepProgress& progress) {
  if (jobs < 1) throw Error({"", 0, "--jobs"}, "jobs must be >= 1", "e.g. --jobs 2");
  std::vector<Job> work = make_jobs(profile, cluster, space);
  std::vector<SweepRow> rows;
  std::deque<std::pair<std::size_t, Child>> running;
  std::size_t next = 0;
  auto finish_front = [&] {
    auto [index, child] = running.front();
    running.pop_front();
    SweepRow& row = work[index].row;
    try {
      fill(row, finish_child(child), cluster.device().memory_bytes);
    } catch (const Error& error) {
      row.note = error.problem();
    }
    rows.push_back(row);
    if (progress) progress(static_cast<int>(rows.size()), static_cast<int>(work.size()), row);
  };
  while (next < work.size() || !running.empty()) {
    if (next < work.size() && static_cast<int>(running.size()) < jobs) {
      const std::size_t index = next++;
      try {
        prepare_schedule(work[index].config);  // a configuration the schedule cannot run is a row, not a crash
      } catch (const Error& error) {
        work[index].row.note = error.problem();
        rows.push_back(work[index].row);
        if (progress) progress(static_cast<int>(rows.size()), static_cast<int>(work.size()), work[index].row);
        continue;
      }
      const SimulationConfig* config = &work[index].config;
      running.emplace_back(index, start_child([config] { return run_one(*config); }));
      continue;
    }
    finish_front();
  }
  std::sort(rows.begin(), rows.end(), [](const SweepRow& a, const SweepRow& b) { return a.id < b.id; });
  return rows;
}

std::string sweep_csv(const std::vector<SweepRow>& rows) {
  std::string out =
      "id,plan,stages,replicas,schedule,microbatches,bandwidth_scale,predicted_iteration_s,samples_per_s,"
      "peak_memory_bytes,feasible,note\n";
  for (const SweepRow& row : rows) {
    char numbers[160];
    std::snprintf(numbers, sizeof numbers, "%.17g,%.9g,%.9g,%.17g", row.bandwidth_scale, row.iteration_s,
                  row.samples_per_s, row.peak_memory_bytes);
    out += std::to_string(row.id) + "," + row.plan + "," + std::to_string(row.stages) + "," + row.replicas + "," +
           row.schedule + "," + std::to_string(row.microbatches) + "," + numbers + "," +
           (row.feasible ? "true" : "false") + "," + csv_field(row.note) + "\n";
  }
  return out;
}

const SweepRow* best_row(const std::vector<SweepRow>& rows) {
  const SweepRow* best = nullptr;
  for (const SweepRow& row : rows) {
    if (row.feasible && (best == nullptr || row.samples_per_s > best->samples_per_s)) best = &row;
  }
  return best;
}

}  // namespace pipetwin::sim
