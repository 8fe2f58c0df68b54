#include "traces/calibration.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "planner/error.h"
#include "planner/schedule_builder.h"
#include "planner/schedule_evaluator.h"

namespace pipetwin {
namespace {

// A pass's profiled duration (F, B, I, W, R); -1 for what calibration fits elsewhere or not at all.
double profiled_seconds(const StageTimes& times, ActionKind kind) { return is_pass(kind) ? times.seconds(kind) : -1.0; }

}  // namespace

Trace typical_iterations(const Trace& measured) {
  std::map<int, std::pair<double, double>> span;  // iteration -> (first start, last end)
  for (const TraceEvent& e : measured.events) {
    if (e.iteration < measured.header.warmup_iterations) continue;
    auto [it, fresh] = span.try_emplace(e.iteration, e.start_s, e.end_s);
    if (!fresh) it->second = {std::min(it->second.first, e.start_s), std::max(it->second.second, e.end_s)};
  }
  if (span.empty()) return measured;  // nothing past the warm-up: use what there is
  std::vector<std::pair<double, int>> by_length;
  for (const auto& [iteration, times] : span) by_length.emplace_back(times.second - times.first, iteration);
  std::sort(by_length.begin(), by_length.end());
  const std::size_t n = by_length.size(), first = n / 4, last = std::max(first + 1, n - n / 4);
  std::set<int> kept;
  for (std::size_t i = first; i < last; ++i) kept.insert(by_length[i].second);
  Trace typical{measured.header, {}};
  for (const TraceEvent& e : measured.events) {
    if (kept.count(e.iteration)) typical.events.push_back(e);
  }
  return typical;
}

namespace {

using Matched = std::vector<std::pair<const TraceEvent*, const TraceEvent*>>;  // (receive, its send)

// Scales per worker and overall (least squares through the origin) and each stage's forward share.
void fit_compute(const Trace& measured, const std::vector<StageTimes>& times, Calibration& result) {
  // Per (worker, stage, kind): the mean measured duration (an iteration is a sum of durations, so a
  // median would miss the slow tail a shared machine adds).
  std::map<std::tuple<int, int, ActionKind>, std::vector<double>> measured_by_operation;
  for (const TraceEvent& e : measured.events) {
    if (e.stage < 0 || e.stage >= static_cast<int>(times.size()) || e.worker < 0) continue;
    if (profiled_seconds(times[e.stage], e.kind) <= 0.0) continue;
    measured_by_operation[{e.worker, e.stage, e.kind}].push_back(e.end_s - e.start_s);
    ++result.compute_samples;
  }
  if (measured_by_operation.empty()) {
    throw Error({"", 0, "trace"}, "the measured trace has no forward or backward of the plan's stages",
                "calibrate with the trace of a run of this plan");
  }
  // Each stage's measured forward share of forward + backward (stages run with a full backward).
  std::map<std::pair<int, ActionKind>, std::pair<double, double>> stage_kind;  // -> (seconds, count)
  for (const auto& [operation, values] : measured_by_operation) {
    auto& [seconds, count] = stage_kind[{std::get<1>(operation), std::get<2>(operation)}];
    for (double value : values) seconds += value;
    count += static_cast<double>(values.size());
  }
  result.stage_forward_fraction.assign(times.size(), -1.0);
  std::vector<StageTimes> split = times;
  for (std::size_t s = 0; s < times.size(); ++s) {
    const auto forward = stage_kind.find({static_cast<int>(s), ActionKind::FORWARD});
    const auto backward = stage_kind.find({static_cast<int>(s), ActionKind::BACKWARD});
    if (forward == stage_kind.end() || backward == stage_kind.end()) continue;
    const double f = forward->second.first / forward->second.second;
    const double b = backward->second.first / backward->second.second;
    const double fraction = f / (f + b);
    result.stage_forward_fraction[s] = fraction;
    const double total = times[s].forward_s + times[s].backward_s;
    split[s].forward_s = total * fraction;
    split[s].backward_s = total * (1.0 - fraction);
  }
  // k through the origin over (profiled with the measured split, mean measured), for all workers
  // together and for each worker; every event counts once.
  double mp = 0.0, pp = 0.0;
  std::map<int, std::pair<double, double>> per_worker;  // worker -> (sum m p, sum p p)
  std::vector<std::tuple<int, double, double>> compute;  // (worker, profiled, mean measured)
  for (const auto& [operation, values] : measured_by_operation) {
    double m = 0.0;
    for (double value : values) m += value / static_cast<double>(values.size());
    const double p = profiled_seconds(split[std::get<1>(operation)], std::get<2>(operation));
    const double weight = static_cast<double>(values.size());
    mp += weight * m * p;
    pp += weight * p * p;
    per_worker[std::get<0>(operation)].first += weight * m * p;
    per_worker[std::get<0>(operation)].second += weight * p * p;
    compute.emplace_back(std::get<0>(operation), p, m);
  }
  result.compute_scale = mp / pp;
  result.worker_compute_scale.assign(per_worker.rbegin()->first + 1, 0.0);
  for (const auto& [worker, sums] : per_worker) result.worker_compute_scale[worker] = sums.first / sums.second;
  double squared = 0.0;
  for (const auto& [worker, p, m] : compute) squared += std::pow((result.worker_compute_scale[worker] * p - m) / m, 2);
  result.compute_rms_relative_error = std::sqrt(squared / compute.size());
}

// Optimizer steps: each worker's mean, brought to speed 1 by its compute scale, averaged per stage.
void fit_optimizer_steps(const Trace& measured, std::size_t stages, Calibration& result) {
  std::map<std::pair<int, int>, std::pair<double, int>> steps;  // (stage, worker) -> (seconds, count)
  for (const TraceEvent& e : measured.events) {
    if (e.kind != ActionKind::OPTIMIZER_STEP || e.stage < 0 || e.stage >= static_cast<int>(stages)) continue;
    auto& [seconds, count] = steps[{e.stage, e.worker}];
    seconds += e.end_s - e.start_s;
    ++count;
  }
  result.stage_optimizer_s.assign(stages, 0.0);
  std::vector<int> workers(stages, 0);
  for (const auto& [key, sums] : steps) {
    const auto [stage, worker] = key;
    const double k = worker < static_cast<int>(result.worker_compute_scale.size()) &&
                             result.worker_compute_scale[worker] > 0.0
                         ? result.worker_compute_scale[worker]
                         : result.compute_scale;
    result.stage_optimizer_s[stage] += sums.first / sums.second / k;
    ++workers[stage];
  }
  for (std::size_t s = 0; s < stages; ++s) {
    if (workers[s] > 0) result.stage_optimizer_s[s] /= workers[s];
  }
}

// Time between consecutive events of a worker: what the runtime spends outside every action.
void fit_action_overhead(const Trace& measured, Calibration& result) {
  std::map<int, std::vector<const TraceEvent*>> by_worker;
  for (const TraceEvent& e : measured.events) by_worker[e.worker].push_back(&e);
  double gaps = 0.0;
  long long actions = 0;
  for (auto& [worker, events] : by_worker) {
    std::sort(events.begin(), events.end(), [](const TraceEvent* a, const TraceEvent* b) { return a->start_s < b->start_s; });
    for (std::size_t i = 1; i < events.size(); ++i) {  // inside an iteration (the kept ones need not be adjacent)
      if (events[i]->iteration == events[i - 1]->iteration) gaps += std::max(0.0, events[i]->start_s - events[i - 1]->end_s);
    }
    actions += static_cast<long long>(events.size());
  }
  result.action_overhead_s = actions > 0 ? gaps / actions : 0.0;
}

// Whether send `e` crossed one the other way: its posting and a posting of a send from its peer to its
// worker overlap in time.
bool crossed(const TraceEvent& e, const std::map<std::pair<int, int>, std::vector<const TraceEvent*>>& sends_by_pair) {
  const auto other_way = sends_by_pair.find({e.peer, e.worker});
  if (other_way == sends_by_pair.end()) return false;
  return std::any_of(other_way->second.begin(), other_way->second.end(),
                     [&e](const TraceEvent* o) { return o->start_s < e.end_s && e.start_s < o->end_s; });
}

// The mean duration of a send that crossed none (posting it) and what a crossing one took more (a
// diagnostic: the simulator does not model crossings), and every receive matched with its send by
// message id.
Matched fit_send_overhead(const Trace& measured, Calibration& result) {
  std::map<int, const TraceEvent*> sends;  // message id -> its send
  std::map<std::pair<int, int>, std::vector<const TraceEvent*>> sends_by_pair;  // (worker, peer) -> its sends
  for (const TraceEvent& e : measured.events) {
    if (!is_send(e.kind)) continue;
    if (e.message >= 0) sends[e.message] = &e;
    sends_by_pair[{e.worker, e.peer}].push_back(&e);
  }
  double alone_s = 0.0, crossing_s = 0.0;
  int alone = 0, crossing = 0;
  for (const TraceEvent& e : measured.events) {
    if (!is_send(e.kind)) continue;
    const bool crossed_one = crossed(e, sends_by_pair);
    (crossed_one ? crossing_s : alone_s) += e.end_s - e.start_s;
    ++(crossed_one ? crossing : alone);
  }
  result.send_samples = alone + crossing;
  if (alone > 0) {
    result.send_overhead_s = alone_s / alone;
    result.send_crossing_samples = crossing;
    if (crossing > 0) result.send_crossing_s = std::max(0.0, crossing_s / crossing - result.send_overhead_s);
  } else if (crossing > 0) {  // every send crossed: nothing to tell the crossing's cost by
    result.send_overhead_s = crossing_s / crossing;
  }
  std::vector<std::pair<const TraceEvent*, const TraceEvent*>> received;  // (receive, its send)
  for (const TraceEvent& e : measured.events) {
    if (!is_receive(e.kind) || e.message < 0) continue;
    auto it = sends.find(e.message);
    if (it != sends.end()) received.emplace_back(&e, it->second);
  }
  return received;
}

// The fitted (or, with one message size, the cluster's) seconds per byte of a transfer.
double seconds_per_byte(const Calibration& result, const Cluster& cluster) {
  return result.bandwidth_bytes_per_s > 0 ? 1.0 / result.bandwidth_bytes_per_s
                                          : 1.0 / cluster.levels().front().bandwidth_bytes_per_s;
}

// Transfers whose receiver was already waiting: overhead + bytes / bandwidth, ordinary least squares.
// False when there are none.
bool fit_transfers(const Matched& received, const Cluster& cluster, LinkTerms link_terms, Calibration& result) {
  std::vector<std::pair<double, double>> transfers;  // (bytes, seconds)
  for (const auto& [receive, send] : received) {
    if (receive->start_s <= send->end_s) transfers.emplace_back(receive->bytes, receive->end_s - send->end_s);
  }
  result.transfer_samples = static_cast<int>(transfers.size());
  if (transfers.empty()) return false;
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
  if (link_terms == LinkTerms::kOverheadAndBandwidth && variance > 0.0 && slope > 0.0) {
    result.bandwidth_bytes_per_s = 1.0 / slope;
    result.message_overhead_s = std::max(0.0, mean_seconds - slope * mean_bytes);
  } else {
    const double bandwidth = cluster.levels().front().bandwidth_bytes_per_s;
    result.message_overhead_s = std::max(0.0, mean_seconds - mean_bytes / bandwidth);
  }
  double squared = 0.0;
  const double fitted_slope = seconds_per_byte(result, cluster);
  for (const auto& [bytes, seconds] : transfers) {
    squared += std::pow(result.message_overhead_s + bytes * fitted_slope - seconds, 2);
  }
  result.transfer_rms_error_s = std::sqrt(squared / transfers.size());
  return true;
}

// Receives that began once their message was there (send end + fitted transfer time): the
// receiver's own cost of taking a delivered message.
void fit_receive_overhead(const Matched& received, const Cluster& cluster, Calibration& result) {
  double late_seconds = 0.0;
  for (const auto& [receive, send] : received) {
    const double arrival = send->end_s + result.message_overhead_s + receive->bytes * seconds_per_byte(result, cluster);
    if (receive->start_s < arrival) continue;
    late_seconds += receive->end_s - receive->start_s;
    ++result.recv_samples;
  }
  if (result.recv_samples > 0) result.recv_overhead_s = late_seconds / result.recv_samples;
}

// The runtime's own memory, where the trace records one peak per worker and its schedule can be built
// again from its header (a tensor-parallel run records one per rank: not fitted).
// One figure per process a measured trace's header records under `key` (-1 where one is not a number);
// empty when it records none.
std::vector<double> per_process_figures(const Trace& measured, const char* key) {
  std::vector<double> values;
  const auto it = measured.header.extra.find(key);
  if (it != measured.header.extra.end() && it->is_array()) {
    for (const auto& value : *it) values.push_back(value.is_number() ? value.get<double>() : -1.0);
  }
  return values;
}

void fit_runtime_memory(const Trace& measured, const Plan& plan, Calibration& result) {
  const std::vector<double> peaks = measured_peak_bytes(measured);
  if (peaks.empty() || static_cast<int>(peaks.size()) != measured.header.workers) return;
  ScheduleRequest request;
  request.name = measured.header.schedule;
  request.microbatches = measured.header.microbatches;
  request.chunks = measured.header.extra.value("chunks", 1);
  std::vector<double> stage_bytes;
  try {
    for (const WorkerMemory& memory : build_schedule(plan, request).report.memory) stage_bytes.push_back(memory.stage_bytes());
  } catch (const Error&) {
    return;  // a schedule this build does not generate (a file's): left unfitted, as the field says
  }
  result.runtime_memory_bytes = fit_runtime_memory_bytes(stage_bytes, {peaks});
}

// The workers' CPU beside their compute over the measured iterations, less the overheads fitted above
// (the simulator spends those as CPU of their own), per message sent in them. `typical` is the part
// of the trace the overheads were fitted on: its share of receives that found their message arrived.
void fit_message_cpu(const Trace& whole, const Trace& typical, Calibration& result) {
  const std::vector<double> process = per_process_figures(whole, "process_cpu_s");
  const std::vector<double> compute = per_process_figures(whole, "compute_cpu_s");
  const auto workers = static_cast<std::size_t>(whole.header.workers);
  if (process.size() != workers || compute.size() != workers) return;  // none recorded, or one per tensor-parallel rank
  double beside_s = 0.0;
  for (std::size_t w = 0; w < workers; ++w) {
    if (!(process[w] >= 0.0) || !(compute[w] >= 0.0)) return;
    beside_s += process[w] - compute[w];
  }
  int actions = 0, sends = 0, receives = 0, typical_receives = 0;
  double bytes = 0.0;
  for (const TraceEvent& e : whole.events) {
    if (e.iteration < whole.header.warmup_iterations) continue;
    ++actions;
    if (is_send(e.kind)) ++sends, bytes += e.bytes;
    if (is_receive(e.kind)) ++receives;
  }
  for (const TraceEvent& e : typical.events) typical_receives += is_receive(e.kind) ? 1 : 0;
  if (sends == 0) return;
  const double arrived_share = typical_receives > 0 ? static_cast<double>(result.recv_samples) / typical_receives : 0.0;
  // The posting of a send that crossed none: a crossing's stall spins a core, CPU of the message's.
  const double runtime_s = actions * result.action_overhead_s + sends * result.send_overhead_s +
                           receives * arrived_share * result.recv_overhead_s;
  result.message_cpu_s = std::max(0.0, beside_s - runtime_s) / sends;
  result.message_cpu_bytes = bytes / sends;
  result.message_cpu_samples = sends;
}

}  // namespace

// A trace of another model or another cut is refused, naming both.
void check_trace_matches_plan(const Trace& measured, const Plan& plan) {
  const TraceHeader& header = measured.header;
  const int stages = static_cast<int>(plan.stages.size());
  const bool other_model = !header.profile.empty() && !plan.profile_name.empty() && header.profile != plan.profile_name;
  if (header.stages != stages || other_model) {
    throw Error({"", 0, "trace"},
                "the trace is of a run of '" + header.profile + "' on " + std::to_string(header.stages) +
                    " stages, the plan is of '" + plan.profile_name + "' on " + std::to_string(stages) + " stages",
                "calibrate with the plan that run used (pipetwin run --plan), or the trace of a run of this plan");
  }
}

Calibration calibrate(const Trace& whole, const Plan& plan, const Cluster& cluster, LinkTerms link_terms) {
  check_trace_matches_plan(whole, plan);
  Calibration result;
  const Trace measured = typical_iterations(whole);
  const std::vector<StageTimes> times = stage_times_from_plan(plan);
  fit_compute(measured, times, result);
  fit_optimizer_steps(measured, times.size(), result);
  fit_action_overhead(measured, result);
  const Matched received = fit_send_overhead(measured, result);
  if (fit_transfers(received, cluster, link_terms, result)) fit_receive_overhead(received, cluster, result);
  fit_runtime_memory(whole, plan, result);
  fit_message_cpu(whole, measured, result);
  return result;
}

Plan calibrated_plan(const Plan& plan, const Calibration& calibration) {
  Plan result = plan;
  for (std::size_t s = 0; s < result.stages.size() && s < calibration.stage_forward_fraction.size(); ++s) {
    const double fraction = calibration.stage_forward_fraction[s];
    if (!(fraction >= 0.0 && fraction <= 1.0)) continue;
    PlanStage& stage = result.stages[s];
    const double total = stage.forward_s + stage.backward_s;
    const double backward = total * (1.0 - fraction);
    if (stage.backward_s > 0.0) stage.backward_input_s *= backward / stage.backward_s;
    stage.forward_s = total * fraction;
    stage.backward_s = backward;
  }
  for (std::size_t s = 0; s < result.stages.size() && s < calibration.stage_optimizer_s.size(); ++s) {
    if (calibration.stage_optimizer_s[s] > 0.0) result.stages[s].optimizer_s = calibration.stage_optimizer_s[s];
  }
  return result;
}

std::vector<double> measured_peak_bytes(const Trace& measured) { return per_process_figures(measured, "peak_memory_bytes"); }

int recorded_cores(const Trace& measured) {
  const auto cores = measured.header.extra.find("cores");
  if (cores == measured.header.extra.end() || !cores->is_number_integer() || cores->get<int>() < 1) return 0;
  return cores->get<int>();
}

double compute_cpu_per_work(const Trace& measured, const std::vector<StageTimes>& times) {
  const std::vector<double> cpu = per_process_figures(measured, "compute_cpu_s");
  if (static_cast<int>(cpu.size()) != measured.header.workers) return -1.0;
  double cpu_s = 0.0;
  for (double worker_s : cpu) {
    if (!(worker_s >= 0.0)) return -1.0;
    cpu_s += worker_s;
  }
  double work_s = 0.0;
  for (const TraceEvent& e : measured.events) {
    if (e.iteration < measured.header.warmup_iterations || e.stage < 0 || e.stage >= static_cast<int>(times.size())) continue;
    work_s += times[e.stage].seconds(e.kind);
  }
  return work_s > 0.0 ? cpu_s / work_s : -1.0;
}

std::vector<double> compute_core_share(const Trace& measured) {
  const std::vector<double> cpu = per_process_figures(measured, "compute_cpu_s");
  if (static_cast<int>(cpu.size()) != measured.header.workers) return {};
  std::vector<double> computing_s(cpu.size(), 0.0);
  for (const TraceEvent& e : measured.events) {
    if (e.iteration >= measured.header.warmup_iterations && is_compute(e.kind) && e.worker >= 0 &&
        e.worker < static_cast<int>(cpu.size())) {
      computing_s[e.worker] += e.end_s - e.start_s;
    }
  }
  std::vector<double> share;
  for (std::size_t w = 0; w < cpu.size(); ++w) share.push_back(cpu[w] >= 0.0 && computing_s[w] > 0.0 ? cpu[w] / computing_s[w] : -1.0);
  return share;
}

double fit_runtime_memory_bytes(const std::vector<double>& stage_bytes, const std::vector<std::vector<double>>& measured_peaks) {
  std::vector<double> beside;
  for (const std::vector<double>& run : measured_peaks) {
    for (std::size_t w = 0; w < run.size() && w < stage_bytes.size(); ++w) {
      if (run[w] >= 0.0) beside.push_back(run[w] - stage_bytes[w]);
    }
  }
  if (beside.empty()) return 0.0;
  std::sort(beside.begin(), beside.end());
  const std::size_t n = beside.size();
  const double median = n % 2 == 1 ? beside[n / 2] : (beside[n / 2 - 1] + beside[n / 2]) / 2;
  return std::max(0.0, median);
}

Cluster with_probed_link(const Cluster& cluster, const LinkFit& link) {
  DeviceSpec device = cluster.device();
  if (link.send_overhead_s > 0.0) device.send_overhead_s = link.send_overhead_s;
  if (link.recv_overhead_s > 0.0) device.recv_overhead_s = link.recv_overhead_s;
  if (link.message_cpu_s > 0.0 || link.message_cpu_s_per_byte > 0.0) {  // else the cluster's
    device.message_cpu_s = link.message_cpu_s;
    device.message_cpu_s_per_byte = link.message_cpu_s_per_byte;
  }
  const double latency_s = std::max(0.0, link.latency_s - device.send_overhead_s);
  std::vector<ClusterLevel> levels = cluster.levels();
  for (ClusterLevel& level : levels) {
    level.latency_s = latency_s;
    level.bandwidth_bytes_per_s = link.bandwidth_bytes_per_s;
  }
  Fabric fabric = cluster.fabric();
  fabric.latency_s = latency_s;
  fabric.bandwidth_bytes_per_s = link.bandwidth_bytes_per_s;
  return Cluster(cluster.name(), cluster.description(), device, levels, cluster.source_path(), fabric);
}

Cluster with_all_reduce_overhead(const Cluster& cluster, const AllReduceOverhead& overhead) {
  DeviceSpec device = cluster.device();
  device.all_reduce_overhead_s = overhead.overhead_s;
  device.all_reduce_s_per_byte = overhead.s_per_byte;
  return cluster.with_device(device);
}

Cluster with_probe(const Cluster& cluster, const nlohmann::json& probe, const std::string& path) {
  const Cluster linked = with_probed_link(cluster, probed_link(probe, path));
  const std::optional<AllReduceOverhead> overhead = probed_all_reduce_overhead(probe, path);
  return overhead ? with_all_reduce_overhead(linked, *overhead) : linked;
}

Cluster calibrated_network(const Cluster& cluster, const Calibration& calibration) {
  DeviceSpec device = cluster.device();
  device.action_overhead_s = calibration.action_overhead_s;
  if (calibration.runtime_memory_bytes >= 0.0) device.runtime_memory_bytes = calibration.runtime_memory_bytes;
  if (calibration.send_samples > 0) device.send_overhead_s = calibration.send_overhead_s;  // else the cluster's (a probe's)
  if (calibration.recv_samples > 0) device.recv_overhead_s = calibration.recv_overhead_s;
  if (calibration.message_cpu_samples > 0) {  // the probe's line through the run's figure, else that figure alone
    const double probed_s = device.message_cpu_s + calibration.message_cpu_bytes * device.message_cpu_s_per_byte;
    if (probed_s > 0.0) {
      device.message_cpu_s *= calibration.message_cpu_s / probed_s;
      device.message_cpu_s_per_byte *= calibration.message_cpu_s / probed_s;
    } else {
      device.message_cpu_s = calibration.message_cpu_s;
      device.message_cpu_s_per_byte = 0.0;
    }
  }
  std::vector<ClusterLevel> levels = cluster.levels();
  for (ClusterLevel& level : levels) {
    if (calibration.transfer_samples > 0) level.latency_s = calibration.message_overhead_s;
    if (calibration.bandwidth_bytes_per_s > 0) level.bandwidth_bytes_per_s = calibration.bandwidth_bytes_per_s;
  }
  Fabric fabric = cluster.fabric();
  if (calibration.bandwidth_bytes_per_s > 0) fabric.bandwidth_bytes_per_s = calibration.bandwidth_bytes_per_s;
  if (calibration.transfer_samples > 0) fabric.latency_s = calibration.message_overhead_s;
  return Cluster(cluster.name() + "-calibrated", "calibrated from a measured trace: " + cluster.description(), device,
                 levels, cluster.source_path(), fabric);
}

Cluster calibrated_cluster(const Cluster& cluster, const Calibration& calibration) {
  const Cluster network = calibrated_network(cluster, calibration);
  DeviceSpec device = network.device();
  device.speed = 1.0 / calibration.compute_scale;
  device.worker_speed_factors.assign(cluster.worker_count(), 1.0);
  for (std::size_t w = 0; w < calibration.worker_compute_scale.size() && w < device.worker_speed_factors.size(); ++w) {
    const double k = calibration.worker_compute_scale[w];
    if (k > 0.0) device.worker_speed_factors[w] = calibration.compute_scale / k;  // speed x factor = 1 / k
  }
  return network.with_device(device);
}

Cluster calibrated_efficiency_cluster(const Cluster& cluster, const Calibration& calibration) {
  const DeviceSpec& given = cluster.device();
  if (!(given.peak_flops > 0.0)) {
    throw Error({cluster.source_path(), 0, "device.peak_flops"},
                "the GEMM efficiency is fitted against the device's peak, and this device gives none",
                "give the device's peak_flops (the cluster pipetwin model used), or calibrate its speed without --fit-efficiency");
  }
  const double efficiency = given.matmul_efficiency / calibration.compute_scale;
  if (!(efficiency <= 1.0)) {
    throw Error({cluster.source_path(), 0, "device.matmul_efficiency"},
                "the run computed faster than the device's peak allows (fitted efficiency " + std::to_string(efficiency) + ")",
                "check device.peak_flops, and that the plan is of the profile pipetwin model wrote for this device");
  }
  const Cluster calibrated = calibrated_cluster(cluster, calibration);
  DeviceSpec device = calibrated.device();
  device.matmul_efficiency = efficiency;
  device.speed = given.speed;
  return calibrated.with_device(device);
}

}  // namespace pipetwin
