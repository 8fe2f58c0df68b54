#include "planner/send_delivery.h"

#include <unordered_map>
#include <utility>

namespace pipetwin {

std::map<int, std::vector<int>> sends_delivered_by_receipt(const Schedule& schedule, int worker) {
  // Where each message sent by `worker` is received: (peer, position in the peer's list).
  std::unordered_map<int, std::pair<int, std::size_t>> receipt_of;
  for (std::size_t peer = 0; peer < schedule.workers.size(); ++peer) {
    const auto& actions = schedule.workers[peer];
    for (std::size_t i = 0; i < actions.size(); ++i) {
      if (is_receive(actions[i].kind) && actions[i].peer == worker) receipt_of[actions[i].message] = {static_cast<int>(peer), i};
    }
  }
  // Per peer, from each position on: the id of the peer's next send to `worker` (-1: none).
  std::unordered_map<int, std::vector<int>> next_send_to_worker;
  auto next_send = [&](int peer) -> const std::vector<int>& {
    auto [it, fresh] = next_send_to_worker.try_emplace(peer);
    if (fresh) {
      const auto& actions = schedule.workers[peer];
      it->second.assign(actions.size() + 1, -1);
      for (std::size_t i = actions.size(); i-- > 0;) {
        const bool to_worker = is_send(actions[i].kind) && actions[i].peer == worker;
        it->second[i] = to_worker ? actions[i].message : it->second[i + 1];
      }
    }
    return it->second;
  };
  std::map<int, std::vector<int>> delivered;
  for (const Action& action : schedule.workers.at(worker)) {
    if (!is_send(action.kind)) continue;
    const auto receipt = receipt_of.find(action.message);
    if (receipt == receipt_of.end()) continue;
    const auto [peer, position] = receipt->second;
    const int proof = next_send(peer)[position + 1];
    if (proof >= 0) delivered[proof].push_back(action.message);
  }
  return delivered;
}

}  // namespace pipetwin
