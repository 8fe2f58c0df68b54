// Tensor-parallel sums as actions: where the lowering puts them, what the validator refuses, what the
// evaluator charges, and how profiles and plans carry them. Numbers by hand.
#include "planner/tensor_sums.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "planner/plan.h"
#include "planner/profile_io.h"
#include "planner/schedule_evaluator.h"
#include "planner/schedule_lowering.h"
#include "planner/transformer_model.h"
#include "schedule_support.h"
#include "sim_support.h"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;

// Two sums forward of 4 MB each, two backward, one in a recomputation: bytes and paper time made up.
TensorSums two_way_sums() {
  TensorSums sums;
  sums.ranks = 2;
  sums.forward = {2, 8e6, 0.1};
  sums.backward = {2, 8e6, 0.2};
  sums.recompute = {1, 4e6, 0.05};
  return sums;
}

PipelineShape with_sums(PipelineShape shape, bool recompute = false) {
  shape.tensor_sums.assign(shape.stages(), two_way_sums());
  if (recompute) shape.recomputed.assign(shape.stages(), true);
  return shape;
}

// Every F, B, I and R is followed directly by its TENSOR_ALLREDUCE (the pass's bytes), before its send;
// W by none; summed_pass names the pass.
TEST(TensorSums, FollowEveryPassButTheWeightGradientBeforeItsSend) {
  for (const std::string name : {"1f1b", "zb-h1", "gpipe"}) {
    const Schedule schedule = testing::lowered(name, with_sums(testing::straight(3), true), 4, 2);
    int sums = 0, passes = 0;
    for (const auto& actions : schedule.workers) {
      for (std::size_t i = 0; i < actions.size(); ++i) {
        const Action& a = actions[i];
        if (is_pass(a.kind) && a.kind != ActionKind::BACKWARD_WEIGHT) {
          ++passes;
          ASSERT_LT(i + 1, actions.size());
          const Action& next = actions[i + 1];
          EXPECT_EQ(next.kind, ActionKind::TENSOR_ALLREDUCE) << name << " after " << to_text(a);
          EXPECT_EQ(next.stage, a.stage);
          EXPECT_EQ(next.microbatch, a.microbatch);
          EXPECT_EQ(next.bytes, two_way_sums().of(a.kind).bytes);
          EXPECT_EQ(summed_pass(actions, i + 1), a.kind);
        }
        if (a.kind == ActionKind::BACKWARD_WEIGHT && i + 1 < actions.size()) {
          EXPECT_NE(actions[i + 1].kind, ActionKind::TENSOR_ALLREDUCE) << name;
        }
        if (a.kind == ActionKind::TENSOR_ALLREDUCE) ++sums;
      }
    }
    // 3 stages x 4 microbatches x 2 iterations x (F, R, B or I).
    EXPECT_EQ(passes, 3 * 4 * 2 * 3) << name;
    EXPECT_EQ(sums, passes) << name;
    EXPECT_NO_THROW(validate_schedule(schedule)) << name;
  }
}

// DualPipe's overlapped pairs run as one: both passes' sums follow the pair, in the pair's order.
TEST(TensorSums, FollowAnOverlappedPairInItsOrder) {
  const Schedule schedule = testing::lowered("dualpipe-v", with_sums(testing::v_shaped(2)), 4);
  int pairs = 0;
  for (const auto& actions : schedule.workers) {
    for (std::size_t i = 0; i + 3 < actions.size(); ++i) {
      if (!actions[i].overlap) continue;
      ++pairs;
      EXPECT_EQ(actions[i + 2].kind, ActionKind::TENSOR_ALLREDUCE);
      EXPECT_EQ(actions[i + 3].kind, ActionKind::TENSOR_ALLREDUCE);
      EXPECT_EQ(summed_pass(actions, i + 2), ActionKind::FORWARD);
      EXPECT_EQ(actions[i + 2].stage, actions[i].stage);
      EXPECT_EQ(summed_pass(actions, i + 3), ActionKind::BACKWARD);
      EXPECT_EQ(actions[i + 3].stage, actions[i + 1].stage);
    }
  }
  EXPECT_GT(pairs, 0);
  EXPECT_NO_THROW(validate_schedule(schedule));
}

TEST(TensorSums, NoneWithoutATensorParallelGroup) {
  const Schedule schedule = testing::lowered("1f1b", testing::straight(2), 4);
  for (const auto& actions : schedule.workers) {
    for (const Action& a : actions) EXPECT_NE(a.kind, ActionKind::TENSOR_ALLREDUCE);
  }
}

TEST(TensorSums, MisplacedOrGrouplessSumsAreRefused) {
  Schedule moved = testing::lowered("1f1b", with_sums(testing::straight(2)), 2);
  auto& list = moved.workers[0];
  const auto first_sum = std::find_if(list.begin(), list.end(), [](const Action& a) { return a.kind == ActionKind::TENSOR_ALLREDUCE; });
  ASSERT_NE(first_sum, list.end());
  std::iter_swap(first_sum, first_sum - 1);  // before its forward
  EXPECT_THAT(testing::rejection(moved).what(), HasSubstr("does not follow a pass of its stage and microbatch"));

  Schedule groupless = testing::lowered("1f1b", with_sums(testing::straight(2)), 2);
  groupless.shape.tensor_sums[0].ranks = 1;
  EXPECT_THAT(testing::rejection(groupless).what(), HasSubstr("which has none"));
}

