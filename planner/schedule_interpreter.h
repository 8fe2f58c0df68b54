// Schedule interpreter — the one loop both back ends run: a worker's actions, in order, each handed
// to the runtime that can do it (SimGrid actors in sim/, libtorch + c10d in exec/), each recorded
// with its start and end on the runtime's clock.
//
// A runtime only says how to do one action of each kind; the order, the iteration boundaries and
// what gets recorded are decided here, from the schedule alone. Exceptions from the runtime
// propagate unchanged.
#pragma once

#include <functional>
#include <vector>

#include "planner/schedule.h"

namespace pipetwin {

class ScheduleRuntime {
 public:
  virtual ~ScheduleRuntime() = default;
  virtual double now_s() = 0;                           // the clock events are recorded on
  virtual void before_action(const Action&) {}          // the runtime's own time between actions
  virtual void compute(const Action& action) = 0;       // FORWARD, BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT, RECOMPUTE
  virtual void send(const Action& action) = 0;          // SEND_ACT, SEND_GRAD: returns once posted
  virtual void receive(const Action& action) = 0;       // RECV_ACT, RECV_GRAD: returns once the message is here
  virtual void all_reduce(const Action& action) = 0;    // ALLREDUCE
  virtual void optimizer_step(const Action& action) = 0;  // OPTIMIZER_STEP
  // TENSOR_ALLREDUCE: the sums of a pass of `pass`'s kind (summed_pass) among the worker's tensor-parallel group.
  virtual void tensor_all_reduce(const Action& action, ActionKind pass) = 0;
  virtual void end_of_iteration(int /*iteration*/) {}   // once per iteration, after the worker's last action of it
};

// Called once per executed action, in order: the action, where it started and ended.
using ActionRecorder = std::function<void(const Action& action, double start_s, double end_s)>;

// Runs `actions` (one worker's list of a built schedule) on `runtime`.
void interpret(const std::vector<Action>& actions, ScheduleRuntime& runtime, const ActionRecorder& record);

}  // namespace pipetwin
