#include "planner/schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "planner/error.h"
#include "schedule_support.h"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;

TEST(ScheduleText, PrintsAndParsesEveryKind) {
  EXPECT_EQ(to_text({2, ActionKind::FORWARD, 0}), "2F0");
  EXPECT_EQ(to_text({1, ActionKind::SEND_ACT, 3}), "1SEND_F3");
  EXPECT_EQ(to_text({0, ActionKind::RECV_GRAD, 5}), "0RECV_B5");
  EXPECT_EQ(to_text({1, ActionKind::OPTIMIZER_STEP, -1}), "1OPT");
  for (ActionKind kind : {ActionKind::FORWARD, ActionKind::BACKWARD, ActionKind::BACKWARD_INPUT,
                          ActionKind::BACKWARD_WEIGHT, ActionKind::SEND_ACT, ActionKind::RECV_ACT, ActionKind::SEND_GRAD,
                          ActionKind::RECV_GRAD, ActionKind::ALLREDUCE, ActionKind::OPTIMIZER_STEP}) {
    const Action action{12, kind, 34};
    EXPECT_EQ(action_from_text(to_text(action), "t"), action) << to_text(action);
  }
  EXPECT_EQ(action_from_text("3ALLREDUCE", "t").microbatch, -1);
  for (const char* bad : {"F0", "2X0", "2F", "2F-1", "", "2SEND_F", "a2F0"}) {
    EXPECT_THROW(action_from_text(bad, "t"), Error) << bad;
  }
}

TEST(ScheduleCsv, RoundTripsEveryScheduleExactly) {
  const std::vector<std::pair<std::string, PipelineShape>> cases = {
      {"gpipe", testing::pipeline({1, 2, 1})},  {"1f1b", testing::pipeline({2, 1})},
      {"pipedream", testing::pipeline({2, 1})}, {"2bw", testing::straight(3)},
      {"interleaved", testing::interleaved(2, 2)}, {"zb-h1", testing::straight(3)}};
  for (const auto& [name, shape] : cases) {
    const Schedule schedule = testing::lowered(name, shape, 4, 2);
    const std::string csv = schedule_to_csv(schedule);
    EXPECT_EQ(actions_from_csv(csv, "s.csv", shape.workers), schedule.workers) << name;
  }
}

TEST(ScheduleCsv, MalformedRowsNameLineAndColumn) {
  const Schedule schedule = testing::lowered("1f1b", testing::straight(2), 2);
  const std::string csv = schedule_to_csv(schedule);
  const std::string header = csv.substr(0, csv.find('\n') + 1);
  struct Case {
    std::string text;
    int line;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"worker,action\n", 1, "header"},
      {header + "0,0,0F0,0,FORWARD,0,-1\n", 2, "row"},
      {header + "0,1,0F0,0,FORWARD,0,-1,0\n", 2, "index"},
      {header + "5,0,0F0,0,FORWARD,0,-1,0\n", 2, "worker"},
      {header + "0,0,0F0,0,BACKWARD,0,-1,0\n", 2, "kind"},
      {header + "0,0,0F0,0,FORWARD,0,-1,0\n0,1,0SEND_F0,0,SEND_ACT,0,7,1e6\n", 3, "peer"},
      {header + "0,0,0F0,0,FORWARD,0,-1,lots\n", 2, "bytes"},
  };
  for (const Case& c : cases) {
    try {
      actions_from_csv(c.text, "s.csv", 2);
      FAIL() << c.text;
    } catch (const Error& error) {
      EXPECT_EQ(error.context().file, "s.csv");
      EXPECT_EQ(error.context().line, c.line) << error.what();
      EXPECT_EQ(error.context().field, c.field) << error.what();
    }
  }
}

}  // namespace
}  // namespace pipetwin
