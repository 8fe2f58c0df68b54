// Schedules against the closed forms of DESIGN.md, run by the event-driven evaluator with uniform
// stage times and free communication.
#include "planner/schedule_generators.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "planner/error.h"
#include "planner/schedule_evaluator.h"
#include "planner/schedule_validator.h"
#include "schedule_support.h"

namespace pipetwin {
namespace {

constexpr double kForward = 1.0, kBackward = 2.0;

double makespan(const Schedule& schedule, double forward = kForward, double backward = kBackward) {
  const Evaluation run = evaluate_schedule(schedule, uniform_stage_times(schedule.shape.stages(), forward, backward));
  EXPECT_TRUE(run.completed);
  return run.makespan_s;
}

class FillDrain : public ::testing::TestWithParam<std::tuple<std::string, int, int>> {};

TEST_P(FillDrain, IterationIsMPlusPMinusOneSlots) {
  const auto [name, p, m] = GetParam();
  const Schedule schedule = testing::lowered(name, testing::straight(p), m);
  validate_schedule(schedule);
  const double expected = (m + p - 1) * (kForward + kBackward);
  EXPECT_NEAR(makespan(schedule), expected, 1e-9 * expected);
  // Bubble fraction (p-1)/(m+p-1) on every worker.
  const Evaluation run = evaluate_schedule(schedule, uniform_stage_times(p, kForward, kBackward));
  for (int w = 0; w < p; ++w) EXPECT_NEAR(run.bubble_fraction(w), double(p - 1) / (m + p - 1), 1e-9);
}

INSTANTIATE_TEST_SUITE_P(GPipeAnd1F1B, FillDrain,
                         ::testing::Combine(::testing::Values("gpipe", "1f1b"), ::testing::Values(1, 2, 4, 6),
                                            ::testing::Values(1, 3, 8, 16)));

TEST(Memory, OneFOneBKeepsMinOfPMinusSAndMInFlightWhileGPipeKeepsM) {
  for (int p : {2, 4, 5}) {
    for (int m : {1, 3, 8}) {
      const auto one_f_one_b = schedule_memory(testing::lowered("1f1b", testing::straight(p), m));
      const auto gpipe = schedule_memory(testing::lowered("gpipe", testing::straight(p), m));
      for (int s = 0; s < p; ++s) {
        EXPECT_EQ(one_f_one_b[s].peak_in_flight, std::min(p - s, m)) << "p=" << p << " m=" << m << " s=" << s;
        EXPECT_EQ(gpipe[s].peak_in_flight, m);
        EXPECT_EQ(one_f_one_b[s].weight_versions, 1);
      }
    }
  }
}

class Interleaved : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(Interleaved, BubbleIsPMinusOneSlotsOverV) {
  const auto [p, v, m] = GetParam();
  const Schedule schedule = testing::lowered("interleaved", testing::interleaved(p, v), m);
  validate_schedule(schedule);
  // Each chunk does 1/v of a stage's work.
  const double time = makespan(schedule, kForward / v, kBackward / v);
  const double bubble = time - m * (kForward + kBackward);
  const double expected = (p - 1) * (kForward + kBackward) / v;
  EXPECT_NEAR(bubble, expected, 1e-9 * time) << "p=" << p << " v=" << v << " m=" << m;
}

INSTANTIATE_TEST_SUITE_P(Shapes, Interleaved,
                         ::testing::Values(std::tuple{4, 2, 8}, std::tuple{4, 2, 16}, std::tuple{2, 3, 4},
                                           std::tuple{4, 4, 8}, std::tuple{8, 2, 16}));

TEST(ZeroBubbleH1, BubbleIsAboutAThirdOfOneFOneB) {
  for (int p : {2, 4, 8}) {
    const int m = 3 * p;
    const Schedule zb = testing::lowered("zb-h1", testing::straight(p), m);
    validate_schedule(zb);
    // tf = tb_input = tb_weight = 1, so a full backward takes 2.
    const double zb_time = evaluate_schedule(zb, uniform_stage_times(p, 1.0, 2.0)).makespan_s;
    const double one_f_one_b_time = makespan(testing::lowered("1f1b", testing::straight(p), m), 1.0, 2.0);
    const double busy = 3.0 * m;
    const double ratio = (zb_time - busy) / (one_f_one_b_time - busy);
    // With equal F, I and W times the placement reaches the ideal: a bubble of (p - 1) slots, 1F1B's 3(p - 1).
    EXPECT_NEAR(ratio, 1.0 / 3.0, 1e-9) << "p=" << p << " zb " << zb_time << " 1f1b " << one_f_one_b_time;
    // And it holds no more activations than 1F1B's peak (p microbatches, on its first worker), counted
    // from F to W: every worker reaches p (Qi et al.'s ZB-H1: the bubble cut at 1F1B's peak memory).
    const auto memory = schedule_memory(zb);
    const auto one_f_one_b = schedule_memory(testing::lowered("1f1b", testing::straight(p), m));
    EXPECT_EQ(one_f_one_b[0].peak_in_flight, p);
    for (int s = 0; s < p; ++s) EXPECT_EQ(memory[s].peak_in_flight, p) << "p=" << p << " stage " << s;
  }
}

TEST(PipeDreamAsync, KeepsWarmUpPlusOneWeightVersions) {
  for (const std::vector<int>& replicas : {std::vector<int>{1, 1, 1, 1}, std::vector<int>{2, 1}, std::vector<int>{3, 1},
                                           std::vector<int>{1, 2, 1}, std::vector<int>{2, 2}}) {
    const PipelineShape shape = testing::pipeline(replicas);
    const Schedule schedule = testing::lowered("pipedream", shape, 12, 3);
    validate_schedule(schedule);
    const auto memory = schedule_memory(schedule);
    for (int s = 0; s < shape.stages(); ++s) {
      for (int w : shape.stage_workers[s]) {
        EXPECT_EQ(memory[w].weight_versions, warm_up_microbatches(shape, s) + 1) << "stage " << s << " worker " << w;
        EXPECT_EQ(memory[w].peak_in_flight, warm_up_microbatches(shape, s) + 1);
      }
    }
  }
}

TEST(PipeDreamAsync, SteadyStateIsOneForwardAndOneBackwardPerSlot) {
  const PipelineShape shape = testing::straight(4);
  const double three = makespan(testing::lowered("pipedream", shape, 8, 3));
  const double four = makespan(testing::lowered("pipedream", shape, 8, 4));
  EXPECT_NEAR(four - three, 8 * (kForward + kBackward), 1e-9);
}

TEST(TwoBufferedWeights, KeepsTwoVersionsAndUpdatesOncePerIteration) {
  const PipelineShape shape = testing::straight(4);
  const Schedule schedule = testing::lowered("2bw", shape, 8, 3);
  validate_schedule(schedule);
  for (const WorkerMemory& memory : schedule_memory(schedule)) EXPECT_LE(memory.weight_versions, 2);
  EXPECT_EQ(schedule_memory(schedule)[0].weight_versions, 2);
  for (const auto& actions : schedule.workers) {
    int updates = 0;
    for (const Action& a : actions) updates += a.kind == ActionKind::OPTIMIZER_STEP;
    EXPECT_EQ(updates, 3);
  }
}

TEST(Replicas, SynchronousSchedulesRoundRobinAndAllReduce) {
  for (const std::string name : {"gpipe", "1f1b"}) {
    const PipelineShape shape = testing::pipeline({1, 3, 2});
    const Schedule schedule = testing::lowered(name, shape, 7);
    validate_schedule(schedule);
    for (int w : shape.stage_workers[1]) {
      int forwards = 0, all_reduces = 0;
      for (const Action& a : schedule.workers[w]) {
        forwards += a.kind == ActionKind::FORWARD;
        all_reduces += a.kind == ActionKind::ALLREDUCE;
        if (a.kind == ActionKind::FORWARD) {
          EXPECT_EQ(a.microbatch % 3, w - 1);
        }
      }
      EXPECT_EQ(all_reduces, 1);
      EXPECT_EQ(forwards, w == 1 ? 3 : 2);  // microbatches 0,3,6 / 1,4 / 2,5
    }
  }
}

TEST(Generators, RejectWhatTheyCannotRun) {
  EXPECT_THROW(generate_schedule("nonsense", testing::straight(2), 4), Error);
  EXPECT_THROW(generate_schedule("interleaved", testing::interleaved(4, 2), 6), Error);  // m not a multiple of p
  EXPECT_THROW(generate_schedule("interleaved", testing::straight(4), 8), Error);        // one chunk
  EXPECT_THROW(generate_schedule("zb-h1", testing::pipeline({2, 1}), 4), Error);          // replicated
  EXPECT_THROW(generate_schedule("pipedream", testing::pipeline({2, 1}), 3), Error);      // 3 not divisible by 2
  EXPECT_THROW(generate_schedule("1f1b", testing::straight(2), 0), Error);
}

}  // namespace
}  // namespace pipetwin
