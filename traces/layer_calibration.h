// Layer calibration — compute corrections that survive a new partition. calibrate() fits constants of
// one plan's stages; these are kept per layer of the profile instead, so a different cut of the same
// model, another replica or microbatch count or schedule is predicted with them:
//  - each layer's forward, backward, backward-input and backward-weight times are scaled by the
//    ratio measured / profiled of the stage it ran in (the mean duration of the stage's FORWARD,
//    BACKWARD, BACKWARD_INPUT or BACKWARD_WEIGHT events in the typical iterations, over the plan's
//    stage time; a run with a full backward gives its one ratio to all three backward parts, a run
//    with a split backward gives B the ratio of I + W);
//  - the optimizer step costs seconds per byte of parameters, one figure for the whole model
//    (sum of the stages' mean steps over the sum of their parameter bytes).
// The per-stage fits of calibrate() stay as diagnostics. Throws pipetwin::Error.
#pragma once

#include <map>
#include <string>

#include "planner/plan.h"
#include "planner/profile.h"
#include "traces/trace.h"

namespace pipetwin {

struct LayerScale {
  double forward = 1.0, backward = 1.0, backward_input = 1.0, backward_weight = 1.0;  // measured / profiled
};

struct LayerCalibration {
  std::string profile_name;
  std::map<std::string, LayerScale> layers;  // by layer id: the layers the measured run held
  double optimizer_s_per_param_byte = 0.0;   // 0: no optimizer step measured
};

// From a measured trace of `plan` (refused, naming both, when the trace is of another model or cut).
LayerCalibration calibrate_layers(const Trace& measured, const Plan& plan);

// The profile with every layer's times scaled; throws Error naming the layer when the profile has a
// layer the calibration does not know (another model).
Profile calibrated_profile(const Profile& profile, const LayerCalibration& calibration);

// The plan with each stage's optimizer step at the calibrated cost of its parameters.
Plan with_optimizer_steps(const Plan& plan, const LayerCalibration& calibration);

nlohmann::json layer_calibration_to_json(const LayerCalibration& calibration);

}  // namespace pipetwin
