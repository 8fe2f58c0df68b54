#include "sim/sweep.h"

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <deque>
#include <sstream>
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
  BuiltSchedule built;  // built and validated in the parent
};

Cluster scaled(const Cluster& cluster, double scale) {
  std::vector<ClusterLevel> levels = cluster.levels();
  for (ClusterLevel& level : levels) level.bandwidth_bytes_per_s *= scale;
  Fabric fabric = cluster.fabric();
  fabric.bandwidth_bytes_per_s *= scale;
  return Cluster(cluster.name(), cluster.description(), cluster.device(), levels, cluster.source_path(), fabric);
}

std::string replicas_of(const Plan& plan) {
  std::string text;
  for (const PlanStage& stage : plan.stages) {
    if (!text.empty()) text += '-';
    text += std::to_string(stage.replicas);
  }
  return text;
}

// A job for `plan` of the profile `profile_name` on `cluster` at each bandwidth scale, appended to `jobs`.
void add_jobs(const std::string& name, const std::string& profile_name, const Cluster& cluster, const Plan& plan,
              const std::string& schedule, int microbatches, const SweepSpace& space, std::vector<Job>& jobs) {
  for (double scale : space.bandwidth_scales) {
    Job job{SweepRow{}, SimulationConfig{plan, scaled(cluster, scale)}, BuiltSchedule{}};
    job.row = {static_cast<int>(jobs.size()), name, static_cast<int>(plan.stages.size()), replicas_of(plan), schedule,
               microbatches, scale};
    job.config.schedule_name = schedule;
    job.config.microbatches = microbatches;
    job.config.iterations = space.iterations;
    job.config.warmup_iterations = space.warmup_iterations;
    job.config.profile_name = profile_name;
    job.config.ignore_memory = true;  // the sweep reports memory itself (check_memory)
    jobs.push_back(std::move(job));
  }
}

std::vector<Job> make_jobs(const Profile& profile, const Cluster& cluster, const SweepSpace& space) {
  std::vector<Job> jobs;
  if (!space.configurations.empty()) {
    for (const SweepConfiguration& c : space.configurations) {
      add_jobs(c.name, c.profile_name, c.cluster, c.plan, c.schedule, c.microbatches, space, jobs);
    }
    return jobs;
  }
  std::vector<std::pair<std::string, Plan>> plans{{"dp", space.optimizer_plan}};
  for (int stages : space.stage_counts) {
    plans.emplace_back("balanced", balanced_plan(profile, cluster, stages, "1f1b", 8));
  }
  std::vector<std::pair<std::string, Plan>> variants;  // each plan as it is, and recomputing every stage
  for (const auto& [kind, plan] : plans) {
    for (const std::string& recompute : space.recomputation) {
      if (recompute == "none") {
        variants.emplace_back(kind, plan);
      } else if (recompute == "full") {
        variants.emplace_back(kind + "+recompute", plan);
        recompute_every_stage(variants.back().second);
      } else {
        throw Error({"", 0, "--recompute"}, "unknown recomputation '" + recompute + "'", "use none, full, or none,full");
      }
    }
  }
  for (const auto& [kind, plan] : variants) {
    for (const std::string& schedule : space.schedules) {
      for (int microbatches : space.microbatches) add_jobs(kind, profile.name(), cluster, plan, schedule, microbatches, space, jobs);
    }
  }
  return jobs;
}

std::string run_one(const SimulationConfig& config, const BuiltSchedule& built) {
  const SimulationResult result = simulate_prepared(config, built);
  return nlohmann::json{{"iteration_s", result.summary.iteration_s}, {"samples_per_s", result.summary.samples_per_s}}
      .dump();
}

// Reads a child's reply into the row; a reply that is not what run_one writes marks the row failed.
void fill(SweepRow& row, const std::string& text) {
  if (const auto error = child_error(text)) {
    row.feasible = false;
    row.failed = true;
    row.note = "simulation failed: " + *error;
    return;
  }
  nlohmann::json json;
  double iteration_s = 0.0, samples_per_s = 0.0;
  try {
    json = nlohmann::json::parse(text);
    iteration_s = json.at("iteration_s").get<double>();
    samples_per_s = json.at("samples_per_s").get<double>();
  } catch (const nlohmann::json::exception& error) {
    row.feasible = false;
    row.failed = true;
    row.note = "simulation failed: its process replied with something that is not a result (" +
               std::string(error.what()) + ")";
    return;
  }
  row.simulated = true;
  row.iteration_s = iteration_s;
  row.samples_per_s = samples_per_s;
}

