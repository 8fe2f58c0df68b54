#include "traces/layer_calibration.h"

#include <array>

#include "planner/error.h"
#include "planner/schedule_evaluator.h"
#include "traces/calibration.h"

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

LayerCalibration calibrate_layers(const Trace& whole, const Plan& plan) {
  check_trace_matches_plan(whole, plan);
  const Trace measured = typical_iterations(whole);
  const std::size_t stages = plan.stages.size();
  // Per stage and timed kind: (seconds, count) over every worker of the stage.
  std::vector<std::array<std::pair<double, int>, kTimedKinds.size()>> sums(stages);
  for (const TraceEvent& e : measured.events) {
    const int slot = kind_slot(e.kind);
    if (slot < 0 || e.stage < 0 || e.stage >= static_cast<int>(stages)) continue;
    sums[e.stage][slot].first += e.end_s - e.start_s;
    ++sums[e.stage][slot].second;
  }
  auto mean_s = [&](std::size_t s, ActionKind kind) {
    const auto& [seconds, count] = sums[s][kind_slot(kind)];
    return count > 0 ? seconds / count : 0.0;
  };
  LayerCalibration result;
  result.profile_name = plan.profile_name;
  const std::vector<StageTimes> profiled = stage_times_from_plan(plan);
  double optimizer_s = 0.0, optimizer_param_bytes = 0.0;
  bool any_compute = false;
  for (std::size_t s = 0; s < stages; ++s) {
    const StageTimes& p = profiled[s];
    const double forward = mean_s(s, ActionKind::FORWARD), backward = mean_s(s, ActionKind::BACKWARD);
    const double input = mean_s(s, ActionKind::BACKWARD_INPUT), weight = mean_s(s, ActionKind::BACKWARD_WEIGHT);
    any_compute = any_compute || forward > 0.0;
    LayerScale scale;
    scale.forward = ratio(forward, p.forward_s);
    if (backward > 0.0) {  // a full backward: one ratio for every part
      scale.backward = scale.backward_input = scale.backward_weight = ratio(backward, p.backward_s);
    } else if (input > 0.0 || weight > 0.0) {
      scale.backward_input = ratio(input, p.backward_input_s);
      scale.backward_weight = ratio(weight, p.backward_weight_s);
      scale.backward = ratio(input + weight, p.backward_input_s + p.backward_weight_s);
    }
    for (const std::string& id : plan.stages[s].layer_ids) result.layers[id] = scale;
    const double step = mean_s(s, ActionKind::OPTIMIZER_STEP);
    if (step > 0.0 && plan.stages[s].param_bytes > 0.0) {
      optimizer_s += step;
      optimizer_param_bytes += plan.stages[s].param_bytes;
    }
  }
  if (!any_compute) {
    throw Error({"", 0, "trace"}, "the measured trace has no forward of the plan's stages",
                "calibrate with the trace of a run of this plan");
  }
  if (optimizer_param_bytes > 0.0) result.optimizer_s_per_param_byte = optimizer_s / optimizer_param_bytes;
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
    layer.fwd_ms *= scale.forward;
    layer.bwd_ms *= scale.backward;
    if (layer.bwd_input_ms) *layer.bwd_input_ms *= scale.backward_input;
    if (layer.bwd_weight_ms) *layer.bwd_weight_ms *= scale.backward_weight;
  }
  return Profile(profile.name(), profile.batch_size(), layers, profile.edges(), profile.source_path());
}

Plan with_optimizer_steps(const Plan& plan, const LayerCalibration& calibration) {
  Plan result = plan;
  for (PlanStage& stage : result.stages) stage.optimizer_s = stage.param_bytes * calibration.optimizer_s_per_param_byte;
  return result;
}

nlohmann::json layer_calibration_to_json(const LayerCalibration& calibration) {
  nlohmann::json layers = nlohmann::json::object();
  for (const auto& [id, scale] : calibration.layers) {
    layers[id] = {{"forward", scale.forward},
                  {"backward", scale.backward},
                  {"backward_input", scale.backward_input},
                  {"backward_weight", scale.backward_weight}};
  }
  return {{"profile", calibration.profile_name},
          {"optimizer_s_per_param_byte", calibration.optimizer_s_per_param_byte},
          {"layers", layers}};
}

}  // namespace pipetwin
