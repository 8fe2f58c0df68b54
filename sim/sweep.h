// Sweep — simulate many configurations of one model on one cluster and rank them.
//
// Configurations are the product of plans (the optimizer's plan, and a balanced plan for each stage
// count: stages x equal replicas), recomputation (none, or every stage), schedules, microbatch counts
// and link bandwidth scales; or configurations given whole (a transformer's tensor x pipeline x data
// parallel splits, recomputation, microbatch size and schedule from planner/parallel_search.h, each
// its own profile and cluster of tensor-parallel groups) times the bandwidth scales. Each is
// simulated in its own child process, `jobs` at a time; the result is one row per configuration
// with the predicted iteration time, samples/s, peak memory and whether it fits the devices. A
// configuration that does not fit is reported (worker, stage, numbers) and not simulated, unless
// simulate_infeasible asks for its times anyway.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "planner/cluster.h"
#include "planner/plan.h"
#include "planner/profile.h"

namespace pipetwin::sim {

struct SweepRow;

// A configuration given whole: what `plan` names in its row ("t4 b2 selective": tensor-parallel
// degree, microbatch size, recomputation), its profile's name, the cluster it runs on (one worker per
// tensor-parallel group) and its plan, schedule and microbatch count.
struct SweepConfiguration {
  std::string name;
  std::string profile_name;
  Cluster cluster;
  Plan plan;
  std::string schedule;
  int microbatches = 0;
};

struct SweepSpace {
  // Given whole (sweep --preset): these times the bandwidth scales, instead of the plans below.
  std::vector<SweepConfiguration> configurations;
  Plan optimizer_plan;               // the DP's plan ("dp")
  std::vector<int> stage_counts;     // balanced plans; empty: none
  std::vector<std::string> schedules;
  std::vector<int> microbatches;
  std::vector<double> bandwidth_scales{1.0};
  std::vector<std::string> recomputation{"none"};  // "none" and/or "full" (recompute_every_stage: plan "dp+recompute")
  int iterations = 3;
  int warmup_iterations = 1;
  bool simulate_infeasible = false;  // also time configurations that do not fit the devices' memory
  int shard = 0, shards = 1;         // run only the configurations whose id mod shards == shard
  // Testing: what each child process replies instead of simulating (e.g. a truncated reply).
  std::function<std::string(const SweepRow&)> child_reply;
};

struct SweepRow {
  int id = 0;
  std::string plan;          // "dp" or "balanced", "+recompute" when every stage recomputes; a
                             // configuration's name when given whole ("t4 b2 selective")
  int stages = 0;
  std::string replicas;      // per stage, "15-1"
  std::string schedule;
  int microbatches = 0;
  double bandwidth_scale = 1.0;
  double iteration_s = 0.0;
  double samples_per_s = 0.0;
  double peak_memory_bytes = 0.0;  // the worst worker's, from the schedule (schedule_validator.h)
  bool simulated = false;    // times are set (an infeasible configuration is only simulated on request)
  bool feasible = false;     // fits the devices' memory and ran
  bool failed = false;       // its simulation failed (the note says why); the other rows are kept
  std::string note;          // why not feasible or not simulated, or empty
};

using SweepProgress = std::function<void(int done, int total, const SweepRow& row)>;

std::vector<SweepRow> run_sweep(const Profile& profile, const Cluster& cluster, const SweepSpace& space, int jobs,
                                const SweepProgress& progress);

std::string sweep_csv(const std::vector<SweepRow>& rows);

// What identifies a sweep across its shards: a fingerprint of every configuration (its id, plan,
// stages, replicas, schedule, microbatches, bandwidth scale), the simulation settings, the profile
// and the cluster; and how many configurations it has.
struct SweepIdentity {
  std::string fingerprint;  // 16 hex digits
  int configurations = 0;
};
SweepIdentity sweep_identity(const Profile& profile, const Cluster& cluster, const SweepSpace& space);

// A shard's file: the line "# pipetwin.sweep-shard/1,sweep=<fingerprint>,shard=<K>/<N>,configurations=<T>"
// (K from 1), then sweep_csv of its rows. sweep_merge.h puts shards back together.
std::string sweep_shard_csv(const std::vector<SweepRow>& rows, const SweepIdentity& identity, int shard, int shards);
const SweepRow* best_row(const std::vector<SweepRow>& rows);  // most samples/s among feasible rows
int failed_rows(const std::vector<SweepRow>& rows);            // rows whose simulation failed

}  // namespace pipetwin::sim
