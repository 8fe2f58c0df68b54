// Worker — one process of a pipeline run: joins the others, builds its stage(s) of a zoo model and
// runs the one interpreter (planner/schedule_interpreter.h) over its list of the built schedule
// (generated, or a schedule CSV given with schedule_file), recording each action in the trace format.
//
// Semantics per action: FORWARD runs the stage on its input (the microbatch's samples on stage 0, the
// received activation elsewhere) with the weights current at that moment; BACKWARD (or
// BACKWARD_INPUT then BACKWARD_WEIGHT) runs through the graph that forward built, so the gradients
// land in the weight version the forward used (weight stashing: an update never overwrites a version
// an in-flight microbatch still needs; it makes a new one); ALLREDUCE sums the stage's gradients over
// its replicas; OPTIMIZER_STEP applies SGD with momentum to the newest version. Losses are divided by
// the microbatch count, so an iteration's gradient is the minibatch mean, as in single-process training
// with gradient accumulation. On a stage the plan recomputes (recompute_s), FORWARD keeps only its
// input and output, without a graph, and RECOMPUTE runs the forward again with one, on the weight
// version and samples the forward used, just before the backward: the same gradients, less memory.
// With tensor parallelism t, each plan worker is t processes ("lanes"), each holding its rank's shard
// of every block; lane k of a worker talks to lane k of the others (messages, replicas' all-reduce),
// and the lanes of one worker sum inside every block. Lane 0's events are the trace's; checkpoints and
// peak memory are per process.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "planner/schedule.h"
#include "planner/schedule_builder.h"

namespace pipetwin::exec {

struct WorkerOptions {
  std::string plan_path;
  std::string model = "mlp";
  bool small = true;
  ScheduleRequest schedule{"1f1b", 0, 1, 3};  // what to build (or schedule.file to load); microbatches 0: the plan's
  std::shared_ptr<const Schedule> built;      // the schedule already built by the launcher (then `schedule` is unused)
  int warmup_iterations = 1;        // recorded in the trace header, left out of its metrics
  double learning_rate = 0.05;
  double momentum = 0.9;
  std::uint64_t data_seed = 7;
  int tensor_parallel = 1;        // t: every plan worker is t processes, each a rank of a tensor-parallel group
                                  // (gpt only, exec/tensor_parallel.h); process r is worker r mod W of lane r / W
  std::string device = "cpu";     // "cpu" (Gloo) or "cuda" (worker r on GPU r mod GPUs; NCCL when each has its own)
  std::chrono::milliseconds timeout{30000};
  std::string trace_part_path;    // where this worker writes its events (JSON lines)
  std::string checkpoint_dir;     // write every stage's weights and optimizer state after each iteration
  bool resume = false;            // start from the checkpoint in checkpoint_dir
  std::string fault;              // testing: "die:<rank>:<actions>", "hang:<rank>:<actions>" or
                                  // "diesave:<rank>:<iteration>" (die while saving that checkpoint)
  std::string versions_log_path;  // testing: per microbatch, the weight version its F and its B used
};

// Runs this process's worker (rank etc. from the environment). Throws pipetwin::Error on failure.
void run_worker(const WorkerOptions& options);

}  // namespace pipetwin::exec
