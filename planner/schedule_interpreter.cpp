#include "planner/schedule_interpreter.h"

#include <map>

namespace pipetwin {

void interpret(const std::vector<Action>& actions, ScheduleRuntime& runtime, const ActionRecorder& record) {
  // Where each iteration's last action is: without a flush, iterations interleave on a worker.
  std::map<int, std::size_t> last_of_iteration;
  for (std::size_t i = 0; i < actions.size(); ++i) last_of_iteration[actions[i].iteration] = i;
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const Action& action = actions[i];
    runtime.before_action(action);
    const double start_s = runtime.now_s();
    switch (action.kind) {
      case ActionKind::SEND_ACT:
      case ActionKind::SEND_GRAD:
        runtime.send(action);
        break;
      case ActionKind::RECV_ACT:
      case ActionKind::RECV_GRAD:
        runtime.receive(action);
        break;
      case ActionKind::ALLREDUCE:
        runtime.all_reduce(action);
        break;
      case ActionKind::OPTIMIZER_STEP:
        runtime.optimizer_step(action);
        break;
      case ActionKind::FORWARD:
      case ActionKind::BACKWARD:
      case ActionKind::BACKWARD_INPUT:
      case ActionKind::BACKWARD_WEIGHT:
      case ActionKind::RECOMPUTE:
        runtime.compute(action);
        break;
      case ActionKind::TENSOR_ALLREDUCE:
        runtime.tensor_all_reduce(action, summed_pass(actions, i).value_or(ActionKind::FORWARD));
        break;
    }
    record(action, start_s, runtime.now_s());
    if (last_of_iteration[action.iteration] == i) runtime.end_of_iteration(action.iteration);
  }
}

}  // namespace pipetwin
