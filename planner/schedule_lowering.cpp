#include "planner/schedule_lowering.h"

namespace pipetwin {
namespace {

Action message(const Action& compute, ActionKind kind, int peer, double bytes) {
  Action action;
  action.stage = compute.stage;
  action.kind = kind;
  action.microbatch = compute.microbatch;
  action.peer = peer;
  action.bytes = bytes;
  return action;
}

}  // namespace

Schedule lower_schedule(const Schedule& compute_only) {
  Schedule lowered = compute_only;
  const PipelineShape& shape = compute_only.shape;
  const int last = shape.stages() - 1;
  for (int w = 0; w < static_cast<int>(compute_only.workers.size()); ++w) {
    std::vector<Action>& out = lowered.workers[w];
    out.clear();
    for (const Action& action : compute_only.workers[w]) {
      const int s = action.stage, b = action.microbatch;
      if (action.kind == ActionKind::FORWARD) {
        if (s > 0 && shape.worker_of(s - 1, b) != w) {
          out.push_back(message(action, ActionKind::RECV_ACT, shape.worker_of(s - 1, b), shape.output_bytes[s - 1]));
        }
        out.push_back(action);
        if (s < last && shape.worker_of(s + 1, b) != w) {
          out.push_back(message(action, ActionKind::SEND_ACT, shape.worker_of(s + 1, b), shape.output_bytes[s]));
        }
      } else if (is_backward(action.kind)) {
        if (s < last && shape.worker_of(s + 1, b) != w) {
          out.push_back(message(action, ActionKind::RECV_GRAD, shape.worker_of(s + 1, b), shape.output_bytes[s]));
        }
        out.push_back(action);
        if (s > 0 && shape.worker_of(s - 1, b) != w) {
          out.push_back(message(action, ActionKind::SEND_GRAD, shape.worker_of(s - 1, b), shape.output_bytes[s - 1]));
        }
      } else if (action.kind == ActionKind::OPTIMIZER_STEP && shape.replicas(s) > 1) {
        Action all_reduce = action;
        all_reduce.kind = ActionKind::ALLREDUCE;
        all_reduce.bytes = shape.param_bytes[s];
        out.push_back(all_reduce);
        out.push_back(action);
      } else {
        out.push_back(action);
      }
    }
  }
  return lowered;
}

}  // namespace pipetwin
