// StageTimes — one stage's pass times, and the one place an action kind is mapped to its duration.
// The evaluator runs a schedule with them (schedule_evaluator.h); the zero-bubble generators lay
// their lists out by them (PipelineShape::pass_times).
#pragma once

#include "planner/action_kind.h"
#include "planner/tensor_sums.h"

namespace pipetwin {

struct StageTimes {
  double forward_s = 0.0;
  double backward_s = 0.0;         // full backward
  double backward_input_s = 0.0;   // split backward, input part
  double backward_weight_s = 0.0;  // split backward, weight part
  double optimizer_s = 0.0;
  double compute_share = 1.0;      // weight when workers share a machine's compute (the simulator's)
  double recompute_s = 0.0;        // RECOMPUTE: the forward again before a backward
  TensorSums sums;                 // the passes' tensor-parallel sums (TENSOR_ALLREDUCE), not in the times above

  // The one place an action kind is mapped to its duration: F, B, I, W, R and OPT; 0 for the others.
  double seconds(ActionKind kind) const {
    switch (kind) {
      case ActionKind::FORWARD: return forward_s;
      case ActionKind::BACKWARD: return backward_s;
      case ActionKind::BACKWARD_INPUT: return backward_input_s;
      case ActionKind::BACKWARD_WEIGHT: return backward_weight_s;
      case ActionKind::RECOMPUTE: return recompute_s;
      case ActionKind::OPTIMIZER_STEP: return optimizer_s;
      default: return 0.0;
    }
  }
};

}  // namespace pipetwin
