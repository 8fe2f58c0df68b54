// Recomputation as a schedule action: where lowering puts each RECOMPUTE, what the validator refuses,
// the time it adds (closed forms) and the memory it saves (counted by hand), plans that recompute,
// and the schedule files that carry it (pipetwin's CSV) or do not (torch's, where the plan restores it).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "planner/error.h"
#include "planner/json_fields.h"
#include "planner/plan.h"
#include "planner/schedule_evaluator.h"
#include "planner/schedule_lowering.h"
#include "planner/schedule_validator.h"
#include "planner/torch_schedule_csv.h"
#include "schedule_support.h"
#include "sim_support.h"
#include "test_support.h"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;

PipelineShape recomputing(PipelineShape shape, std::vector<bool> stages = {}) {
  shape.recomputed = stages.empty() ? std::vector<bool>(shape.stages(), true) : std::move(stages);
  return shape;
}

// Every backward (B or I) of a recomputing stage comes directly after its own RECOMPUTE, or, in an
// overlapped pair, the pair's forward does; every RECOMPUTE belongs to such a backward.
void expect_recompute_before_every_backward(const Schedule& schedule) {
  const PipelineShape& shape = schedule.shape;
  int backwards = 0, recomputes = 0;
  for (const auto& list : schedule.workers) {
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      recomputes += a.kind == ActionKind::RECOMPUTE;
      if (!is_backward(a.kind) || !shape.recomputes(a.stage)) continue;
      ++backwards;
      std::size_t before = i - 1;
      if (i >= 1 && list[i - 1].overlap) before = i - 2;  // R goes before the overlapped pair
      ASSERT_LT(before, list.size()) << schedule.name << ": " << to_text(a) << " has nothing before it";
      const Action& r = list[before];
      EXPECT_EQ(r.kind, ActionKind::RECOMPUTE) << schedule.name << ": before " << to_text(a) << " is " << to_text(r);
      EXPECT_EQ(std::tie(r.stage, r.microbatch, r.iteration), std::tie(a.stage, a.microbatch, a.iteration));
    }
  }
  EXPECT_GT(backwards, 0);
  EXPECT_EQ(recomputes, backwards) << schedule.name;
}

TEST(Recomputation, LoweringPutsOneRecomputeDirectlyBeforeEveryBackward) {
  const std::vector<std::pair<std::string, PipelineShape>> cases = {
      {"gpipe", testing::straight(3)},           {"1f1b", testing::pipeline({2, 1, 3})},
      {"zb-h1", testing::straight(3)},           {"interleaved", testing::interleaved(2, 2)},
      {"dualpipe-v", testing::v_shaped(2)},      {"pipedream", testing::pipeline({2, 1})}};
  for (const auto& [name, shape] : cases) {
    const Schedule schedule = testing::lowered(name, recomputing(shape), 4, 2);
    expect_recompute_before_every_backward(schedule);
    EXPECT_NO_THROW(validate_schedule(schedule)) << name;
  }
  // Only stage 1 of three recomputes: R for its backwards alone.
  const Schedule mixed = testing::lowered("1f1b", recomputing(testing::straight(3), {false, true, false}), 4);
  expect_recompute_before_every_backward(mixed);
  for (const auto& list : mixed.workers) {
    for (const Action& a : list) {
      if (a.kind == ActionKind::RECOMPUTE) {
        EXPECT_EQ(a.stage, 1);
      }
    }
  }
  // A recomputing last stage's R comes after the gradient of the stage before arrives: 1RECV_B0, 1R0, 1B0.
  const Schedule two = testing::lowered("1f1b", recomputing(testing::straight(2)), 2);
  std::vector<std::string> worker0;
  for (const Action& a : two.workers[0]) worker0.push_back(to_text(a));
  const auto b0 = std::find(worker0.begin(), worker0.end(), "0B0");
  ASSERT_NE(b0, worker0.end());
  EXPECT_EQ(*(b0 - 1), "0R0");
  EXPECT_EQ(*(b0 - 2), "0RECV_B0");
}

using testing::rejection;

