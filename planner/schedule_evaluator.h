// ScheduleEvaluator — runs a lowered schedule on paper: every worker executes its list in order,
// compute takes its stage's time, a SEND costs its sender nothing and arrives after latency +
// bytes / bandwidth, a RECV waits for the send with its message id, an ALLREDUCE starts when its whole group has
// arrived and takes a ring all-reduce 2(n-1)/n * bytes / bandwidth (+ 2(n-1) latencies), a
// TENSOR_ALLREDUCE the paper time of its pass's sums (StageTimes::sums, from the profile).
// No contention is modelled (that is sim/'s job); with zero-cost communication the result is the
// closed-form pipeline time of DESIGN.md. When no worker can move and some are not done, the result
// says which worker is stuck at which action: that is the deadlock check.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "planner/plan.h"
#include "planner/schedule.h"

namespace pipetwin {

struct CommunicationCost {
  double bandwidth_bytes_per_s = INFINITY;  // infinite: free transfers
  double latency_s = 0.0;
  // Ring all-reduce of `bytes` among `ranks`: 2(n-1)/n x bytes / bandwidth + 2(n-1) latencies (0 for one rank).
  double ring_allreduce_s(double bytes, int ranks) const {
    if (ranks <= 1) return 0.0;
    return 2.0 * (ranks - 1) / ranks * (std::isinf(bandwidth_bytes_per_s) ? 0.0 : bytes / bandwidth_bytes_per_s) +
           2.0 * (ranks - 1) * latency_s;
  }
};

struct ActionTiming {
  double start_s = 0.0;
  double end_s = 0.0;
};

struct Evaluation {
  bool completed = false;
  int stuck_worker = -1;  // when !completed: the first worker that cannot move
  int stuck_index = -1;   // and the index of the action it waits at
  std::string stuck_reason;
  std::vector<std::vector<ActionTiming>> timings;  // per worker, per action
  double makespan_s = 0.0;
  std::vector<double> compute_busy_s;  // per worker: time spent computing (is_compute: F/B/I/W/R/OPT)
  double bubble_fraction(int worker) const { return 1.0 - compute_busy_s[worker] / makespan_s; }
};

Evaluation evaluate_schedule(const Schedule& schedule, const std::vector<StageTimes>& stage_times,
                             const CommunicationCost& communication = {});

// Stage times from a plan: forward and backward of each plan stage (for interleaved, of each chunk),
// the split backward from the profile's bwd_input/bwd_weight when known, else half and half; a
// tensor-parallel stage's sums taken out of its passes (their paper time) into `sums`.
std::vector<StageTimes> stage_times_from_plan(const Plan& plan);

// Every stage takes `forward_s` forward and `backward_s` backward (split half and half).
std::vector<StageTimes> uniform_stage_times(int stages, double forward_s, double backward_s);

}  // namespace pipetwin
