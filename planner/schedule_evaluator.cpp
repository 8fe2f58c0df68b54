#include "planner/schedule_evaluator.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace pipetwin {
namespace {


}  // namespace

std::vector<StageTimes> uniform_stage_times(int stages, double forward_s, double backward_s) {
  return std::vector<StageTimes>(stages, StageTimes{forward_s, backward_s, backward_s / 2, backward_s / 2, 0.0, 1.0});
}

std::vector<StageTimes> stage_times_from_plan(const Plan& plan) {
  std::vector<StageTimes> result;
  for (const PlanStage& stage : plan.stages) {
    StageTimes times;
    times.forward_s = stage.forward_s;
    times.backward_s = stage.backward_s;
    const bool both_parts = stage.backward_weight_s > 0;  // profiled I and W (I may be 0: the first stage's input)
    const bool input_part = both_parts || stage.backward_input_s > 0;
    times.backward_input_s = input_part ? stage.backward_input_s : stage.backward_s / 2;
    times.backward_weight_s = both_parts   ? stage.backward_weight_s
                              : input_part ? stage.backward_s - times.backward_input_s
                                           : stage.backward_s / 2;
    times.optimizer_s = stage.optimizer_s;
    times.compute_share = stage.compute_share;
    times.recompute_s = stage.recompute_s;
    if (stage.tensor_sums.ranks > 1) {  // the sums run as TENSOR_ALLREDUCE actions of their own
      times.sums = stage.tensor_sums;
      times.forward_s = std::max(0.0, times.forward_s - stage.tensor_sums.forward.paper_s);
      times.backward_s = std::max(0.0, times.backward_s - stage.tensor_sums.backward.paper_s);
      if (input_part) times.backward_input_s = std::max(0.0, times.backward_input_s - stage.tensor_sums.backward.paper_s);
      times.recompute_s = std::max(0.0, times.recompute_s - stage.tensor_sums.recompute.paper_s);
    }
    result.push_back(times);
  }
  return result;
}

Evaluation evaluate_schedule(const Schedule& schedule, const std::vector<StageTimes>& stage_times,
                             const CommunicationCost& communication) {
  const int workers = static_cast<int>(schedule.workers.size());
  Evaluation result;
  result.timings.resize(workers);
  result.compute_busy_s.assign(workers, 0.0);
  for (int w = 0; w < workers; ++w) result.timings[w].resize(schedule.workers[w].size());
  std::vector<std::size_t> next(workers, 0);
  std::vector<double> clock(workers, 0.0);
  std::unordered_map<int, double> arrival;  // message id -> when the sent message is available to its receiver
  std::size_t actions = 0;
  for (const auto& list : schedule.workers) actions += list.size();
  arrival.reserve(actions / 4 + 1);
  // All-reduces: per id, how many members arrived, when, and the end.
  struct Collective {
    int arrived = 0;
    double latest_s = 0.0;
    double end_s = -1.0;
  };
  std::unordered_map<int, Collective> collectives;
  std::vector<bool> registered(workers, false);  // this worker's arrival at its current ALLREDUCE is counted
  auto transfer_s = [&](double bytes) {
    return communication.latency_s +
           (std::isinf(communication.bandwidth_bytes_per_s) ? 0.0 : bytes / communication.bandwidth_bytes_per_s);
  };
  bool progress = true;
  while (progress) {
    progress = false;
    for (int w = 0; w < workers; ++w) {
      const auto& actions = schedule.workers[w];
      while (next[w] < actions.size()) {
        const Action& action = actions[next[w]];
        double start = clock[w], end = clock[w];
        if (is_send(action.kind)) {
          arrival[action.message] = clock[w] + transfer_s(action.bytes);
        } else if (is_receive(action.kind)) {
          auto it = arrival.find(action.message);
          if (it == arrival.end()) break;
          end = std::max(clock[w], it->second);
        } else if (action.kind == ActionKind::ALLREDUCE) {
          Collective& collective = collectives[action.message];
          const int group = schedule.shape.replicas(action.stage);
          if (!registered[w]) {
            registered[w] = true;
            ++collective.arrived;
            collective.latest_s = std::max(collective.latest_s, clock[w]);
            if (collective.arrived == group) {
              collective.end_s = collective.latest_s + communication.ring_allreduce_s(action.bytes, group);
            }
          }
          if (collective.end_s < 0) break;
          start = collective.latest_s;
          end = collective.end_s;
          registered[w] = false;
        } else if (action.kind == ActionKind::TENSOR_ALLREDUCE) {
          const std::optional<ActionKind> pass = summed_pass(actions, next[w]);
          end = start + (pass ? stage_times.at(action.stage).sums.of(*pass).paper_s : 0.0);
        } else {
          const double duration = stage_times.at(action.stage).seconds(action.kind);
          end = start + duration;
          if (is_compute(action.kind)) result.compute_busy_s[w] += duration;
        }
        result.timings[w][next[w]] = {start, end};
        clock[w] = end;
        ++next[w];
        progress = true;
      }
    }
  }
  result.completed = true;
  for (int w = 0; w < workers; ++w) {
    result.makespan_s = std::max(result.makespan_s, clock[w]);
    if (next[w] < schedule.workers[w].size() && result.completed) {
      result.completed = false;
      result.stuck_worker = w;
      result.stuck_index = static_cast<int>(next[w]);
      const Action& action = schedule.workers[w][next[w]];
      if (action.kind == ActionKind::ALLREDUCE) {
        result.stuck_reason = "waits for the other replicas of stage " + std::to_string(action.stage) +
                              " to reach the same all-reduce";
      } else {
        result.stuck_reason = "waits for a message from worker " + std::to_string(action.peer) +
                              " that is never sent before that worker blocks";
      }
    }
  }
  return result;
}

}  // namespace pipetwin
