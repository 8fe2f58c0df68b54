// Layer calibration — compute corrections that survive a new partition. calibrate() fits constants of
// one plan's stages; these are kept per layer of the profile instead, so a different cut of the same
// model, another replica or microbatch count or schedule is predicted with them:
//  - each layer's forward, backward, backward-input and backward-weight times are scaled by the
//    ratio measured / profiled of the stage it ran in (the mean duration of the stage's FORWARD,
//    BACKWARD, BACKWARD_INPUT or BACKWARD_WEIGHT events in the typical iterations, over the plan's
//    stage time; a run with a full backward gives its one ratio to all three backward parts (the
//    profiled cost of splitting is kept), a run with a split backward gives B the ratio of I + W);
//  - the optimizer step costs a fixed part and seconds per byte of parameters, one line for the whole
//    model (least squares over the stages' alone steps, each the median over every iteration after the
//    warm-up, against their parameter bytes; through
//    zero, the sum of the steps over the sum of the bytes, when the stages hold equal bytes or the
//    line would be negative). A small stage's step is mostly the fixed part (VGG's first stage: 0.2-0.3
//    ms for a few hundred KB).
// With `shared_machine` (every worker of the trace on one machine, sharing its compute), each compute
// event's duration d is split by its overlap: the fraction phi of it during which another worker
// computed too. Running alone it progresses at rate 1, overlapped at the stage's contended rate x, so
// its alone time is a = d (1 - phi) + x d phi. Per stage, x and one a per kind are fitted by least
// squares (a_kind - x d phi = d (1 - phi), regressed within each kind; x in [0.05, 1]; without
// variation in overlap x = 1 and a is the mean). The layers get the alone ratios and compute_share x,
// and the machine's shared_compute is the sum of x over the workers (their total rate when all compute),
// which the simulator's shared compute reproduces (cluster.h).
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
  double compute_share = 1.0;  // contended rate of its stage (shared machine), else 1
};

struct LayerCalibration {
  std::string profile_name;
  std::map<std::string, LayerScale> layers;  // by layer id: the layers the measured run held
  double optimizer_fixed_s = 0.0;            // per step of a stage with parameters
  double optimizer_s_per_param_byte = 0.0;   // 0 and 0: no optimizer step measured
  double shared_compute = 0.0;               // the machine's total rate (workers' worth); 0: not fitted
  std::vector<double> stage_contended_rate;  // per stage of the measured plan: x (1: not fitted)
};

// From a measured trace of `plan` (refused, naming both, when the trace is of another model or cut).
LayerCalibration calibrate_layers(const Trace& measured, const Plan& plan, bool shared_machine = false);

// Fraction of each event's duration during which another worker ran a compute event (0 for events
// that are not compute), in the trace's event order.
std::vector<double> compute_overlap(const Trace& trace);

// The profile with every layer's times scaled; throws Error naming the layer when the profile has a
// layer the calibration does not know (another model).
Profile calibrated_profile(const Profile& profile, const LayerCalibration& calibration);

// The plan with each stage's optimizer step at the calibrated cost of its parameters (none without).
Plan with_optimizer_steps(const Plan& plan, const LayerCalibration& calibration);

nlohmann::json layer_calibration_to_json(const LayerCalibration& calibration);

}  // namespace pipetwin
