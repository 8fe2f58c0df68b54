#include "planner/zero_bubble_schedules.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <set>
#include <utility>

#include "planner/error.h"

namespace pipetwin {
namespace {

// Chunk activations worker `worker` may hold before it admits a new microbatch.
int admission_limit(const std::string& name, const PipelineShape& shape, int worker) {
  const int p = shape.workers;
  if (name == "interleaved-zb") return 2 * (p - worker - 1) + (shape.chunks - 1) * p + 1;
  return 2 * p;  // zb-v
}

// zb-h1 and zb-h2 on one stage per worker. Each worker keeps 1F1B's order of forwards and input
// backwards (a warm-up of forwards, then one F and one I in turn, then the remaining I's) and runs its
// oldest pending W whenever the next of those cannot run: its input or gradient has not arrived, or a
// forward would hold more microbatches (from F to W) than the budget. With unit times every worker
// ends at the flush bound 3m + p - 1 (tests/test_zero_bubble_schedules.cpp: p = 2..8, m = p..3p + 3).
Schedule one_stage_per_worker_zero_bubble(const std::string& name, const PipelineShape& shape, int microbatches) {
  const int p = shape.stages(), m = microbatches;
  Schedule schedule{name, m, 1, shape, std::vector<std::vector<Action>>(shape.workers)};
  const bool h2 = name == "zb-h2";
  constexpr int kNever = 1 << 30;
  std::vector<std::vector<int>> input_ready(p, std::vector<int>(m, kNever)), grad_ready(p, std::vector<int>(m, kNever));
  for (int b = 0; b < m; ++b) input_ready[0][b] = 0;
  struct StageState {
    std::vector<ActionKind> order;  // F and I in 1F1B's order
    std::size_t next = 0;
    int forwards = 0, inputs = 0, weights = 0, budget = 0;
  };
  std::vector<StageState> states(p);
  for (int s = 0; s < p; ++s) {
    StageState& state = states[s];
    const int warm_up = std::min(m, h2 ? 2 * (p - s - 1) : p - s - 1);
    state.budget = h2 ? 2 * p - 1 : p;
    state.order.assign(warm_up, ActionKind::FORWARD);
    for (int f = warm_up, i = 0; f < m || i < m; ++f, ++i) {
      if (f < m) state.order.push_back(ActionKind::FORWARD);
      if (i < m) state.order.push_back(ActionKind::BACKWARD_INPUT);
    }
  }
  const long long give_up = 8LL * p * m + 64;
  for (int now = 0, finished = 0; finished < p; ++now) {
    if (now > give_up) throw Error({"", 0, "--schedule"}, name + " could not place every action", "report this shape");
    for (int s = 0; s < p; ++s) {
      StageState& state = states[s];
      if (state.weights == m) continue;
      const ActionKind next = state.next < state.order.size() ? state.order[state.next] : ActionKind::BACKWARD_WEIGHT;
      const bool can_forward = next == ActionKind::FORWARD && input_ready[s][state.forwards] <= now &&
                               state.forwards - state.weights < state.budget;
      const bool can_input = next == ActionKind::BACKWARD_INPUT && grad_ready[s][state.inputs] <= now;
      auto& actions = schedule.workers[shape.stage_workers[s][0]];
      if (can_forward) {
        const int b = state.forwards++;
        actions.push_back(compute_action(s, ActionKind::FORWARD, b));
        (s + 1 < p ? input_ready[s + 1][b] : grad_ready[s][b]) = now + 1;
        ++state.next;
      } else if (can_input) {
        const int b = state.inputs++;
        actions.push_back(compute_action(s, ActionKind::BACKWARD_INPUT, b));
        if (s > 0) grad_ready[s - 1][b] = now + 1;
        ++state.next;
      } else if (state.weights < state.inputs) {
        actions.push_back(compute_action(s, ActionKind::BACKWARD_WEIGHT, state.weights++));
        if (state.weights == m) {
          actions.push_back(compute_action(s, ActionKind::OPTIMIZER_STEP, -1));
          ++finished;
        }
      }
    }
  }
  return schedule;
}

}  // namespace

Schedule zero_bubble_schedule(const std::string& name, const PipelineShape& shape, int microbatches) {
  if (name == "zb-h1" || name == "zb-h2") return one_stage_per_worker_zero_bubble(name, shape, microbatches);
  const int stages = shape.stages(), m = microbatches, workers = shape.workers;
  const bool held_to_weight = name == "zb-v";  // interleaved-zb counts to I (see the header)
  Schedule schedule{name, m, 1, shape, std::vector<std::vector<Action>>(workers)};
  constexpr double kNever = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> input_ready(stages, std::vector<double>(m, kNever));  // activation arrives
  std::vector<std::vector<double>> grad_ready(stages, std::vector<double>(m, kNever));   // output gradient arrives
  for (int b = 0; b < m; ++b) input_ready[0][b] = 0.0;
  std::vector<int> next_forward(stages, 0), next_backward(stages, 0);
  struct WorkerState {
    std::vector<int> stages;  // ascending
    int limit = 0, held = 0;
    double free_at = 0.0;
    std::deque<std::pair<int, int>> weight_pending;  // (stage, microbatch)
    bool done = false;
  };
  std::vector<WorkerState> states(workers);
  for (int s = 0; s < stages; ++s) states[shape.stage_workers[s][0]].stages.push_back(s);
  int finished = 0;
  for (int w = 0; w < workers; ++w) {
    if (states[w].stages.empty()) {
      states[w].done = true;
      ++finished;
    } else {
      states[w].limit = std::max(1, admission_limit(name, shape, w));
    }
  }
  // Each pass takes its stage's time (unit times when the shape has none); a worker decides when it is
  // free, and a decision can change only when a worker becomes free (its pass's outputs arrive then).
  // A recomputing stage runs its RECOMPUTE just before the input backward (add_recomputation).
  const auto seconds = [&](int s, ActionKind kind) {
    if (shape.pass_times.empty()) return 1.0;
    const StageTimes& t = shape.pass_times[s];
    return t.seconds(kind) + (kind == ActionKind::BACKWARD_INPUT ? t.seconds(ActionKind::RECOMPUTE) : 0.0);
  };
  std::set<double> decision_times = {0.0};
  const long long give_up = 8LL * stages * m + 64;  // every action ends at one decision time; far more means a fault
  for (long long step = 0; finished < workers; ++step) {
    if (step > give_up || decision_times.empty()) {
      throw Error({"", 0, "--schedule"}, name + " could not place every action", "report this shape");
    }
    const double now = *decision_times.begin();
    decision_times.erase(decision_times.begin());
    for (int w = 0; w < workers; ++w) {
      WorkerState& state = states[w];
      if (state.done || state.free_at > now) continue;
      auto& actions = schedule.workers[w];
      int backward_stage = -1, forward_stage = -1, over_budget_stage = -1;
      for (int s : state.stages) {
        const int b = next_backward[s];
        if (b < next_forward[s] && grad_ready[s][b] <= now &&
            (backward_stage < 0 || b < next_backward[backward_stage] ||
             (b == next_backward[backward_stage] && s > backward_stage))) {
          backward_stage = s;
        }
        const int f = next_forward[s];
        if (f < m && input_ready[s][f] <= now) {
          if (state.held < state.limit) forward_stage = s;  // the deepest wins
          else if (s != state.stages.front()) over_budget_stage = s;
        }
      }
      // An admitted microbatch's deeper forward may exceed the budget, but only when nothing else can run
      // here; under a budget counted to W (zb-v), also only when no other worker is computing (its end
      // could bring this one a gradient, whose I and W free room).
      if (forward_stage < 0 && backward_stage < 0 && state.weight_pending.empty() && over_budget_stage >= 0) {
        const bool others_busy = held_to_weight && std::any_of(states.begin(), states.end(), [&](const WorkerState& other) {
                                   return &other != &state && !other.done && other.free_at > now;
                                 });
        if (!others_busy) forward_stage = over_budget_stage;
      }
      if (backward_stage >= 0) {
        const int s = backward_stage, b = next_backward[s]++;
        actions.push_back(compute_action(s, ActionKind::BACKWARD_INPUT, b));
        state.free_at = now + seconds(s, ActionKind::BACKWARD_INPUT);
        if (s > 0) grad_ready[s - 1][b] = state.free_at;
        state.weight_pending.emplace_back(s, b);
        if (!held_to_weight) --state.held;
      } else if (forward_stage >= 0) {
        const int s = forward_stage, b = next_forward[s]++;
        actions.push_back(compute_action(s, ActionKind::FORWARD, b));
        state.free_at = now + seconds(s, ActionKind::FORWARD);
        if (s + 1 < stages) input_ready[s + 1][b] = state.free_at;
        else grad_ready[s][b] = state.free_at;
        ++state.held;
      } else if (!state.weight_pending.empty()) {
        const auto [s, b] = state.weight_pending.front();
        state.weight_pending.pop_front();
        actions.push_back(compute_action(s, ActionKind::BACKWARD_WEIGHT, b));
        state.free_at = now + seconds(s, ActionKind::BACKWARD_WEIGHT);
        if (held_to_weight) --state.held;
      } else {
        continue;
      }
      decision_times.insert(state.free_at);
      const bool all_done = state.weight_pending.empty() &&
                            std::all_of(state.stages.begin(), state.stages.end(),
                                        [&](int s) { return next_forward[s] == m && next_backward[s] == m; });
      if (all_done) {
        for (int s : state.stages) actions.push_back(compute_action(s, ActionKind::OPTIMIZER_STEP, -1));
        state.done = true;
        ++finished;
      }
    }
  }
  return schedule;
}

Schedule dualpipe_v_schedule(const PipelineShape& shape, int microbatches) {
  const int p = shape.workers, m = microbatches;
  Schedule schedule{"dualpipe-v", m, 1, shape, std::vector<std::vector<Action>>(p)};
  for (int r = 0; r < p; ++r) {
    auto& actions = schedule.workers[r];
    const int stage_of_chunk[2] = {r, 2 * p - 1 - r};
    int forwards[2] = {0, 0}, backwards[2] = {0, 0};
    std::deque<std::pair<int, int>> weight_pending;
    auto forward = [&](int chunk, bool overlap = false) {
      Action action = compute_action(stage_of_chunk[chunk], ActionKind::FORWARD, forwards[chunk]++);
      action.overlap = overlap;
      actions.push_back(action);
    };
    auto backward = [&](int chunk, bool split) {
      const int stage = stage_of_chunk[chunk], b = backwards[chunk]++;
      actions.push_back(compute_action(stage, split ? ActionKind::BACKWARD_INPUT : ActionKind::BACKWARD, b));
      if (split) weight_pending.emplace_back(stage, b);
    };
    auto weight = [&] {
      actions.push_back(compute_action(weight_pending.front().first, ActionKind::BACKWARD_WEIGHT, weight_pending.front().second));
      weight_pending.pop_front();
    };
    auto forward_backward = [&](int forward_chunk, int backward_chunk) {
      forward(forward_chunk, true);
      backward(backward_chunk, false);
    };
    for (int i = 0; i < 2 * (p - r - 1); ++i) forward(0);                        // 1: nF0
    for (int i = 0; i < r + 1; ++i) forward(0), forward(1);                      // 2: nF0F1
    for (int i = 0; i < p - r - 1; ++i) backward(1, true), weight(), forward(1);  // 3: nB1W1F1
    for (int i = 0; i < m - 2 * p + r + 1; ++i) {                                // 4: nF0B1F1B0
      if (i == 0 && r == p - 1) {
        forward(0);
        backward(1, false);
      } else {
        forward_backward(0, 1);
      }
      forward_backward(1, 0);
    }
    for (int i = 0; i < p - r - 1; ++i) backward(1, false), forward_backward(1, 0);  // 5: nB1F1B0
    bool split = false;                                                             // 6: nB1B0
    for (int i = 0; i < r + 1; ++i) {
      if (i == (r + 1) / 2 && r % 2 == 1) split = true;
      backward(1, split);
      if (i == (r + 1) / 2 && r % 2 == 0) split = true;
      backward(0, split);
    }
    for (int i = 0; i < p - r - 1; ++i) weight(), backward(0, true);  // 7: nWB0
    while (!weight_pending.empty()) weight();                          // 8: nW
    actions.push_back(compute_action(stage_of_chunk[0], ActionKind::OPTIMIZER_STEP, -1));
    actions.push_back(compute_action(stage_of_chunk[1], ActionKind::OPTIMIZER_STEP, -1));
  }
  return schedule;
}

}  // namespace pipetwin
