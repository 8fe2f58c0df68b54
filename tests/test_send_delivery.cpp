// When a worker may let go of a sent tensor: by hand on 1F1B, and on every generated schedule, each
// release is proven (the peer received the send before it sent the proof) and as early as can be.
#include "planner/send_delivery.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "planner/schedule_generators.h"
#include "schedule_support.h"

namespace pipetwin {
namespace {

using ::testing::ElementsAre;

int message_of(const Schedule& schedule, int worker, ActionKind kind, int microbatch, int iteration = 0) {
  for (const Action& a : schedule.workers[worker]) {
    if (a.kind == kind && a.microbatch == microbatch && a.iteration == iteration) return a.message;
  }
  ADD_FAILURE() << "worker " << worker << " has no such action";
  return -2;
}

TEST(SendDelivery, OneFOneBOnTwoStagesByHand) {
  const Schedule schedule = testing::lowered("1f1b", testing::straight(2), 4, 2);
  // Stage 1 sends microbatch b's gradient right after receiving its activation: that receipt
  // (on worker 0) proves the activation delivered.
  const auto first = sends_delivered_by_receipt(schedule, 0);
  for (int iteration = 0; iteration < 2; ++iteration) {
    for (int b = 0; b < 4; ++b) {
      const int gradient = message_of(schedule, 1, ActionKind::SEND_GRAD, b, iteration);
      ASSERT_TRUE(first.count(gradient)) << "gradient " << b;
      EXPECT_THAT(first.at(gradient), ElementsAre(message_of(schedule, 0, ActionKind::SEND_ACT, b, iteration)));
    }
  }
  EXPECT_EQ(first.size(), 8u);
  // Stage 0 (one warm-up forward beyond the first) sends microbatch b+2's activation after taking
  // b's gradient; the flush takes the last two gradients before the next iteration's first
  // activation, which proves both; the run's last two gradients are proven by nothing.
  const auto second = sends_delivered_by_receipt(schedule, 1);
  auto gradient = [&](int b, int iteration) { return message_of(schedule, 1, ActionKind::SEND_GRAD, b, iteration); };
  auto activation = [&](int b, int iteration) { return message_of(schedule, 0, ActionKind::SEND_ACT, b, iteration); };
  const std::map<int, std::vector<int>> expected = {
      {activation(2, 0), {gradient(0, 0)}},
      {activation(3, 0), {gradient(1, 0)}},
      {activation(0, 1), {gradient(2, 0), gradient(3, 0)}},
      {activation(2, 1), {gradient(0, 1)}},
      {activation(3, 1), {gradient(1, 1)}}};
  EXPECT_EQ(second, expected);
}

// Position of the action with this message and kind test in a worker's list (-1: none).
int position(const std::vector<Action>& actions, int message, bool (*kind)(ActionKind)) {
  for (std::size_t i = 0; i < actions.size(); ++i) {
    if (actions[i].message == message && kind(actions[i].kind)) return static_cast<int>(i);
  }
  return -1;
}

TEST(SendDelivery, EveryReleaseIsProvenAndEarliestOnEverySchedule) {
  const std::vector<std::pair<std::string, PipelineShape>> cases = {
      {"gpipe", testing::pipeline({2, 1, 3})}, {"1f1b", testing::pipeline({2, 1, 3})},
      {"pipedream", testing::pipeline({2, 1, 3})}, {"2bw", testing::pipeline({2, 1, 3})},
      {"interleaved", testing::interleaved(3, 2)}, {"zb-h1", testing::straight(3)},
      {"zb-h2", testing::straight(4)}, {"zb-v", testing::v_shaped(3)}, {"dualpipe-v", testing::v_shaped(3)}};
  for (const auto& [name, shape] : cases) {
    const Schedule schedule = testing::lowered(name, shape, 6, 2);
    int released = 0;
    for (int worker = 0; worker < shape.workers; ++worker) {
      const auto delivered = sends_delivered_by_receipt(schedule, worker);
      std::map<int, int> proven_by;
      for (const auto& [proof, sends] : delivered) {
        for (int m : sends) EXPECT_TRUE(proven_by.emplace(m, proof).second) << name << ": message " << m << " twice";
      }
      for (const Action& send : schedule.workers[worker]) {
        if (!is_send(send.kind)) continue;
        const auto& peer_actions = schedule.workers[send.peer];
        const int receipt = position(peer_actions, send.message, is_receive);
        ASSERT_GE(receipt, 0) << name;
        // The earliest send from the peer back to this worker after the receipt, found by walking.
        int earliest = -1;
        for (std::size_t i = receipt + 1; i < peer_actions.size() && earliest < 0; ++i) {
          if (is_send(peer_actions[i].kind) && peer_actions[i].peer == worker) earliest = peer_actions[i].message;
        }
        const auto it = proven_by.find(send.message);
        if (earliest < 0) {
          EXPECT_EQ(it, proven_by.end()) << name << ": message " << send.message << " released without proof";
          continue;
        }
        ASSERT_NE(it, proven_by.end()) << name << ": message " << send.message << " never released";
        EXPECT_EQ(it->second, earliest) << name;
        EXPECT_LT(receipt, position(peer_actions, it->second, is_send)) << name;
        EXPECT_GE(position(schedule.workers[worker], it->second, is_receive), 0) << name;
        ++released;
      }
    }
    EXPECT_GT(released, 0) << name;
  }
}

}  // namespace
}  // namespace pipetwin
