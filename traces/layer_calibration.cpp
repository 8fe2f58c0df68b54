#include "traces/layer_calibration.h"

#include <algorithm>
#include <array>
#include <set>

#include "planner/error.h"
#include "planner/schedule_evaluator.h"
#include "traces/calibration.h"
#include "traces/prediction_accuracy.h"

namespace pipetwin {
namespace {

constexpr std::array<ActionKind, 5> kTimedKinds = {ActionKind::FORWARD, ActionKind::BACKWARD, ActionKind::BACKWARD_INPUT,
                                                   ActionKind::BACKWARD_WEIGHT, ActionKind::OPTIMIZER_STEP};

int kind_slot(ActionKind kind) {
  for (std::size_t k = 0; k < kTimedKinds.size(); ++k) {
    if (kTimedKinds[k] == kind) return static_cast<int>(k);
  }
  return -1;
}

// measured / profiled, 1 when either is missing.
double ratio(double measured_s, double profiled_s) {
  return measured_s > 0.0 && profiled_s > 0.0 ? measured_s / profiled_s : 1.0;
}

}  // namespace

std::vector<double> compute_overlap(const Trace& trace) {
  std::map<int, std::vector<std::pair<double, double>>> intervals;  // worker -> its compute intervals
  for (const TraceEvent& e : trace.events) {
    if (is_compute(e.kind)) intervals[e.worker].emplace_back(e.start_s, e.end_s);
  }
  // A worker computes one thing at a time: sorted by start, its intervals' ends rise too.
  for (auto& [worker, list] : intervals) std::sort(list.begin(), list.end());
  std::vector<double> overlap(trace.events.size(), 0.0);
  for (std::size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    const double duration = e.end_s - e.start_s;
    if (!is_compute(e.kind) || duration <= 0.0) continue;
    std::vector<std::pair<double, double>> others;  // other workers' compute, clipped to this event
    for (const auto& [worker, list] : intervals) {
      if (worker == e.worker) continue;
      auto it = std::partition_point(list.begin(), list.end(), [&](const auto& interval) { return interval.second <= e.start_s; });
      for (; it != list.end() && it->first < e.end_s; ++it) {
        others.emplace_back(std::max(it->first, e.start_s), std::min(it->second, e.end_s));
      }
    }
    std::sort(others.begin(), others.end());
    double covered = 0.0, reach = e.start_s;  // union of the clipped intervals
    for (const auto& [start, end] : others) {
      if (end <= reach) continue;
      covered += end - std::max(start, reach);
      reach = end;
    }
    overlap[i] = covered / duration;
  }
  return overlap;
}

namespace {

struct Sample {
  double duration_s, overlap;
};

// The contended rate x of one stage: y = d (1 - phi) against w = d phi, within each kind, slope -x.
double contended_rate(const std::array<std::vector<Sample>, kTimedKinds.size()>& samples) {
  double sxy = 0.0, sww = 0.0;
  for (const auto& kind : samples) {
    if (kind.size() < 2) continue;
    double mean_y = 0.0, mean_w = 0.0;
    for (const Sample& x : kind) {
      mean_y += x.duration_s * (1.0 - x.overlap) / kind.size();
      mean_w += x.duration_s * x.overlap / kind.size();
    }
    for (const Sample& x : kind) {
      const double w = x.duration_s * x.overlap - mean_w;
      sxy += (x.duration_s * (1.0 - x.overlap) - mean_y) * w;
      sww += w * w;
    }
  }
  if (!(sww > 0.0)) return 1.0;
  return std::clamp(-sxy / sww, 0.05, 1.0);
}

// An event's alone time at contended rate x: a = d (1 - phi) + x d phi.
double alone_of(const Sample& s, double x) { return s.duration_s * (1.0 - s.overlap) + x * s.duration_s * s.overlap; }

// Mean alone time of one kind's events at contended rate x (0: none).
double alone_s(const std::vector<Sample>& samples, double x) {
  if (samples.empty()) return 0.0;
  double sum = 0.0;
  for (const Sample& s : samples) sum += alone_of(s, x);
  return sum / samples.size();
}

// Median alone time of a list of events at contended rate x (0: none): one slow step in a few (a
// hiccup of the machine) does not set the cost of every step.
double median_alone_s(const std::vector<Sample>& samples, double x) {
  if (samples.empty()) return 0.0;
  std::vector<double> alone;
  for (const Sample& s : samples) alone.push_back(alone_of(s, x));
  return median_of(alone);
}

// The optimizer step as a fixed part and a part per parameter byte: the least-squares line through the
// stages' {bytes, seconds} when they differ in bytes and neither its fixed part nor its slope is
// negative; else through zero (the stages' seconds over their bytes).
void fit_optimizer_step(const std::vector<std::pair<double, double>>& steps, LayerCalibration& result) {
  double bytes = 0.0, seconds = 0.0;
  for (const auto& [b, s] : steps) bytes += b, seconds += s;
  if (bytes <= 0.0) return;
  result.optimizer_s_per_param_byte = seconds / bytes;
  result.optimizer_fixed_s = 0.0;
  const double n = static_cast<double>(steps.size()), mean_bytes = bytes / n, mean_s = seconds / n;
  double covariance = 0.0, variance = 0.0;
  for (const auto& [b, s] : steps) covariance += (b - mean_bytes) * (s - mean_s), variance += (b - mean_bytes) * (b - mean_bytes);
  if (variance <= 0.0) return;
  const double per_byte = covariance / variance, fixed = mean_s - per_byte * mean_bytes;
  if (per_byte < 0.0 || fixed < 0.0) return;
  result.optimizer_s_per_param_byte = per_byte;
  result.optimizer_fixed_s = fixed;
}

}  // namespace

LayerCalibration calibrate_layers(const Trace& whole, const Plan& plan, bool shared_machine) {
  check_trace_matches_plan(whole, plan);
  std::set<int> typical;  // the iterations calibrate() uses
  for (const TraceEvent& e : typical_iterations(whole).events) typical.insert(e.iteration);
  const std::vector<double> overlap = compute_overlap(whole);
  const std::size_t stages = plan.stages.size();
  std::vector<std::array<std::vector<Sample>, kTimedKinds.size()>> samples(stages);
  std::map<int, std::set<int>> worker_stages;
  // Each stage's optimizer steps after the warm-up, every iteration (one step an iteration at most for
  // most schedules: the typical iterations alone would give two or three).
  std::vector<std::vector<Sample>> steps(stages);
  for (std::size_t i = 0; i < whole.events.size(); ++i) {
    const TraceEvent& e = whole.events[i];
    if (e.stage < 0 || e.stage >= static_cast<int>(stages)) continue;
    const Sample sample{e.end_s - e.start_s, shared_machine ? overlap[i] : 0.0};
    if (e.kind == ActionKind::OPTIMIZER_STEP && e.iteration >= whole.header.warmup_iterations) steps[e.stage].push_back(sample);
    const int slot = kind_slot(e.kind);
    if (slot < 0 || !typical.count(e.iteration)) continue;
    samples[e.stage][slot].push_back(sample);
    worker_stages[e.worker].insert(e.stage);
  }
  LayerCalibration result;
  result.profile_name = plan.profile_name;
  const std::vector<StageTimes> profiled = stage_times_from_plan(plan);
  std::vector<std::pair<double, double>> optimizer_steps;  // {parameter bytes, alone seconds} per stage
  bool any_compute = false;
  for (std::size_t s = 0; s < stages; ++s) {
    const double x = shared_machine ? contended_rate(samples[s]) : 1.0;
    result.stage_contended_rate.push_back(x);
    auto mean = [&](ActionKind kind) { return alone_s(samples[s][kind_slot(kind)], x); };
    const StageTimes& p = profiled[s];
    const double forward = mean(ActionKind::FORWARD), backward = mean(ActionKind::BACKWARD);
    const double input = mean(ActionKind::BACKWARD_INPUT), weight = mean(ActionKind::BACKWARD_WEIGHT);
    any_compute = any_compute || forward > 0.0;
    LayerScale scale;
    scale.forward = ratio(forward, p.forward_s);
    if (backward > 0.0) {  // a full backward: one ratio for every part
      // The profiled split is kept: with the allocator the runs use (exec/allocator.h), the profiler's
      // I + W against B matches the runs' (VGG-16: 0.96 profiled, ZB-H1's I + W / GPipe's B 1.09 run;
      // GPT: 1.52 profiled, 1.58 run).
      scale.backward = scale.backward_input = scale.backward_weight = ratio(backward, p.backward_s);
    } else if (input > 0.0 || weight > 0.0) {
      scale.backward_input = ratio(input, p.backward_input_s);
      scale.backward_weight = ratio(weight, p.backward_weight_s);
      scale.backward = ratio(input + weight, p.backward_input_s + p.backward_weight_s);
    }
    scale.compute_share = x;
    for (const std::string& id : plan.stages[s].layer_ids) result.layers[id] = scale;
    const double step = median_alone_s(steps[s], x);
    if (step > 0.0 && plan.stages[s].param_bytes > 0.0) optimizer_steps.emplace_back(plan.stages[s].param_bytes, step);
  }
  if (!any_compute) {
    throw Error({"", 0, "trace"}, "the measured trace has no forward of the plan's stages",
                "calibrate with the trace of a run of this plan");
  }
  fit_optimizer_step(optimizer_steps, result);
  if (shared_machine) {
    for (const auto& [worker, held] : worker_stages) {
      double x = 0.0;
      for (int s : held) x += result.stage_contended_rate[s] / held.size();
      result.shared_compute += x;
    }
  }
  return result;
}

Profile calibrated_profile(const Profile& profile, const LayerCalibration& calibration) {
  std::vector<Layer> layers = profile.layers();
  for (Layer& layer : layers) {
    const auto it = calibration.layers.find(layer.id);
    if (it == calibration.layers.end()) {
      if (layer.fwd_ms == 0.0 && layer.bwd_ms == 0.0) continue;  // nothing to scale
      throw Error({profile.source_path(), 0, "layers." + layer.id},
                  "layer '" + layer.id + "' is not in the calibration (calibrated on '" + calibration.profile_name + "')",
                  "calibrate with a run of this model ('" + profile.name() + "')");
    }
    const LayerScale& scale = it->second;
    if (calibration.shared_compute > 0.0) layer.compute_share = scale.compute_share;
    layer.fwd_ms *= scale.forward;
    layer.bwd_ms *= scale.backward;
    if (layer.bwd_input_ms) *layer.bwd_input_ms *= scale.backward_input;
    if (layer.bwd_weight_ms) *layer.bwd_weight_ms *= scale.backward_weight;
  }
  return Profile(profile.name(), profile.batch_size(), layers, profile.edges(), profile.source_path());
}

Plan with_optimizer_steps(const Plan& plan, const LayerCalibration& calibration) {
  Plan result = plan;
  for (PlanStage& stage : result.stages) {
    stage.optimizer_s = stage.param_bytes > 0.0
                            ? calibration.optimizer_fixed_s + stage.param_bytes * calibration.optimizer_s_per_param_byte
                            : 0.0;
  }
  return result;
}

nlohmann::json layer_calibration_to_json(const LayerCalibration& calibration) {
  nlohmann::json layers = nlohmann::json::object();
  for (const auto& [id, scale] : calibration.layers) {
    layers[id] = {{"forward", scale.forward},
                  {"backward", scale.backward},
                  {"backward_input", scale.backward_input},
                  {"backward_weight", scale.backward_weight},
                  {"compute_share", scale.compute_share}};
  }
  return {{"profile", calibration.profile_name},
          {"optimizer_fixed_s", calibration.optimizer_fixed_s},
          {"optimizer_s_per_param_byte", calibration.optimizer_s_per_param_byte},
          {"shared_compute", calibration.shared_compute},
          {"stage_contended_rate", calibration.stage_contended_rate},
          {"layers", layers}};
}

}  // namespace pipetwin