TEST(Recomputation, TheValidatorRefusesAMissingOrAStrayRecompute) {
  Schedule missing = testing::lowered("1f1b", recomputing(testing::straight(2)), 4);
  auto& worker = missing.workers[1];
  worker.erase(std::find_if(worker.begin(), worker.end(), [](const Action& a) { return to_text(a) == "1R2"; }));
  const Error before = rejection(missing);
  EXPECT_THAT(before.what(), HasSubstr("comes before its recomputation"));
  EXPECT_THAT(before.context().field, HasSubstr("(1B2)"));

  Schedule stray = testing::lowered("1f1b", recomputing(testing::straight(2)), 4);
  stray.shape.recomputed = {true, false};  // the plan says stage 1 keeps its activations
  EXPECT_THAT(rejection(stray).what(), HasSubstr("recomputes a stage that keeps its activations"));

  Schedule early = testing::lowered("gpipe", recomputing(testing::straight(1)), 2);
  auto& only = early.workers[0];
  const auto f1 = std::find_if(only.begin(), only.end(), [](const Action& a) { return to_text(a) == "0F1"; });
  const auto r1 = std::find_if(only.begin(), only.end(), [](const Action& a) { return to_text(a) == "0R1"; });
  std::iter_swap(f1, r1);  // R before its own forward
  EXPECT_THAT(rejection(early).what(), HasSubstr("before the forward"));
}

// 1F1B and GPipe with uniform stages and free links take (m + p - 1)(f + b) (Simulation's closed
// forms); a recompute of r before every backward takes (m + p - 1)(f + b + r): R runs as part of the
// backward, after its gradient arrives.
TEST(Recomputation, ItAddsItsTimeToEveryBackwardOnTheCriticalPath) {
  const double f = 1.0, b = 2.0, r = 0.75;
  for (const std::string name : {"gpipe", "1f1b"}) {
    for (auto [p, m] : {std::pair{2, 1}, std::pair{3, 5}, std::pair{4, 8}}) {
      std::vector<StageTimes> times = uniform_stage_times(p, f, b);
      for (StageTimes& t : times) t.recompute_s = r;
      const Evaluation plain = evaluate_schedule(testing::lowered(name, testing::straight(p), m), times, {});
      const Evaluation recomputed = evaluate_schedule(testing::lowered(name, recomputing(testing::straight(p)), m), times, {});
      EXPECT_DOUBLE_EQ(plain.makespan_s, (m + p - 1) * (f + b)) << name;
      EXPECT_DOUBLE_EQ(recomputed.makespan_s, (m + p - 1) * (f + b + r)) << name << " p=" << p << " m=" << m;
      EXPECT_DOUBLE_EQ(recomputed.compute_busy_s[0], m * (f + b + r));  // R counts as compute
    }
  }
}

// GPipe on 2 stages, 4 microbatches: each worker forwards all 4 (4 stashes), then recomputes and
// backwards one at a time, so its peak is 4 stashes + one microbatch's rebuilt activations.
TEST(Recomputation, MemoryHoldsTheStashesAndOneRebuiltMicrobatch) {
  const Schedule schedule = testing::lowered("gpipe", recomputing(testing::straight(2)), 4);
  const std::vector<WorkerMemory> memory = schedule_memory(schedule, {1e9, 2e9}, {5e9, 7e9});
  EXPECT_DOUBLE_EQ(memory[0].activation_bytes_at_peak, 4 * 1e9 + 5e9);
  EXPECT_DOUBLE_EQ(memory[1].activation_bytes_at_peak, 4 * 2e9 + 7e9);
  EXPECT_DOUBLE_EQ(memory[0].peak_bytes, 4 * 1e9 + 5e9 + 1e7);  // + the stage's weights (10 MB)
  // Without recomputation the same stashes alone (their activation bytes would be the full ones).
  const Schedule plain = testing::lowered("gpipe", testing::straight(2), 4);
  EXPECT_DOUBLE_EQ(schedule_memory(plain, {1e9, 2e9}, {5e9, 7e9})[0].activation_bytes_at_peak, 4 * 1e9);
}