// Peak memory of the built schedule (its validation report) against the device: an infeasible row
// names the worker, its stage and the numbers.
void check_memory(Job& job, double device_memory_bytes) {
  const std::vector<WorkerMemory>& memory = job.built.report.memory;
  for (const WorkerMemory& worker : memory) job.row.peak_memory_bytes = std::max(job.row.peak_memory_bytes, worker.total_bytes());
  job.row.note = memory_shortfall(memory, device_memory_bytes);
  job.row.feasible = job.row.note.empty();
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
  if (space.shards < 1 || space.shard < 0 || space.shard >= space.shards) {
    throw Error({"", 0, "--shard"}, "shard " + std::to_string(space.shard + 1) + " of " + std::to_string(space.shards) +
                                        " does not exist",
                "write --shard K/N with 1 <= K <= N, e.g. --shard 2/8");
  }
  std::vector<Job> work;
  for (Job& job : make_jobs(profile, cluster, space)) {  // ids over the whole sweep; this shard's only
    if (job.row.id % space.shards == space.shard) work.push_back(std::move(job));
  }
  std::vector<SweepRow> rows;
  std::deque<std::pair<std::size_t, Child>> running;
  std::size_t next = 0;
  auto finish = [&](SweepRow& row) {
    rows.push_back(row);
    if (progress) progress(static_cast<int>(rows.size()), static_cast<int>(work.size()), row);
  };
  auto finish_front = [&] {
    auto [index, child] = running.front();
    running.pop_front();
    SweepRow& row = work[index].row;
    try {
      fill(row, finish_child(child));
    } catch (const Error& error) {
      row.feasible = false;
      row.failed = true;
      row.note = "simulation failed: " + error.problem();
    }
    finish(row);
  };
  while (next < work.size() || !running.empty()) {
    if (next < work.size() && static_cast<int>(running.size()) < jobs) {
      Job& job = work[next++];
      try {
        job.built = prepare_schedule(job.config);  // a configuration the schedule cannot run is a row, not a crash
      } catch (const Error& error) {
        job.row.note = error.problem();
        finish(job.row);
        continue;
      }
      check_memory(job, cluster.device().memory_bytes);
      if (!job.row.feasible && !space.simulate_infeasible) {
        finish(job.row);
        continue;
      }
      const Job* prepared = &job;
      running.emplace_back(&job - work.data(),
                           start_child([prepared, &space] { return space.child_reply ? space.child_reply(prepared->row)
                                                                                     : run_one(prepared->config, prepared->built); }));
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
    if (row.simulated) {
      std::snprintf(numbers, sizeof numbers, "%.17g,%.9g,%.9g,%.17g", row.bandwidth_scale, row.iteration_s,
                    row.samples_per_s, row.peak_memory_bytes);
    } else {  // not simulated: no times
      std::snprintf(numbers, sizeof numbers, "%.17g,,,%.17g", row.bandwidth_scale, row.peak_memory_bytes);
    }
    out += std::to_string(row.id) + "," + row.plan + "," + std::to_string(row.stages) + "," + row.replicas + "," +
           row.schedule + "," + std::to_string(row.microbatches) + "," + numbers + "," +
           (row.feasible ? "true" : "false") + "," + csv_field(row.note) + "\n";
  }
  return out;
}

const SweepRow* best_row(const std::vector<SweepRow>& rows) {
  const SweepRow* best = nullptr;
  for (const SweepRow& row : rows) {
    if (row.feasible && row.simulated && (best == nullptr || row.samples_per_s > best->samples_per_s)) best = &row;
  }
  return best;
}

SweepIdentity sweep_identity(const Profile& profile, const Cluster& cluster, const SweepSpace& space) {
  std::ostringstream description;
  description << profile.name() << '|' << cluster.name() << '|' << cluster.worker_count() << '|' << space.iterations << '|'
              << space.warmup_iterations << '|' << space.simulate_infeasible;
  const std::vector<Job> jobs = make_jobs(profile, cluster, space);
  for (const Job& job : jobs) {
    const SweepRow& r = job.row;
    char scale[32];
    std::snprintf(scale, sizeof scale, "%.17g", r.bandwidth_scale);
    description << '\n' << r.id << ',' << r.plan << ',' << r.stages << ',' << r.replicas << ',' << r.schedule << ','
                << r.microbatches << ',' << scale << ',' << job.config.profile_name;
  }
  std::uint64_t hash = 1469598103934665603ULL;  // FNV-1a 64
  for (unsigned char c : description.str()) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return {text, static_cast<int>(jobs.size())};
}

std::string sweep_shard_csv(const std::vector<SweepRow>& rows, const SweepIdentity& identity, int shard, int shards) {
  return "# pipetwin.sweep-shard/1,sweep=" + identity.fingerprint + ",shard=" + std::to_string(shard + 1) + "/" +
         std::to_string(shards) + ",configurations=" + std::to_string(identity.configurations) + "\n" + sweep_csv(rows);
}

int failed_rows(const std::vector<SweepRow>& rows) {
  return static_cast<int>(std::count_if(rows.begin(), rows.end(), [](const SweepRow& row) { return row.failed; }));
}

}  // namespace pipetwin::sim
