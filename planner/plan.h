// Plan — how a model is cut into stages, replicated and placed on workers (DESIGN.md "Plan").
//
// A plan is made once by the partition optimizer and read unchanged by the schedule generators and
// both back ends. It records where it came from (profile, cluster, cost model, options), the stages
// (layers, replicas, device ids, compute, memory) and the optimizer's predictions. JSON form:
// "format": "pipetwin.plan/1". Readers throw pipetwin::Error naming the file and field.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "planner/cluster.h"
#include "planner/partition_optimizer.h"
#include "planner/profile.h"

namespace pipetwin {

struct PlanStage {
  std::vector<std::string> layer_ids;   // in profile (topological) order
  std::vector<std::size_t> layer_indices;
  int replicas = 1;
  std::vector<int> devices;             // worker ids, ascending, one per replica
  double compute_s = 0.0;               // summed fwd+bwd (+ recomputation) per minibatch on one worker
  double forward_s = 0.0;               // summed fwd
  double backward_s = 0.0;              // summed bwd
  double backward_input_s = 0.0;        // input part of bwd when profiled, else 0
  double backward_weight_s = 0.0;       // weight part of bwd when profiled, else 0 (bwd less its input part)
  double compute_share = 1.0;           // weight of its work when workers share a machine's compute (calibrated)
  double optimizer_s = 0.0;             // one optimizer step of the stage when measured (calibrate), else 0
  double forward_flops = 0.0;           // forward FLOPs per minibatch when every layer has them, else 0
  double param_bytes = 0.0;
  double activation_bytes = 0.0;        // stashed per in-flight minibatch
  double output_gradient_bytes = 0.0;   // per minibatch from a split backward's I to its W (stage_figures.h)
  std::optional<double> optimizer_bytes;  // gradients and optimizer state per replica (profile.h optimizer_bytes);
                                          // absent: param_bytes (PipeDream's one extra copy)
  double optimizer_state_bytes() const { return optimizer_bytes.value_or(param_bytes); }
  double output_activation_bytes = 0.0; // sent to the next stage per minibatch
  bool recomputed = false;          // its backwards follow a RECOMPUTE of their forward (stage_figures.h)
  double recompute_s = 0.0;         // one RECOMPUTE, per minibatch
  double recompute_bytes = 0.0;     // held from a RECOMPUTE to the end of its backward, besides the stash
  TensorSums tensor_sums;           // its layers' tensor-parallel all-reduces, in its times (tensor_sums.h)
  int in_flight = 1;                    // minibatches in flight under PipeDream's 1F1B (warm-up + 1),
                                        // warm-up = (workers - workers before - 1) / replicas, rounded down
  double memory_bytes = 0.0;            // per worker: see plan.cpp
};

struct Plan {
  std::string profile_name, profile_path;
  std::string cluster_name, cluster_path;
  int workers = 0;
  double device_memory_bytes = 0.0;  // memory of one worker's device, from the cluster (0 = unknown)
  std::string cost_model = "pipedream";
  bool straight = false;
  bool activation_transfer = true;
  std::optional<double> memory_limit_bytes;
  std::string schedule = "pipedream";
  int microbatch_size = 1;  // samples per microbatch (the profile's batch size)
  int microbatches = 1;     // microbatches per iteration
  std::vector<PlanStage> stages;
  std::string configuration;          // replicas per stage, "15-1"
  double slowest_stage_s = 0.0;       // the optimizer's time per minibatch slot
  double data_parallel_s = 0.0;       // data parallelism on the same workers
  double single_worker_s = 0.0;
  double time_per_iteration_s = 0.0;  // microbatches x slowest stage (steady state)
  double samples_per_s = 0.0;
  double speedup_over_data_parallel() const { return data_parallel_s / slowest_stage_s; }
};

// A microbatch count that gives every replica of every stage the same number of microbatches: the
// smallest multiple of the replica counts' least common multiple that is at least max(8, stages)
// (capped at 1024).
int default_microbatches(const PartitionResult& result);

// One figure of every stage, in stage order (e.g. per_stage(plan, &PlanStage::activation_bytes) for the
// memory checks of schedule_validator.h).
std::vector<double> per_stage(const Plan& plan, double PlanStage::*figure);

// PipeDream's 1F1B warm-up for a stage (its runtime's rule, rounded down): the minibatches a replica
// forwards before its first backward, (workers - workers before the stage - 1) / replicas.
int pipedream_warm_up(int workers, int workers_before, int replicas);

// Sets a stage's in-flight minibatches and memory per worker under PipeDream's 1F1B: warm-up =
// (workers - workers before the stage - 1) / replicas rounded down (PipeDream's runtime); each
// in-flight minibatch keeps its activations and its weight version; plus the optimizer state
// (optimizer_bytes: one copy of the weights for PipeDream's profiles).
void set_stage_memory(PlanStage& stage, int workers, int workers_before);

// Full recomputation of every stage, as a whole (what `pipetwin run` does on a recomputing stage): each
// in-flight microbatch keeps only the stage's input (the previous stage's output; none on the first,
// whose input is the data), the RECOMPUTE before each backward costs the stage's forward again and
// rebuilds its activations, held until the backward ends. Stages already recomputing are left as
// they are; memory per worker is recomputed.
void recompute_every_stage(Plan& plan);
// The same for the stages whose memory per worker exceeds the device's (plan.device_memory_bytes; none
// when it is unknown): the others keep their activations (`--recompute auto`). Returns how many.
int recompute_stages_over_memory(Plan& plan);

Plan make_plan(const Profile& profile, const Cluster& cluster, const OptimizerOptions& options,
               const PartitionResult& result, const std::string& schedule, int microbatches);

nlohmann::json plan_to_json(const Plan& plan);
Plan plan_from_json(const nlohmann::json& document, const std::string& path);
void write_plan(const Plan& plan, const std::string& path);  // atomic
Plan load_plan(const std::string& path);

// A human summary in the spirit of PipeDream's optimizer output: per-level splits, per-stage time
// and replication, the slowest stage and the speedup over data parallelism.
std::string plan_summary(const Plan& plan, const Profile& profile, const PartitionResult& result);

}  // namespace pipetwin
