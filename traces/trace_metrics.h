// Trace metrics — what a trace says about a run, whichever back end wrote it: when each iteration
// ended, the time per iteration over the measured (non-warm-up) iterations, samples per second, and
// each worker's bubble (the share of the measured window it spent not computing: is_compute of
// planner/schedule.h, the one definition, so `schedule`, `simulate` and the plots agree).
#pragma once

#include <vector>

#include "traces/trace.h"

namespace pipetwin {

struct TraceMetrics {
  std::vector<double> iteration_end_s;   // per iteration: the latest end of its events
  std::vector<double> iteration_s;       // per iteration: end minus the previous iteration's end
  double mean_iteration_s = 0.0;         // over the measured iterations (warm-up left out)
  double median_iteration_s = 0.0;       // over the measured iterations
  double samples_per_s = 0.0;            // microbatch_size x microbatches / mean_iteration_s
  double makespan_s = 0.0;
  std::vector<double> bubble_fraction;   // per worker, over the measured window
};

// Uses the header's iterations, warm-up iterations, workers, microbatches and microbatch size.
TraceMetrics trace_metrics(const Trace& trace);

}  // namespace pipetwin
