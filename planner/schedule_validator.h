// ScheduleValidator — proves a lowered schedule sound before anything runs it.
//
// Checks, in order, and throws pipetwin::Error naming the worker and the action at the first fault:
//  - every action's stage is held by its worker, its microbatch and peer are in range; an overlapped
//    forward (OVERLAP_F_B) is followed directly by a full backward; a TENSOR_ALLREDUCE follows the pass it
//    sums for (summed_pass) in a stage with a tensor-parallel group;
//  - every (stage, iteration, microbatch) has exactly one forward and one backward (B, or I and W) on
//    the replica that owns it, and one RECOMPUTE between them where its stage recomputes (none where it
//    does not); B/I follow their F (and R), W follows its I;
//  - every forward/backward that needs another worker's data has its RECV before it; every message id
//    has exactly one SEND and one RECV, and the two agree (workers, kind, stage, iteration,
//    microbatch, bytes); every all-reduce id is run once by each replica of its stage;
//  - memory: peak in-flight activations, stashed weight versions and optimizer state per worker,
//    against an optional limit (the error names the worker, its stages and every term of the sum);
//  - no deadlock: a run with unit durations must finish (schedule_evaluator.h).
#pragma once

#include <string>
#include <vector>

#include "planner/schedule.h"
#include "planner/schedule_evaluator.h"

namespace pipetwin {

struct ValidationOptions {
  std::string source = "schedule";        // named in error messages (a file, or the schedule's name)
  double memory_limit_bytes = 0.0;        // per worker; 0 = no check
  double runtime_memory_bytes = 0.0;      // per worker process beside its stages (device.runtime_memory_bytes)
  std::string memory_limit_source;        // the file the limit comes from (a cluster spec), named in the error
  std::vector<double> activation_bytes;   // per stage: stashed per in-flight microbatch (memory check)
  std::vector<double> recompute_bytes;    // per stage: held from a RECOMPUTE to its backward, besides the stash
  std::vector<double> output_gradient_bytes;  // per stage: held from an I to its W, besides the stash
};

struct WorkerMemory {
  std::vector<int> stages;  // the stages this worker holds
  int peak_in_flight = 0;   // microbatches whose activations are held: from F to B, or to W when split
  int weight_versions = 0;  // peak distinct weight versions in use (current + those in-flight forwards used)
  double peak_bytes = 0.0;  // peak in-flight x activations + versions x parameters
  double activation_bytes_at_peak = 0.0;  // the two terms of peak_bytes, at the moment of the peak
  double parameter_bytes_at_peak = 0.0;
  double optimizer_bytes = 0.0;  // one parameter-sized buffer per held stage (SGD momentum)
  double runtime_bytes = 0.0;    // the worker process's own (device.runtime_memory_bytes)

  double stage_bytes() const { return peak_bytes + optimizer_bytes; }  // what its stages need
  double total_bytes() const { return stage_bytes() + runtime_bytes; }
};

struct ValidationReport {
  std::vector<WorkerMemory> memory;  // per worker
  Evaluation unit_run;               // the deadlock check's run (every compute takes 1)
};

ValidationReport validate_schedule(const Schedule& schedule, const ValidationOptions& options = {});

// Peak in-flight activations and weight versions of every worker, without the other checks.
std::vector<WorkerMemory> schedule_memory(const Schedule& schedule, const std::vector<double>& activation_bytes = {},
                                          const std::vector<double>& recompute_bytes = {},
                                          const std::vector<double>& output_gradient_bytes = {});

// The first worker whose total exceeds `limit_bytes`, as a sentence naming it, its stages and every
// term ("worker 0 (stage 0) needs 29.643 GB: at its peak 29.467 GB of activations and 0.118 GB of
// weights (up to 2 microbatches in flight, 2 weight versions), plus 0.059 GB of optimizer state; the
// limit is 16.000 GB");
// empty when every worker fits or the limit is 0.
std::string memory_shortfall(const std::vector<WorkerMemory>& memory, double limit_bytes);

}  // namespace pipetwin
