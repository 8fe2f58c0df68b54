// ActionKind — what one action of a worker's list does (schedule.h's Action; its text form is there).
// Alone here so the stage times (stage_times.h) can name the kinds without the whole schedule IR.
#pragma once

#include <cstdint>

namespace pipetwin {

enum class ActionKind : std::uint8_t {
  FORWARD,
  BACKWARD,         // full backward
  BACKWARD_INPUT,   // gradient w.r.t. the stage's input only (zero-bubble schedules)
  BACKWARD_WEIGHT,  // gradient w.r.t. the stage's weights only
  SEND_ACT,
  RECV_ACT,
  SEND_GRAD,
  RECV_GRAD,
  ALLREDUCE,        // gradients of a replicated stage, over its replicas
  OPTIMIZER_STEP,
  RECOMPUTE,        // the forward again, with its graph, before the backward of a recomputing stage
  TENSOR_ALLREDUCE, // the tensor-parallel sums of the pass just before it (same stage and microbatch; after
                    // an overlapped pair, of each pass of the pair in turn) among the worker's t GPUs:
                    // shape.tensor_sums says how many and how large (tensor_sums.h); bytes: all of them
};

}  // namespace pipetwin