// recompute_every_stage: stage s keeps stage s-1's output per microbatch in flight, rebuilds its own
// activations once, and pays its forward again. Two stages, 1F1B on 2 workers: stage 0 has 2
// microbatches in flight, stage 1 one.
TEST(Recomputation, APlanRecomputingEveryStageCountsItsMemoryAndTime) {
  Plan plan = testing::hand_plan({{{0}, 1.0, 2.0, 3e6, 1e8}, {{1}, 1.5, 3.0, 0.0, 2e8}}, 2);
  plan.stages[0].activation_bytes = 4e9, plan.stages[1].activation_bytes = 6e9;
  recompute_every_stage(plan);
  const PlanStage& first = plan.stages[0];
  const PlanStage& second = plan.stages[1];
  EXPECT_TRUE(first.recomputed && second.recomputed);
  EXPECT_DOUBLE_EQ(first.recompute_s, 1.0);
  EXPECT_DOUBLE_EQ(first.compute_s, 4.0);
  EXPECT_DOUBLE_EQ(first.activation_bytes, 0.0);  // the first stage's input is the data
  EXPECT_DOUBLE_EQ(second.activation_bytes, 3e6);  // stage 0's output
  EXPECT_DOUBLE_EQ(second.recompute_bytes, 6e9);
  EXPECT_EQ(first.in_flight, 2);
  EXPECT_DOUBLE_EQ(first.memory_bytes, 2 * (1e8 + 0.0) + 1e8 + 4e9);     // weights, optimizer copy, one rebuilt
  EXPECT_DOUBLE_EQ(second.memory_bytes, 1 * (2e8 + 3e6) + 2e8 + 6e9);
  recompute_every_stage(plan);  // twice is once
  EXPECT_DOUBLE_EQ(plan.stages[1].compute_s, 1.5 + 3.0 + 1.5);

  // JSON: the fields come back; a plan that does not recompute writes none of them.
  const Plan loaded = plan_from_json(plan_to_json(plan), "plan.json");
  EXPECT_TRUE(loaded.stages[1].recomputed);
  EXPECT_DOUBLE_EQ(loaded.stages[1].recompute_s, 1.5);
  EXPECT_DOUBLE_EQ(loaded.stages[1].recompute_bytes, 6e9);
  const nlohmann::json plain = plan_to_json(testing::straight_plan(2, 1.0, 2.0));
  EXPECT_FALSE(plain["stages"][0].contains("recompute_s"));
  EXPECT_FALSE(plan_from_json(plain, "plan.json").stages[0].recomputed);
}

// The built schedule of a recomputing plan: the plan's stage times give R its duration, its memory
// report counts the rebuilt bytes, and a CSV of it loads back as it was.
TEST(Recomputation, ABuiltScheduleCarriesItThroughTheCsvFormats) {
  Plan plan = testing::straight_plan(2, 1.0, 2.0);
  plan.stages[0].activation_bytes = plan.stages[1].activation_bytes = 1e9;
  recompute_every_stage(plan);
  ScheduleRequest request;
  request.name = "1f1b";
  const BuiltSchedule built = build_schedule(plan, request);
  const Evaluation evaluation = evaluate_schedule(built.schedule, stage_times_from_plan(plan), {});
  EXPECT_DOUBLE_EQ(evaluation.makespan_s, (4 + 2 - 1) * (1.0 + 2.0 + 1.0));
  EXPECT_DOUBLE_EQ(built.report.memory[1].activation_bytes_at_peak, 1e6 + 1e9);  // stage 0's output + rebuilt

  testing::TempDir dir;
  json_fields::write_text_atomically(dir.file("s.csv"), schedule_to_csv(built.schedule));
  request.file = dir.file("s.csv");
  EXPECT_EQ(build_schedule(plan, request).schedule.workers, built.schedule.workers);

  // torch's format has no recomputation: the export leaves R out, the plan puts it back on import.
  const std::string torch = schedule_to_torch_csv(built.schedule, false, built.report.unit_run);
  EXPECT_THAT(torch, ::testing::Not(HasSubstr("R0")));
  json_fields::write_text_atomically(dir.file("torch.csv"), torch);
  request.file = dir.file("torch.csv");
  const Schedule imported = build_schedule(plan, request).schedule;
  expect_recompute_before_every_backward(imported);
}

}  // namespace
}  // namespace pipetwin
