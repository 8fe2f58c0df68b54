#include "planner/schedule_lowering.h"

#include <algorithm>
#include <functional>
#include <map>
#include <tuple>
#include <unordered_map>

namespace pipetwin {
namespace {

Action message(const Action& compute, ActionKind kind, int peer, double bytes) {
  Action action = compute;
  action.kind = kind;
  action.overlap = false;
  action.peer = peer;
  action.bytes = bytes;
  return action;
}

// What a send and its receive have in common: sender, receiver, activation?, producing stage,
// iteration, microbatch.
using MessageKey = std::tuple<int, int, bool, int, int, int>;

struct MessageKeyHash {
  std::size_t operator()(const MessageKey& key) const {
    const auto [sender, receiver, activation, stage, iteration, microbatch] = key;
    std::size_t hash = std::hash<long long>()((static_cast<long long>(sender) << 32) ^ receiver);
    for (long long part : {static_cast<long long>(activation), static_cast<long long>(stage),
                           static_cast<long long>(iteration), static_cast<long long>(microbatch)}) {
      hash = hash * 1000003u ^ std::hash<long long>()(part);
    }
    return hash;
  }
};

MessageKey message_key(int worker, const Action& action) {
  const bool activation = action.kind == ActionKind::SEND_ACT || action.kind == ActionKind::RECV_ACT;
  if (is_send(action.kind)) return {worker, action.peer, activation, action.stage, action.iteration, action.microbatch};
  const int producer = activation ? action.stage - 1 : action.stage + 1;
  return {action.peer, worker, activation, producer, action.iteration, action.microbatch};
}

}  // namespace

void number_messages(Schedule& schedule) {
  std::size_t actions = 0;
  for (const auto& list : schedule.workers) actions += list.size();
  std::unordered_map<MessageKey, std::pair<int, bool>, MessageKeyHash> sent;  // -> (id, received yet)
  sent.reserve(actions / 2 + 1);
  std::map<std::pair<int, int>, int> collectives;  // (stage, occurrence) -> id
  int next_id = 0;
  for (int w = 0; w < static_cast<int>(schedule.workers.size()); ++w) {
    std::map<int, int> occurrence;  // per stage: all-reduces so far on this worker
    for (Action& action : schedule.workers[w]) {
      if (is_send(action.kind)) {
        auto [it, added] = sent.emplace(message_key(w, action), std::pair{next_id, false});
        action.message = added ? next_id++ : -1;  // a second identical send is left for the validator
      } else if (action.kind == ActionKind::ALLREDUCE) {
        auto [it, added] = collectives.emplace(std::pair{action.stage, occurrence[action.stage]++}, next_id);
        if (added) ++next_id;
        action.message = it->second;
      } else if (!is_receive(action.kind)) {
        action.message = -1;
      }
    }
  }
  for (int w = 0; w < static_cast<int>(schedule.workers.size()); ++w) {
    for (Action& action : schedule.workers[w]) {
      if (!is_receive(action.kind)) continue;
      auto it = sent.find(message_key(w, action));
      const bool first = it != sent.end() && !it->second.second;  // a second receive is left for the validator
      action.message = first ? it->second.first : -1;
      if (first) it->second.second = true;
    }
  }
}

void add_recomputation(Schedule& schedule) {
  const PipelineShape& shape = schedule.shape;
  for (std::vector<Action>& list : schedule.workers) {
    const bool needed = std::any_of(list.begin(), list.end(), [&](const Action& a) {
      return is_backward(a.kind) && shape.recomputes(a.stage);
    });
    const bool present = std::any_of(list.begin(), list.end(), [](const Action& a) { return a.kind == ActionKind::RECOMPUTE; });
    if (!needed || present) continue;
    std::vector<Action> out;
    out.reserve(list.size() + list.size() / 2);
    std::size_t pair_start = 0;  // where the current overlapped pair's forward sits in `out`
    for (const Action& action : list) {
      if (action.overlap) pair_start = out.size();
      if (is_backward(action.kind) && shape.recomputes(action.stage)) {
        Action recompute = compute_action(action.stage, ActionKind::RECOMPUTE, action.microbatch);
        recompute.iteration = action.iteration;
        const bool paired = !out.empty() && out[pair_start].overlap && pair_start + 1 == out.size();
        out.insert(paired ? out.begin() + static_cast<std::ptrdiff_t>(pair_start) : out.end(), recompute);
      }
      out.push_back(action);
    }
    list = std::move(out);
  }
}

void add_tensor_sums(Schedule& schedule) {
  const PipelineShape& shape = schedule.shape;
  auto sums = [&](const Action& a) {
    return a.kind != ActionKind::BACKWARD_WEIGHT && is_pass(a.kind) && shape.sums(a.stage).ranks > 1;
  };
  for (std::vector<Action>& list : schedule.workers) {
    const bool needed = std::any_of(list.begin(), list.end(), sums);
    const bool present = std::any_of(list.begin(), list.end(), [](const Action& a) { return a.kind == ActionKind::TENSOR_ALLREDUCE; });
    if (!needed || present) continue;
    std::vector<Action> out;
    out.reserve(2 * list.size());
    std::vector<Action> pending;  // the passes whose sums come next, in order
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Action& action = list[i];
      out.push_back(action);
      if (sums(action)) pending.push_back(action);
      if (action.overlap || !is_pass(action.kind)) continue;  // a pair's sums follow its second pass
      for (const Action& pass : pending) {
        Action sum = pass;
        sum.kind = ActionKind::TENSOR_ALLREDUCE;
        sum.overlap = false;
        sum.bytes = shape.sums(pass.stage).of(pass.kind).bytes;
        out.push_back(sum);
      }
      pending.clear();
    }
    list = std::move(out);
  }
}

