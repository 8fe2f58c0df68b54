// Stage figures — what a set of layers costs as one stage, the one place layers are summed into a
// stage: forward, backward and its input part, forward FLOPs, parameter and activation bytes.
//
// An input layer's time is data loading, not compute: it counts for bytes only. The input part of the
// backward (zero-bubble schedules) is the sum of the layers' bwd_input_ms when every compute layer
// has one, else 0 (then the schedules split the backward half and half); its weight part likewise the
// sum of bwd_weight_ms (else 0: the backward less its input part), FLOPs likewise. Measured split
// backward parts need not add up to the full backward (two passes cost more than one).
// compute_share is the time-weighted mean of the layers' (see sim: workers sharing a machine's compute).
// Recomputation: the stage recomputes when any of its layers does; its time is the layers' sum, the
// bytes it rebuilds the largest layer's (rebuilt and freed layer by layer, as Megatron does).
// Both the partition optimizer's plan and the balanced plans take their stages from here.
#pragma once

#include <cstddef>
#include <vector>

#include "planner/profile.h"

namespace pipetwin {

struct StageFigures {
  double forward_s = 0.0;
  double backward_s = 0.0;
  double backward_input_s = 0.0;
  double backward_weight_s = 0.0;
  double compute_s = 0.0;  // forward + backward + recomputation
  bool recomputed = false;       // some layer recomputes (recompute_ms): the stage's backwards follow a RECOMPUTE
  double recompute_s = 0.0;      // its layers' recompute_ms
  double recompute_bytes = 0.0;  // the largest layer's recompute_bytes (layers are recomputed one at a time)
  double forward_flops = 0.0;
  double param_bytes = 0.0;
  double activation_bytes = 0.0;  // stashed per in-flight minibatch: its layers' stashed_bytes (default: outputs)
  double output_gradient_bytes = 0.0;  // its layers' outputs summed: a split backward's I leaves their gradients
                                       // for its W (each layer's weights need their output's gradient)
  double optimizer_bytes = 0.0;   // gradients and optimizer state per replica (profile.h optimizer_bytes)
  double compute_share = 1.0;     // its layers' compute_share weighted by their fwd + bwd time (1 if none has one)
  TensorSums tensor_sums;         // its layers' tensor-parallel all-reduces, summed per pass (tensor_sums.h)
};

StageFigures stage_figures(const Profile& profile, const std::vector<std::size_t>& layers);

// Writes the figures into a stage record with fields of the same names (PipelineStage, PlanStage).
template <typename Stage>
void set_stage_figures(Stage& stage, const StageFigures& figures) {
  stage.forward_s = figures.forward_s;
  stage.backward_s = figures.backward_s;
  stage.compute_s = figures.compute_s;
  stage.backward_input_s = figures.backward_input_s;
  stage.backward_weight_s = figures.backward_weight_s;
  stage.forward_flops = figures.forward_flops;
  stage.param_bytes = figures.param_bytes;
  stage.activation_bytes = figures.activation_bytes;
  stage.output_gradient_bytes = figures.output_gradient_bytes;
  stage.optimizer_bytes = figures.optimizer_bytes;
  stage.compute_share = figures.compute_share;
  stage.recomputed = figures.recomputed;
  stage.recompute_s = figures.recompute_s;
  stage.recompute_bytes = figures.recompute_bytes;
  stage.tensor_sums = figures.tensor_sums;
}

}  // namespace pipetwin
