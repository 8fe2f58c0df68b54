// Trace comparison — a predicted and a measured trace of the same plan and schedule, lined up action by
// action on (worker, stage, kind, microbatch, iteration): the iteration time error (signed, medians of
// the measured iterations), per-kind duration errors (median and 90th percentile), start-time drift
// per stage (how far predicted starts slide from measured ones, within each iteration), the worst
// operations, and a verdict. Text and JSON forms.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "traces/trace.h"

namespace pipetwin {

struct KindError {
  std::string kind;
  int count = 0;
  double median_error = 0.0;     // signed relative duration error (predicted - measured) / measured
  double p90_abs_error = 0.0;    // 90th percentile of |error|
};

struct OperationError {
  TraceEvent measured;
  double predicted_s = 0.0, measured_s = 0.0, error = 0.0;
};

struct Comparison {
  double predicted_iteration_s = 0.0, measured_iteration_s = 0.0;
  double iteration_error = 0.0;  // signed: (predicted - measured) / measured
  int aligned = 0, predicted_only = 0, measured_only = 0;
  std::vector<KindError> kinds;
  std::vector<double> stage_drift_s;  // per stage: median (predicted - measured) start offset in its iteration
  std::vector<OperationError> worst;  // compute operations with the largest |error|, at most 10
  std::string verdict;
};

// Throws Error when the traces do not describe the same run (workers, stages, schedule).
Comparison compare_traces(const Trace& predicted, const Trace& measured);
nlohmann::json comparison_to_json(const Comparison& comparison);
std::string comparison_text(const Comparison& comparison);

}  // namespace pipetwin