// The evaluator charges a sum its paper time, taken out of the pass it was folded into: fill-drain on
// free links is (m + p - 1)(f + b) with the folded times, as before the sums were actions.
TEST(TensorSums, ThePaperTimeMovesFromThePassToItsSums) {
  Plan plan = testing::straight_plan(3, 1.0, 2.0, 0.0);
  for (PlanStage& stage : plan.stages) stage.tensor_sums = two_way_sums();
  const std::vector<StageTimes> times = stage_times_from_plan(plan);
  EXPECT_DOUBLE_EQ(times[0].forward_s, 1.0 - 0.1);
  EXPECT_DOUBLE_EQ(times[0].backward_s, 2.0 - 0.2);
  EXPECT_EQ(times[0].sums, two_way_sums());
  const int m = 5, p = 3;
  ScheduleRequest request;
  request.name = "1f1b";
  request.microbatches = m;
  const BuiltSchedule built = build_schedule(plan, request);
  const Evaluation evaluation = evaluate_schedule(built.schedule, times);
  ASSERT_TRUE(evaluation.completed);
  EXPECT_NEAR(evaluation.makespan_s, (m + p - 1) * 3.0, 1e-9);
  // The sums are not compute: worker 0 computes m x (f + b) less its sums' 0.3 s per microbatch.
  EXPECT_NEAR(evaluation.compute_busy_s[0], m * (3.0 - 0.3), 1e-9);
}

TEST(TensorSums, PlansAndProfilesKeepThemAndRefuseNegativeOnes) {
  Plan plan = testing::straight_plan(2, 1.0, 2.0);
  plan.stages[1].tensor_sums = two_way_sums();
  const Plan again = plan_from_json(plan_to_json(plan), "p.json");
  EXPECT_EQ(again.stages[1].tensor_sums, two_way_sums());
  EXPECT_EQ(again.stages[0].tensor_sums.ranks, 1);
  EXPECT_FALSE(plan_to_json(plan)["stages"][0].contains("tensor_sums"));  // older plans stay as they were

  nlohmann::json document = plan_to_json(plan);
  document["stages"][1]["tensor_sums"]["forward"]["count"] = -1;
  try {
    plan_from_json(document, "p.json");
    ADD_FAILURE() << "accepted";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("p.json"));
    EXPECT_THAT(error.what(), HasSubstr("stages[1].tensor_sums.forward"));
  }

  TransformerSpec spec = transformer_preset("llama2-7b");
  spec.layers = 2;
  spec.tensor_parallel = 2;
  const TensorParallelLink link{100e9, 1e-6};
  const Profile profile = transformer_profile(spec, Recomputation::none, {1e15, 0.5, 0.0}, link);
  const Profile read = profile_from_json(profile_to_json(profile), "m.json");
  for (std::size_t l = 0; l < profile.layer_count(); ++l) EXPECT_EQ(read.layer(l).tensor_sums, profile.layer(l).tensor_sums);
}

// A block of a 2-way tensor-parallel transformer sums e s b h bytes twice forward and twice backward
// (Megatron), each costing a ring on the innermost link, which its pass times include.
TEST(TensorSums, ATransformerBlockSumsTwiceEachWay) {
  TransformerSpec spec = transformer_preset("llama2-7b");
  spec.layers = 2;
  spec.tensor_parallel = 2;
  const TensorParallelLink link{100e9, 1e-6};
  const GemmRate rate{1e15, 0.5, 0.0};
  const Profile profile = transformer_profile(spec, Recomputation::none, rate, link);
  const Layer& block = profile.layer(1);
  const double bytes = 2.0 * spec.sequence_length * spec.microbatch_size * spec.hidden;  // bf16
  const double one_s = 1.0 / 2 * 2 * bytes / 100e9 + 2 * 1e-6;                          // 2(t-1)/t B / bw + 2(t-1) lat
  EXPECT_EQ(block.tensor_sums.ranks, 2);
  EXPECT_EQ(block.tensor_sums.forward.count, 2);
  EXPECT_EQ(block.tensor_sums.backward.count, 2);
  EXPECT_EQ(block.tensor_sums.recompute.count, 0);
  EXPECT_DOUBLE_EQ(block.tensor_sums.forward.bytes, 2 * bytes);
  EXPECT_NEAR(block.tensor_sums.forward.paper_s, 2 * one_s, 1e-15);
  // Without the group the same block computes as long as the 2-way block's forward less its sums, x 2.
  spec.tensor_parallel = 1;
  const Profile whole_profile = transformer_profile(spec, Recomputation::none, rate);
  const Layer& whole = whole_profile.layer(1);
  EXPECT_EQ(whole.tensor_sums.ranks, 1);
  EXPECT_NEAR(block.fwd_ms / 1000.0 - block.tensor_sums.forward.paper_s, whole.fwd_ms / 1000.0 / 2, 1e-12);
}

}  // namespace
}  // namespace pipetwin
