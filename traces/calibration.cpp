#include "traces/calibration.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "planner/error.h"
#include "planner/schedule_evaluator.h"

namespace pipetwin {
namespace {

double profiled_seconds(const StageTimes& times, const std::string& kind) {
  if (kind == "FORWARD") return times.forward_s;
  if (kind == "BACKWARD") return times.backward_s;
  if (kind == "BACKWARD_INPUT") return times.backward_input_s;
  if (kind == "BACKWARD_WEIGHT") return times.backward_weight_s;
  return -1.0;
}

}  // namespace

Calibration calibrate(const Trace& measured, const Plan& plan, const Cluster& cluster) {
  Calibration result;
  const std::vector<StageTimes> times = stage_times_from_plan(plan);
  // Per (stage, kind): the profiled time and the median measured one (medians resist the scheduling
  // noise of a shared machine); then k through the origin over those pairs.
  std::map<std::pair<int, std::string>, std::vector<double>> measured_by_operation;
  std::map<std::pair<int, std::string>, double> profiled_by_operation;
  for (const TraceEvent& e : measured.events) {
    if (e.stage < 0 || e.stage >= static_cast<int>(times.size())) continue;
    const double p = profiled_seconds(times[e.stage], e.kind);
    if (p <= 0.0) continue;
    measured_by_operation[{e.stage, e.kind}].push_back(e.end_s - e.start_s);
    profiled_by_operation[{e.stage, e.kind}] = p;
    ++result.compute_samples;
  }
  if (measured_by_operation.empty()) {
    throw Error({"", 0, "trace"}, "the measured trace has no forward or backward of the plan's stages",
                "calibrate with the trace of a run of this plan");
  }
  double mp = 0.0, pp = 0.0;
  std::vector<std::pair<double, double>> compute;  // (profiled, median measured)
  for (auto& [operation, values] : measured_by_operation) {
    std::sort(values.begin(), values.end());
    const double m = values[values.size() / 2];
    const double p = profiled_by_operation[operation];
    mp += m * p;
    pp += p * p;
    compute.emplace_back(p, m);
  }
  result.compute_scale = mp / pp;
  double squared = 0.0;
  for (const auto& [p, m] : compute) squared += std::pow((result.compute_scale * p - m) / m, 2);
  result.compute_rms_relative_error = std::sqrt(squared / compute.size());

  // Time between consecutive events of a worker: what the runtime spends outside every action.
  {
    std::map<int, std::vector<const TraceEvent*>> by_worker;
    for (const TraceEvent& e : measured.events) by_worker[e.worker].push_back(&e);
    double gaps = 0.0;
    long long actions = 0;
    for (auto& [worker, events] : by_worker) {
      std::sort(events.begin(), events.end(), [](const TraceEvent* a, const TraceEvent* b) { return a->start_s < b->start_s; });
      for (std::size_t i = 1; i < events.size(); ++i) gaps += std::max(0.0, events[i]->start_s - events[i - 1]->end_s);
      actions += static_cast<long long>(events.size());
    }
    result.action_overhead_s = actions > 0 ? gaps / actions : 0.0;
  }

  // Transfers: a send matched with its receive; keep those whose receiver was already waiting.
  using Key = std::tuple<int, int, bool, int, int, int>;  // sender, receiver, activation?, producer stage, microbatch, iteration
  std::map<Key, const TraceEvent*> sends;
  for (const TraceEvent& e : measured.events) {
    if (e.kind == "SEND_ACT" || e.kind == "SEND_GRAD") {
      sends[{e.worker, e.peer, e.kind == "SEND_ACT", e.stage, e.microbatch, e.iteration}] = &e;
    }
  }
  std::vector<std::pair<double, double>> transfers;  // (bytes, seconds)
  for (const TraceEvent& e : measured.events) {
    if (e.kind != "RECV_ACT" && e.kind != "RECV_GRAD") continue;
    const bool activation = e.kind == "RECV_ACT";
    auto it = sends.find({e.peer, e.worker, activation, activation ? e.stage - 1 : e.stage + 1, e.microbatch, e.iteration});
    if (it == sends.end() || e.start_s > it->second->start_s) continue;
    transfers.emplace_back(e.bytes, e.end_s - it->second->start_s);
  }
  result.transfer_samples = static_cast<int>(transfers.size());
  if (transfers.empty()) return result;
  double mean_bytes = 0.0, mean_seconds = 0.0;
  for (const auto& [bytes, seconds] : transfers) {
    mean_bytes += bytes / transfers.size();
    mean_seconds += seconds / transfers.size();
  }
  double covariance = 0.0, variance = 0.0;
  for (const auto& [bytes, seconds] : transfers) {
    covariance += (bytes - mean_bytes) * (seconds - mean_seconds);
    variance += (bytes - mean_bytes) * (bytes - mean_bytes);
  }
  const double slope = variance > 0.0 ? covariance / variance : 0.0;
  if (variance > 0.0 && slope > 0.0) {
    result.bandwidth_bytes_per_s = 1.0 / slope;
    result.message_overhead_s = std::max(0.0, mean_seconds - slope * mean_bytes);
  } else {
    const double bandwidth = cluster.levels().front().bandwidth_bytes_per_s;
    result.message_overhead_s = std::max(0.0, mean_seconds - mean_bytes / bandwidth);
  }
  squared = 0.0;
  const double fitted_slope = result.bandwidth_bytes_per_s > 0 ? 1.0 / result.bandwidth_bytes_per_s
                                                                : 1.0 / cluster.levels().front().bandwidth_bytes_per_s;
  for (const auto& [bytes, seconds] : transfers) {
    squared += std::pow(result.message_overhead_s + bytes * fitted_slope - seconds, 2);
  }
  result.transfer_rms_error_s = std::sqrt(squared / transfers.size());
  return result;
}

Cluster calibrated_cluster(const Cluster& cluster, const Calibration& calibration) {
  DeviceSpec device = cluster.device();
  device.speed = 1.0 / calibration.compute_scale;
  device.action_overhead_s = calibration.action_overhead_s;
  std::vector<ClusterLevel> levels = cluster.levels();
  for (ClusterLevel& level : levels) {
    if (calibration.transfer_samples > 0) level.latency_s = calibration.message_overhead_s;
    if (calibration.bandwidth_bytes_per_s > 0) level.bandwidth_bytes_per_s = calibration.bandwidth_bytes_per_s;
  }
  return Cluster(cluster.name() + "-calibrated", "calibrated from a measured trace: " + cluster.description(), device,
                 levels, cluster.source_path());
}

}  // namespace pipetwin
