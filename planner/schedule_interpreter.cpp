#include "planner/schedule_interpreter.h"

namespace pipetwin {

void interpret(const std::vector<Action>& actions, ScheduleRuntime& runtime, const ActionRecorder& record) {
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
        runtime.compute(action);
        break;
    }
    record(action, start_s, runtime.now_s());
    if (i + 1 == actions.size() || actions[i + 1].iteration != action.iteration) runtime.end_of_iteration(action.iteration);
  }
}

}  // namespace pipetwin
