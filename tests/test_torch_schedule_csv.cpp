// torch.distributed.pipelining's schedule CSV: round trips of every schedule with a flush, files
// written by hand, and the strictness torch's own reader lacks.
#include "planner/torch_schedule_csv.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "planner/error.h"
#include "planner/schedule_builder.h"
#include "planner/schedule_generators.h"
#include "planner/schedule_validator.h"
#include "schedule_support.h"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;

struct Case {
  std::string name;
  PipelineShape shape;
  int microbatches;
};

std::vector<Case> every_flushed_schedule() {
  return {{"gpipe", testing::straight(3), 4},           {"1f1b", testing::straight(4), 6},
          {"interleaved", testing::interleaved(2, 2), 4}, {"looped-bfs", testing::interleaved(3, 2), 3},
          {"zb-h1", testing::straight(3), 5},           {"zb-h2", testing::straight(3), 5},
          {"interleaved-zb", testing::interleaved(2, 3), 5}, {"zb-v", testing::v_shaped(3), 6},
          {"dualpipe-v", testing::v_shaped(3), 7}};
}

TEST(TorchScheduleCsv, EveryFlushedScheduleRoundTripsInBothForms) {
  int checked = 0;
  for (const Case& c : every_flushed_schedule()) {
    const Schedule original = testing::lowered(c.name, c.shape, c.microbatches);
    const ValidationReport report = validate_schedule(original);
    for (bool with_communication : {false, true}) {
      const std::string csv = schedule_to_torch_csv(original, with_communication, report.unit_run);
      const TorchScheduleFile file = torch_schedule_from_csv(csv, "t.csv");
      EXPECT_EQ(file.with_communication, with_communication) << c.name;
      EXPECT_EQ(file.microbatches, c.microbatches);
      PipelineShape shape = c.shape;
      const Schedule back = schedule_from_torch(file, shape, "t.csv");
      ASSERT_EQ(back.workers.size(), original.workers.size()) << c.name;
      for (std::size_t w = 0; w < back.workers.size(); ++w) {
        EXPECT_EQ(back.workers[w], original.workers[w]) << c.name << " worker " << w << " comms " << with_communication;
      }
      EXPECT_EQ(back.shape.stage_workers, original.shape.stage_workers) << c.name;
      // Written again, the same text.
      EXPECT_EQ(schedule_to_torch_csv(back, with_communication, validate_schedule(back).unit_run), csv) << c.name;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 18);
}

TEST(TorchScheduleCsv, ComputeOnlyFormLeavesIdleStepsEmptyAndPairsOverlaps) {
  const Schedule schedule = testing::lowered("1f1b", testing::straight(2), 2);
  const std::string csv = schedule_to_torch_csv(schedule, false, validate_schedule(schedule).unit_run);
  // Unit times: rank 1 waits one step for 0F0, rank 0 waits for 1B0 before its B0.
  EXPECT_EQ(csv, "0F0,0F1,,0B0,,0B1\n,1F0,1B0,1F1,1B1\n");
  const Schedule dualpipe = testing::lowered("dualpipe-v", testing::v_shaped(2), 4);
  const std::string with_comms = schedule_to_torch_csv(dualpipe, true, validate_schedule(dualpipe).unit_run);
  EXPECT_THAT(with_comms, HasSubstr(")OVERLAP_F_B"));
  EXPECT_THAT(with_comms, HasSubstr("0SEND_F"));
  EXPECT_THAT(with_comms, HasSubstr("0RECV_B0"));
}

TEST(TorchScheduleCsv, AHandWrittenZeroBubbleFileLoadsAndValidates) {
  Plan plan;
  plan.workers = 2;
  plan.microbatches = 4;
  for (int s = 0; s < 2; ++s) {
    PlanStage stage;
    stage.devices = {s};
    stage.replicas = 1;
    stage.output_activation_bytes = 1e6;
    plan.stages.push_back(stage);
  }
  ScheduleRequest request;
  request.file = PIPETWIN_SOURCE_DIR "/tests/data/torch_zero_bubble_2_ranks.csv";
  request.iterations = 2;
  const BuiltSchedule built = build_schedule(plan, request);
  EXPECT_EQ(built.schedule.microbatches, 4);
  EXPECT_EQ(built.schedule.iterations, 2);
  EXPECT_TRUE(built.report.unit_run.completed);
  int weights = 0, sends = 0;
  for (const Action& action : built.schedule.workers[1]) {
    weights += action.kind == ActionKind::BACKWARD_WEIGHT;
    sends += action.kind == ActionKind::SEND_GRAD;
  }
  EXPECT_EQ(weights, 8);  // 4 per iteration
  EXPECT_EQ(sends, 8);    // lowering added a gradient send after every 1I
}

TEST(TorchScheduleCsv, StricterThanTorch) {
  struct Bad {
    std::string text, expected;
  };
  for (const Bad& bad : std::vector<Bad>{
           {"0F0,0F1x\n", "'0F1x': has 'x' after the action"},
           {"0F0,0BW0\n", "'BW' is torch's old spelling"},
           {"0UNSHARD,0F0\n", "does not model FSDP"},
           {"0F0,0Q1\n", "'Q' is not an action type"},
           {"0F0\n0F1\n", "stage 0 is already on rank 0"},
           {"0F0,2F0\n", "no rank runs stage 1"},
           {"(0F0;1I0)OVERLAP_F_B\n", "pairs something other than a forward and a full backward"},
           {"(0F0;1B0)OVERLAP\n", "is not an overlapped pair"},
           {"0F\n", "has no microbatch"},
           {"0REDUCE_GRAD3\n", "REDUCE_GRAD takes no microbatch"},
           {"", "empty schedule file"},
       }) {
    try {
      torch_schedule_from_csv(bad.text, "t.csv");
      ADD_FAILURE() << "accepted " << bad.text;
    } catch (const Error& error) {
      EXPECT_THAT(error.what(), HasSubstr(bad.expected)) << bad.text;
      EXPECT_THAT(error.what(), HasSubstr("t.csv")) << bad.text;
    }
  }
  try {
    torch_schedule_from_csv("0F0,0F1\n1F0,1F1x\n", "t.csv");
  } catch (const Error& error) {
    EXPECT_EQ(error.context().line, 2);
    EXPECT_EQ(error.context().field, "column 2");
  }
}

TEST(TorchScheduleCsv, RefusesWhatTorchsFormCannotSay) {
  const Schedule replicated = testing::lowered("1f1b", testing::pipeline({2, 1}), 4);
  EXPECT_THROW(schedule_to_torch_csv(replicated, false, validate_schedule(replicated).unit_run), Error);
  const Schedule async = testing::lowered("pipedream", testing::straight(2), 4, 2);
  EXPECT_THROW(schedule_to_torch_csv(async, false, validate_schedule(async).unit_run), Error);
}

}  // namespace
}  // namespace pipetwin
