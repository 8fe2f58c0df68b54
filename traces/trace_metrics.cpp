#include "traces/trace_metrics.h"

#include <algorithm>

namespace pipetwin {

TraceMetrics trace_metrics(const Trace& trace) {
  TraceMetrics metrics;
  const int iterations = std::max(1, trace.header.iterations);
  metrics.iteration_end_s.assign(iterations, 0.0);
  for (const TraceEvent& e : trace.events) {
    metrics.makespan_s = std::max(metrics.makespan_s, e.end_s);
    if (e.iteration >= 0 && e.iteration < iterations) {
      metrics.iteration_end_s[e.iteration] = std::max(metrics.iteration_end_s[e.iteration], e.end_s);
    }
  }
  for (int i = 0; i < iterations; ++i) {
    metrics.iteration_s.push_back(metrics.iteration_end_s[i] - (i > 0 ? metrics.iteration_end_s[i - 1] : 0.0));
  }
  const int warmup = std::clamp(trace.header.warmup_iterations, 0, iterations - 1);
  const double window_start = warmup > 0 ? metrics.iteration_end_s[warmup - 1] : 0.0;
  const double window_end = metrics.iteration_end_s.back();
  metrics.mean_iteration_s = (window_end - window_start) / (iterations - warmup);
  std::vector<double> measured(metrics.iteration_s.begin() + warmup, metrics.iteration_s.end());
  std::sort(measured.begin(), measured.end());
  metrics.median_iteration_s = measured.size() % 2 == 1
                                   ? measured[measured.size() / 2]
                                   : (measured[measured.size() / 2 - 1] + measured[measured.size() / 2]) / 2;
  if (metrics.mean_iteration_s > 0) {
    metrics.samples_per_s = double(trace.header.microbatch_size) * trace.header.microbatches / metrics.mean_iteration_s;
  }
  std::vector<double> busy(std::max(0, trace.header.workers), 0.0);
  for (const TraceEvent& e : trace.events) {
    if (!is_compute(e.kind) || e.worker < 0 || e.worker >= trace.header.workers) continue;
    busy[e.worker] += std::max(0.0, std::min(e.end_s, window_end) - std::max(e.start_s, window_start));
  }
  for (double b : busy) {
    metrics.bubble_fraction.push_back(window_end > window_start ? 1.0 - b / (window_end - window_start) : 0.0);
  }
  return metrics;
}

}  // namespace pipetwin
