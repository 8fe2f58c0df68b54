#include "traces/trace_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "planner/error.h"
#include "traces/prediction_accuracy.h"
#include "traces/trace_metrics.h"

namespace pipetwin {
namespace {

using Key = std::tuple<int, int, ActionKind, int, int, int>;  // worker, stage, kind, microbatch, iteration, occurrence

std::map<Key, const TraceEvent*> index_events(const Trace& trace) {
  std::map<Key, const TraceEvent*> index;
  std::map<std::tuple<int, int, ActionKind, int, int>, int> seen;
  for (const TraceEvent& e : trace.events) {
    const int occurrence = seen[{e.worker, e.stage, e.kind, e.microbatch, e.iteration}]++;
    index[{e.worker, e.stage, e.kind, e.microbatch, e.iteration, occurrence}] = &e;
  }
  return index;
}

double iteration_start(const TraceMetrics& metrics, int iteration) {
  return iteration > 0 && iteration <= static_cast<int>(metrics.iteration_end_s.size()) ? metrics.iteration_end_s[iteration - 1] : 0.0;
}

}  // namespace

Comparison compare_traces(const Trace& predicted, const Trace& measured) {
  if (predicted.header.workers != measured.header.workers || predicted.header.stages != measured.header.stages) {
    throw Error({"", 0, "traces"},
                "the traces describe different runs (" + std::to_string(predicted.header.workers) + " workers / " +
                    std::to_string(predicted.header.stages) + " stages against " + std::to_string(measured.header.workers) +
                    " / " + std::to_string(measured.header.stages) + ")",
                "compare a simulation and a run of the same plan and schedule");
  }
  Comparison result;
  const TraceMetrics predicted_metrics = trace_metrics(predicted), measured_metrics = trace_metrics(measured);
  result.predicted_iteration_s = predicted_metrics.median_iteration_s;
  result.measured_iteration_s = measured_metrics.median_iteration_s;
  result.iteration_error = result.measured_iteration_s > 0
                               ? (result.predicted_iteration_s - result.measured_iteration_s) / result.measured_iteration_s
                               : 0.0;
  const auto predicted_index = index_events(predicted), measured_index = index_events(measured);
  std::map<std::string, std::vector<double>> errors;
  std::map<int, std::vector<double>> drift;
  std::vector<OperationError> operations;
  for (const auto& [key, m] : measured_index) {
    auto it = predicted_index.find(key);
    if (it == predicted_index.end()) {
      ++result.measured_only;
      continue;
    }
    const TraceEvent* p = it->second;
    ++result.aligned;
    drift[m->stage].push_back((p->start_s - iteration_start(predicted_metrics, p->iteration)) -
                              (m->start_s - iteration_start(measured_metrics, m->iteration)));
    if (!is_compute(m->kind)) continue;
    const double measured_s = m->end_s - m->start_s, predicted_s = p->end_s - p->start_s;
    if (measured_s <= 0) continue;
    const double error = (predicted_s - measured_s) / measured_s;
    errors[kind_name(m->kind)].push_back(error);
    operations.push_back({*m, predicted_s, measured_s, error});
  }
  result.predicted_only = static_cast<int>(predicted_index.size()) - result.aligned;
  for (auto& [kind, list] : errors) {
    std::vector<double> absolute;
    for (double e : list) absolute.push_back(std::fabs(e));
    result.kinds.push_back({kind, static_cast<int>(list.size()), quantile(list, 0.5), quantile(absolute, 0.9)});
  }
  for (int s = 0; s < measured.header.stages; ++s) result.stage_drift_s.push_back(quantile(drift[s], 0.5));
  std::stable_sort(operations.begin(), operations.end(),
                   [](const OperationError& a, const OperationError& b) { return std::fabs(a.error) > std::fabs(b.error); });
  operations.resize(std::min<std::size_t>(operations.size(), 10));
  result.worst = operations;
  const double error = std::fabs(result.iteration_error);
  result.verdict = error <= 0.05 ? "good: the prediction is within 5% of the measurement"
                   : error <= 0.10 ? "fair: within 10%; calibrating may tighten it"
                                   : "poor: off by more than 10%; run pipetwin calibrate and simulate again";
  return result;
}

nlohmann::json comparison_to_json(const Comparison& c) {
  nlohmann::json kinds = nlohmann::json::array(), worst = nlohmann::json::array();
  for (const KindError& k : c.kinds) {
    kinds.push_back({{"kind", k.kind}, {"count", k.count}, {"median_error", k.median_error}, {"p90_abs_error", k.p90_abs_error}});
  }
  for (const OperationError& o : c.worst) {
    worst.push_back({{"worker", o.measured.worker}, {"stage", o.measured.stage}, {"kind", kind_name(o.measured.kind)},
                     {"microbatch", o.measured.microbatch}, {"iteration", o.measured.iteration},
                     {"predicted_s", o.predicted_s}, {"measured_s", o.measured_s}, {"error", o.error}});
  }
  return {{"format", "pipetwin.comparison/1"},
          {"predicted_iteration_s", c.predicted_iteration_s},
          {"measured_iteration_s", c.measured_iteration_s},
          {"iteration_error", c.iteration_error},
          {"aligned", c.aligned},
          {"predicted_only", c.predicted_only},
          {"measured_only", c.measured_only},
          {"kinds", kinds},
          {"stage_drift_s", c.stage_drift_s},
          {"worst", worst},
          {"verdict", c.verdict}};
}

std::string comparison_text(const Comparison& c) {
  char line[256];
  std::string out;
  std::snprintf(line, sizeof line, "iteration time error: %+.1f%% (predicted %.6f s, measured median %.6f s)\n",
                100 * c.iteration_error, c.predicted_iteration_s, c.measured_iteration_s);
  out += line;
  std::snprintf(line, sizeof line, "aligned %d operations (%d only predicted, %d only measured)\n", c.aligned,
                c.predicted_only, c.measured_only);
  out += line;
  out += "  kind              count  median error  p90 |error|\n";
  for (const KindError& k : c.kinds) {
    std::snprintf(line, sizeof line, "  %-16s  %5d  %+11.1f%%  %10.1f%%\n", k.kind.c_str(), k.count, 100 * k.median_error,
                  100 * k.p90_abs_error);
    out += line;
  }
  out += "start-time drift per stage (predicted - measured, median within an iteration):";
  for (std::size_t s = 0; s < c.stage_drift_s.size(); ++s) {
    std::snprintf(line, sizeof line, " %zu: %+.3f ms", s, 1e3 * c.stage_drift_s[s]);
    out += line;
  }
  out += "\nworst operations:\n";
  for (std::size_t i = 0; i < std::min<std::size_t>(c.worst.size(), 5); ++i) {
    const OperationError& o = c.worst[i];
    std::snprintf(line, sizeof line, "  worker %d %d%s mb %d it %d: predicted %.6f s, measured %.6f s (%+.0f%%)\n",
                  o.measured.worker, o.measured.stage, kind_name(o.measured.kind).c_str(), o.measured.microbatch,
                  o.measured.iteration, o.predicted_s, o.measured_s, 100 * o.error);
    out += line;
  }
  return out + "verdict: " + c.verdict + "\n";
}

}  // namespace pipetwin