Schedule lower_schedule(const Schedule& compute_only) {
  Schedule lowered{compute_only.name, compute_only.microbatches, compute_only.iterations, compute_only.shape,
                   std::vector<std::vector<Action>>(compute_only.workers.size())};
  const PipelineShape& shape = compute_only.shape;
  const int last = shape.stages() - 1;
  for (int w = 0; w < static_cast<int>(compute_only.workers.size()); ++w) {
    const std::vector<Action>& in = compute_only.workers[w];
    std::vector<Action>& out = lowered.workers[w];
    out.reserve(3 * in.size());  // at most a receive and a send per pass
    auto receive = [&](const Action& action) {
      const int s = action.stage, b = action.microbatch;
      if (action.kind == ActionKind::FORWARD && s > 0 && shape.worker_of(s - 1, b) != w) {
        out.push_back(message(action, ActionKind::RECV_ACT, shape.worker_of(s - 1, b), shape.output_bytes[s - 1]));
      } else if (is_backward(action.kind) && s < last && shape.worker_of(s + 1, b) != w) {
        out.push_back(message(action, ActionKind::RECV_GRAD, shape.worker_of(s + 1, b), shape.output_bytes[s]));
      }
    };
    auto send = [&](const Action& action) {
      const int s = action.stage, b = action.microbatch;
      if (action.kind == ActionKind::FORWARD && s < last && shape.worker_of(s + 1, b) != w) {
        out.push_back(message(action, ActionKind::SEND_ACT, shape.worker_of(s + 1, b), shape.output_bytes[s]));
      } else if (is_backward(action.kind) && s > 0 && shape.worker_of(s - 1, b) != w) {
        out.push_back(message(action, ActionKind::SEND_GRAD, shape.worker_of(s - 1, b), shape.output_bytes[s - 1]));
      }
    };
    for (std::size_t i = 0; i < in.size(); ++i) {
      const Action& action = in[i];
      if (action.overlap && i + 1 < in.size()) {  // an overlapped pair: both receives, both passes, both sends
        const Action& partner = in[++i];
        receive(action), receive(partner);
        out.push_back(action), out.push_back(partner);
        send(action), send(partner);
      } else if (action.kind == ActionKind::OPTIMIZER_STEP && shape.replicas(action.stage) > 1) {
        Action all_reduce = action;
        all_reduce.kind = ActionKind::ALLREDUCE;
        all_reduce.bytes = shape.param_bytes[action.stage];
        out.push_back(all_reduce);
        out.push_back(action);
      } else {
        receive(action);
        out.push_back(action);
        send(action);
      }
    }
  }
  number_messages(lowered);
  add_recomputation(lowered);
  add_tensor_sums(lowered);
  return lowered;
}

}  // namespace pipetwin
