// Parallel search — the fastest way to train a transformer on a cluster that fits in memory: tensor
// parallelism t x pipeline stages p x data parallelism d (t p d = the cluster's GPUs), recomputation,
// microbatch size b and schedule, for a global batch of B sequences.
//
// Each configuration is built and judged with the planner's own pieces, nothing re-derived: the
// profile from transformer_model.h (one GPU's share of its tensor-parallel group), balanced_plan's
// p stages, build_schedule's validated schedule of one pipeline (B / (d b) microbatches) whose
// per-worker peak memory (schedule_memory) is the memory test, and evaluate_schedule's run of that
// pipeline on paper (point-to-point messages at the bandwidth and latency of the cluster level the
// stage boundaries cross) plus a ring all-reduce of the largest stage's gradients among the d
// replicas over the level they span. That estimate has no contention: `pipetwin simulate` of the
// written plan is the prediction. Schedules that need one worker per stage
// (schedule_needs_unreplicated_stages: looped, V and zero-bubble ones) are tried only where d = 1,
// the looped and V ones with 2 stages per worker.
// A measured profile (instead of a transformer) is searched the same way with t = 1, recomputation
// none or full (recompute_every_stage: its layers have no attention core to recompute selectively)
// and the microbatch sizes up to its own batch size; and, where PipeDream's optimizer replicates its
// stages unequally (VGG-16 on Cluster-A: "15-1"), its plan too: one pipeline over all the GPUs whose
// replicas take the microbatches round robin, all-reducing in the schedule, run on paper over the
// outermost level's link (a schedule without a flush needs every replica to get as many microbatches).
// Throws Error naming the option for a request no configuration can satisfy (no t divides the
// heads, the batch splits into no whole microbatch count, ...).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "planner/cluster.h"
#include "planner/plan.h"
#include "planner/transformer_model.h"

namespace pipetwin {

struct ParallelSearchRequest {
  TransformerSpec model;  // its microbatch_size, tensor_parallel and sequence_parallel are searched/set
  // Instead of `model`: a measured profile (PipeDream's graph.txt, `pipetwin profile`), searched
  // without tensor parallelism, recomputing none or every stage, at microbatch sizes up to its own batch size
  // (profile_at_microbatch: times and activations in proportion to the samples).
  std::optional<Profile> measured;
  int global_batch = 0;   // B sequences per iteration
  std::vector<int> tensor_parallel;  // empty: every divisor of the innermost level's count
  std::vector<int> stages;           // empty: every p with t p dividing the GPUs and p <= blocks
  std::vector<Recomputation> recomputation = {Recomputation::none, Recomputation::selective, Recomputation::full};
  std::vector<int> microbatch_sizes = {1, 2, 4};
  std::vector<std::string> schedules = {"1f1b", "gpipe", "interleaved", "zb-h1", "zb-v"};
  bool sequence_parallel = true;     // with t > 1
  int max_microbatches_per_pipeline = 512;  // larger counts are not laid out (reported as skipped)
};

struct ParallelConfiguration {
  int tensor_parallel = 1, stages = 1, data_parallel = 1, microbatch_size = 1, microbatches = 1;  // per pipeline
  Recomputation recomputation = Recomputation::none;
  std::string schedule;
  std::string replicas;             // PipeDream's unequal replication per stage ("15-1"); empty: d per stage
  double iteration_s = 0.0;         // pipeline on paper + data-parallel all-reduce
  double allreduce_s = 0.0;         // the all-reduce part (PipeDream's plans: its longest all-reduce)
  double peak_memory_bytes = 0.0;   // the busiest GPU
  bool fits = false;
  double model_tflops_per_gpu = 0.0;  // the model's training FLOPs (no recomputation) / (iteration x GPUs)
  std::string label() const;        // "t8 p16 d128 b1 m16 selective 1f1b", "t1 p2 r15-1 b64 m15 none 1f1b"
};

struct ParallelSearchResult {
  std::vector<ParallelConfiguration> configurations;  // fastest first
  int best_fit = -1;             // index of the fastest that fits, -1 when none does
  int best_overall = -1;         // index of the fastest of all
  int skipped = 0;               // combinations not laid out (too many microbatches)
  double device_memory_bytes = 0.0;
  std::string binding_constraint() const;  // why the best fit is what it is, in one sentence
};

// Every configuration as CSV, fastest first: tensor_parallel, stages, data_parallel, microbatch_size,
// microbatches (per pipeline), recomputation, schedule, iteration_s, allreduce_s, model_tflops_per_gpu,
// peak_memory_bytes, fits (true/false), replicas (PipeDream's "15-1", else empty).
std::string parallel_search_csv(const ParallelSearchResult& result);

// `cluster` is the whole cluster of GPUs (not grouped); throws Error as above.
ParallelSearchResult search_parallel_plans(const ParallelSearchRequest& request, const Cluster& cluster);

// The plan of one configuration on the cluster seen as tensor-parallel groups, with its profile
// and grouped cluster, ready to write and simulate.
struct ParallelPlan {
  Profile profile;
  Cluster cluster;  // one worker per tensor-parallel group
  Plan plan;
};
ParallelPlan parallel_plan(const ParallelSearchRequest& request, const Cluster& cluster,
                           const ParallelConfiguration& configuration);

}  // namespace pipetwin
