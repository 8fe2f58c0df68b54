// The schedules of today's frameworks (looped-bfs, zb-h2, interleaved-zb, zb-v, dualpipe-v) against
// closed forms, run by the event-driven evaluator with free communication.
#include "planner/zero_bubble_schedules.h"

#include <gtest/gtest.h>

#include "planner/error.h"
#include "planner/schedule_evaluator.h"
#include "planner/schedule_generators.h"
#include "planner/schedule_validator.h"
#include "schedule_support.h"

namespace pipetwin {
namespace {

struct Outcome {
  Evaluation evaluation;
  ValidationReport report;
};

// Every stage (chunk) takes forward_s, input backward_s and weight_s.
Outcome run(const std::string& name, const PipelineShape& shape, int m, double forward_s, double input_s, double weight_s) {
  const Schedule schedule = testing::lowered(name, shape, m);
  Outcome result{{}, validate_schedule(schedule)};
  std::vector<StageTimes> times(shape.stages(), StageTimes{forward_s, input_s + weight_s, input_s, weight_s, 0.0});
  result.evaluation = evaluate_schedule(schedule, times);
  EXPECT_TRUE(result.evaluation.completed) << name;
  return result;
}

int count(const Schedule& schedule, int worker, ActionKind kind) {
  int n = 0;
  for (const Action& action : schedule.workers[worker]) n += action.kind == kind;
  return n;
}

// Looped BFS with m >= p: worker r starts at r*f and never waits through its v*m forwards (chunk c+1's
// first input arrives at c*p*f + p*f <= (c+1)*m*f); the backwards mirror them from the last worker.
// So T = v*m*(f+b) + (p-1)*(f+b): with chunk times f = F/v, b = B/v the bubble is (p-1)(F+B)/v,
// interleaved 1F1B's, at GPipe's memory (v*m chunk activations).
TEST(LoopedBfs, BubbleIsPMinusOneSlotsOverVAtGPipesMemory) {
  for (const auto& [p, v, m] : {std::tuple{2, 2, 4}, std::tuple{4, 2, 8}, std::tuple{3, 3, 5}, std::tuple{4, 2, 4}}) {
    const double f = 1.0 / v, b = 2.0 / v;
    const Outcome result = run("looped-bfs", testing::interleaved(p, v), m, f, b / 2, b / 2);
    EXPECT_NEAR(result.evaluation.makespan_s - m * 3.0, (p - 1) * 3.0 / v, 1e-9) << p << " " << v << " " << m;
    for (const WorkerMemory& memory : result.report.memory) EXPECT_EQ(memory.peak_in_flight, v * m);
  }
}

// With every chunk's F, I and W taking t, a schedule with a flush cannot beat T = 3*v*m*t + (p-1)*t:
// each worker computes 3*v*m passes, and the worker of stage p-1 cannot start before microbatch 0 has
// crossed p-1 stages. interleaved-zb and zb-v reach that bound (ZB-V's bubble with tf = tb = tw is
// (p-1) chunk slots, a sixth of 1F1B's 6(p-1) chunk slots), zb-h1 and zb-h2 reach it with v = 1.
TEST(ZeroBubble, EqualTimesReachTheFlushBound) {
  struct Case {
    std::string name;
    PipelineShape (*shape)(int);
    int chunks;
  };
  for (const Case& c : {Case{"zb-h1", testing::straight, 1}, Case{"zb-h2", testing::straight, 1},
                        Case{"zb-v", testing::v_shaped, 2},
                        Case{"interleaved-zb", [](int p) { return testing::interleaved(p, 2); }, 2}}) {
    for (int p : {2, 3, 4, 8}) {
      for (int m : {2 * p, 3 * p + 1}) {
        const double t = 1.0 / c.chunks;
        const Outcome result = run(c.name, c.shape(p), m, t, t, t);
        EXPECT_NEAR(result.evaluation.makespan_s, 3.0 * m + (p - 1) * t, 1e-9) << c.name << " p=" << p << " m=" << m;
      }
    }
  }
}

// zb-h1 and zb-h2 reach the bound for every microbatch count from p to 3p + 3, p = 2..8 (the schedule
// keeps 1F1B's order of F and I; W fills what would be idle); fewer microbatches than stages complete.
TEST(ZeroBubble, OneStagePerWorkerReachesTheFlushBoundForEveryMicrobatchCount) {
  for (const std::string name : {"zb-h1", "zb-h2"}) {
    for (int p = 2; p <= 8; ++p) {
      for (int m = 1; m <= 3 * p + 3; ++m) {
        const Outcome result = run(name, testing::straight(p), m, 1, 1, 1);
        if (m >= p) {
          EXPECT_NEAR(result.evaluation.makespan_s, 3.0 * m + p - 1, 1e-9) << name << " p=" << p << " m=" << m;
        }
      }
    }
  }
}

// Microbatch-chunks a worker has forwarded and not yet input-backwarded (the interleaved-zb budget).
int peak_forwarded_to_input(const Schedule& schedule, int worker) {
  int held = 0, peak = 0;
  for (const Action& action : schedule.workers[worker]) {
    if (action.kind == ActionKind::FORWARD) peak = std::max(peak, ++held);
    if (action.kind == ActionKind::BACKWARD_INPUT) --held;
  }
  return peak;
}

// Memory, counted from F to W (a W reads its I's saved tensors): zb-v holds at most 2p chunk
// activations (1F1B's p whole stages) on every worker, zb-h2 2p - 1 microbatches on every stage (Qi et
// al.'s ZB-H2: about twice 1F1B's peak). interleaved-zb's budget counts to I: there it has interleaved
// 1F1B's peak where it is highest (rank 0: Megatron's warm-up 2(p-1)+(v-1)p, plus one) and at most one
// chunk more on other ranks; its W's wait for idle time, so counted to W it holds more (up to all).
TEST(ZeroBubble, ActivationsStayWithinEachSchedulesBudget) {
  for (int p : {2, 4, 8}) {
    const int m = 4 * p;
    const Outcome v = run("zb-v", testing::v_shaped(p), m, 1, 1, 1);
    const Outcome h2 = run("zb-h2", testing::straight(p), m, 1, 1, 1);
    const Schedule zb1p = zero_bubble_schedule("interleaved-zb", testing::interleaved(p, 2), m);
    const auto interleaved = schedule_memory(testing::lowered("interleaved", testing::interleaved(p, 2), m));
    for (int w = 0; w < p; ++w) {
      EXPECT_LE(v.report.memory[w].peak_in_flight, 2 * p) << w;
      EXPECT_EQ(h2.report.memory[w].peak_in_flight, 2 * p - 1) << w;
      EXPECT_LE(peak_forwarded_to_input(zb1p, w), interleaved[w].peak_in_flight + 1) << w;
    }
    EXPECT_EQ(peak_forwarded_to_input(zb1p, 0), 2 * (p - 1) + p + 1);
    EXPECT_EQ(interleaved[0].peak_in_flight, 2 * (p - 1) + p + 1);
    EXPECT_EQ(v.report.memory[0].peak_in_flight, 2 * p);
  }
}

// Where the shape carries its stages' times (a plan's), interleaved-zb and zb-v lay the list out with
// them, not with unit times. With every chunk's passes equal the order is the unit-time one whatever
// the time. With one leg's chunks twice the other's (an uneven cut: Llama 2 70B in 64 chunks of one or
// two blocks), the list ordered by the times, run with those times, is never more than 1% slower than
// the unit-time order (one case of 24: 190 against 189) and, where the heavy chunks come second
// (worker w's second chunk, as the search's balanced cut of 80 blocks gives) and m = 4p, 7-14% faster.
// zb-v keeps its budget of 2p chunk activations counted to W but for one: with unequal times an
// admitted microbatch's second-chunk forward past the budget waits while another worker computes, and
// runs when every worker waits (the rule that keeps the pass from deadlocking; with the overshoot
// allowed whenever the worker itself had nothing else, peaks reached 2p + 4).
TEST(ZeroBubble, TheListIsLaidOutWithTheStagesTimes) {
  for (const char* name : {"zb-v", "interleaved-zb"}) {
    for (int p : {2, 4, 8}) {
      const PipelineShape unit = std::string(name) == "zb-v" ? testing::v_shaped(p) : testing::interleaved(p, 2);
      PipelineShape equal = unit;
      equal.pass_times.assign(unit.stages(), {.forward_s = 2.5, .backward_input_s = 2.5, .backward_weight_s = 2.5});
      EXPECT_EQ(testing::lowered(name, equal, 2 * p).workers, testing::lowered(name, unit, 2 * p).workers) << name << p;
      for (int m : {2 * p, 4 * p}) {
        for (bool heavy_second : {true, false}) {
          PipelineShape timed = unit;
          std::vector<StageTimes> times;
          for (int s = 0; s < unit.stages(); ++s) {
            const double t = (s >= p) == heavy_second ? 2.0 : 1.0;
            timed.pass_times.push_back({.forward_s = t, .backward_input_s = t, .backward_weight_s = t});
            times.push_back(StageTimes{t, 2 * t, t, t, 0.0});
          }
          const Schedule by_times = testing::lowered(name, timed, m);
          const double ordered_by_times = evaluate_schedule(by_times, times).makespan_s;
          const double ordered_by_units = evaluate_schedule(testing::lowered(name, unit, m), times).makespan_s;
          const std::string label = std::string(name) + " p=" + std::to_string(p) + " m=" + std::to_string(m);
          EXPECT_GE(ordered_by_times, 9.0 * m) << label;  // each worker computes 3 passes x (1 + 2) per microbatch
          EXPECT_LE(ordered_by_times, 1.01 * ordered_by_units) << label;
          if (heavy_second && m == 4 * p) {
            EXPECT_LT(ordered_by_times, 0.95 * ordered_by_units) << label;
          }
          if (std::string(name) == "zb-v") {
            for (const WorkerMemory& memory : validate_schedule(by_times).memory) {
              EXPECT_LE(memory.peak_in_flight, 2 * p + 1) << label;
            }
          }
        }
      }
    }
  }
}

// DualPipe's published bubble for DualPipeV is (PP/2 - 1)(F&B + B - 3W), PP the stages of the
// bidirectional DualPipe (2p for p DualPipeV ranks), F&B an overlapped forward-backward pair, all per
// chunk. pipetwin runs a pair as what the device does for both, F&B = F + B, so with F = I = W = t
// (B = 2t): (p - 1)(3t + 2t - 3t) = 2(p - 1)t over the 2m(F + B) = 6mt each rank computes.
TEST(DualPipeV, BubbleIsDualPipesClosedForm) {
  for (int p : {2, 3, 4, 8}) {
    for (int m : {2 * p, 3 * p, 5 * p + 1}) {
      for (double t : {0.5, 1.0}) {
        const Outcome result = run("dualpipe-v", testing::v_shaped(p), m, t, t, t);
        const double bubble = result.evaluation.makespan_s - 6.0 * m * t;
        EXPECT_NEAR(bubble, (p - 1) * ((t + 2 * t) + 2 * t - 3 * t), 1e-9) << "p=" << p << " m=" << m;
      }
    }
  }
}

TEST(DualPipeV, PairsAForwardWithABackwardAndHoldsAboutOneFOneBsActivations) {
  const int p = 4, m = 12;
  const Schedule schedule = testing::lowered("dualpipe-v", testing::v_shaped(p), m);
  const ValidationReport report = validate_schedule(schedule);
  for (int r = 0; r < p; ++r) {
    // Step 4 runs 2(m - 2p + r + 1) pairs (the last rank's first F0, B1 apart), step 5 p - r - 1 more.
    const int expected_pairs = 2 * (m - 2 * p + r + 1) - (r == p - 1 ? 1 : 0) + (p - r - 1);
    int pairs = 0;
    const auto& actions = schedule.workers[r];
    for (std::size_t i = 0; i < actions.size(); ++i) {
      if (!actions[i].overlap) continue;
      ++pairs;
      ASSERT_LT(i + 1, actions.size());
      EXPECT_EQ(actions[i + 1].kind, ActionKind::BACKWARD);
    }
    EXPECT_EQ(pairs, expected_pairs) << "rank " << r;
    EXPECT_EQ(count(schedule, r, ActionKind::FORWARD), 2 * m);
    EXPECT_EQ(count(schedule, r, ActionKind::BACKWARD) + count(schedule, r, ActionKind::BACKWARD_INPUT), 2 * m);
    EXPECT_EQ(count(schedule, r, ActionKind::BACKWARD_INPUT), count(schedule, r, ActionKind::BACKWARD_WEIGHT));
    // DualPipe's table: PP + 1 activations (whole stages) against 1F1B's PP: here 2p + 1 chunks on rank 0.
    EXPECT_LE(report.memory[r].peak_in_flight, 2 * p + 2);
  }
  EXPECT_EQ(report.memory[0].peak_in_flight, 2 * p + 1);
}

TEST(NewSchedules, RefuseShapesTheyCannotRun) {
  EXPECT_THROW(testing::lowered("dualpipe-v", testing::v_shaped(4), 7), Error);  // m < 2p
  EXPECT_THROW(testing::lowered("zb-v", testing::straight(4), 8), Error);        // not two chunks
  EXPECT_THROW(testing::lowered("looped-bfs", testing::straight(4), 8), Error);  // one chunk
  EXPECT_THROW(testing::lowered("zb-h2", testing::pipeline({2, 1}), 8), Error);  // replicated
  try {
    schedule_chunks("zb-v", 3);
    FAIL() << "zb-v accepted 3 chunks";
  } catch (const Error& error) {
    EXPECT_EQ(error.context().field, "--chunks");
  }
  EXPECT_EQ(schedule_chunks("dualpipe-v", 1), 2);
}

}  // namespace
}  // namespace pipetwin
