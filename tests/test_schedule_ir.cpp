#include "planner/schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include <map>
#include <tuple>

#include "planner/error.h"
#include "planner/schedule_interpreter.h"
#include "schedule_support.h"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;

TEST(ScheduleText, PrintsAndParsesEveryKind) {
  EXPECT_EQ(to_text({.stage = 2, .kind = ActionKind::FORWARD, .microbatch = 0}), "2F0");
  EXPECT_EQ(to_text({.stage = 1, .kind = ActionKind::SEND_ACT, .microbatch = 3}), "1SEND_F3");
  EXPECT_EQ(to_text({.stage = 0, .kind = ActionKind::RECV_GRAD, .microbatch = 5}), "0RECV_B5");
  EXPECT_EQ(to_text({.stage = 1, .kind = ActionKind::OPTIMIZER_STEP, .microbatch = -1}), "1OPT");
  for (ActionKind kind : {ActionKind::FORWARD, ActionKind::BACKWARD, ActionKind::BACKWARD_INPUT,
                          ActionKind::BACKWARD_WEIGHT, ActionKind::SEND_ACT, ActionKind::RECV_ACT, ActionKind::SEND_GRAD,
                          ActionKind::RECV_GRAD, ActionKind::ALLREDUCE, ActionKind::OPTIMIZER_STEP}) {
    const Action action{.stage = 12, .kind = kind, .microbatch = 34};
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
      {"interleaved", testing::interleaved(2, 2)}, {"zb-h1", testing::straight(3)},
      {"looped-bfs", testing::interleaved(2, 2)}, {"zb-h2", testing::straight(3)},
      {"interleaved-zb", testing::interleaved(2, 2)}, {"zb-v", testing::v_shaped(2)},
      {"dualpipe-v", testing::v_shaped(2)}};
  for (const auto& [name, shape] : cases) {
    const Schedule schedule = testing::lowered(name, shape, 4, 2);
    const std::string csv = schedule_to_csv(schedule);
    const ScheduleFile file = schedule_file_from_csv(csv, "s.csv");
    EXPECT_EQ(file.actions, schedule.workers) << name;
    EXPECT_EQ(file.name, name);
    EXPECT_EQ(file.microbatches, 4);
    EXPECT_EQ(file.iterations, 2);
    EXPECT_EQ(file.chunks, shape.chunks);
    EXPECT_EQ(file.workers, shape.workers);
    Schedule loaded = schedule;
    loaded.workers = file.actions;
    EXPECT_EQ(schedule_to_csv(loaded), csv) << name;  // byte for byte
  }
}

// Every iteration is laid out, every pass carries (iteration, microbatch within it), every send has
// the id of exactly one receive, and ids are unique.
TEST(ScheduleBuilder, UnrollsEveryIterationAndNumbersEveryMessage) {
  for (const std::string name : {"1f1b", "pipedream"}) {
    const Schedule schedule = testing::lowered(name, testing::pipeline({1, 2}), 4, 3);
    EXPECT_EQ(schedule.iterations, 3);
    std::map<std::tuple<int, int, ActionKind>, int> passes;  // (iteration, microbatch, kind) on stage 0
    std::map<int, int> sends, receives;
    for (const auto& actions : schedule.workers) {
      for (const Action& a : actions) {
        if (is_pass(a.kind)) {
          EXPECT_GE(a.microbatch, 0);
          EXPECT_LT(a.microbatch, 4);
          EXPECT_GE(a.iteration, 0);
          EXPECT_LT(a.iteration, 3);
          if (a.stage == 0) ++passes[{a.iteration, a.microbatch, a.kind}];
        }
        if (is_send(a.kind)) ++sends[a.message];
        if (is_receive(a.kind)) ++receives[a.message];
      }
    }
    EXPECT_EQ(passes.size(), 3u * 4u * 2u) << name;  // F and B of 4 microbatches in each of 3 iterations
    for (const auto& [key, count] : passes) EXPECT_EQ(count, 1) << name;
    // One boundary (stage 0 -> 1), activation and gradient, 4 microbatches, 3 iterations.
    EXPECT_EQ(sends.size(), 2u * 4u * 3u) << name;
    EXPECT_EQ(sends, receives) << name;
    for (const auto& [id, count] : sends) {
      EXPECT_GE(id, 0);
      EXPECT_EQ(count, 1);
    }
  }
}

// A runtime that only counts: the interpreter hands every action to the right method and tells each
// iteration's end once, after its last action, even where iterations interleave (no flush).
class CountingRuntime final : public ScheduleRuntime {
 public:
  double now_s() override { return static_cast<double>(actions); }
  void compute(const Action&) override { ++actions; }
  void send(const Action&) override { ++actions; }
  void receive(const Action&) override { ++actions; }
  void all_reduce(const Action&) override { ++actions; }
  void optimizer_step(const Action&) override { ++actions; }
  void tensor_all_reduce(const Action&, ActionKind) override { ++actions; }
  void end_of_iteration(int iteration) override { ended.push_back({iteration, actions}); }
  int actions = 0;
  std::vector<std::pair<int, int>> ended;  // (iteration, actions done when it was told)
};

TEST(ScheduleInterpreter, RunsEveryActionAndEndsEachIterationOnceAfterItsLastAction) {
  for (const std::string name : {"1f1b", "pipedream"}) {
    const Schedule schedule = testing::lowered(name, testing::straight(3), 4, 3);
    const auto& actions = schedule.workers[0];
    CountingRuntime runtime;
    int recorded = 0;
    interpret(actions, runtime, [&](const Action& action, double start_s, double end_s) {
      EXPECT_EQ(action, actions[recorded]);
      EXPECT_EQ(end_s, start_s + 1);
      ++recorded;
    });
    EXPECT_EQ(recorded, static_cast<int>(actions.size())) << name;
    ASSERT_EQ(runtime.ended.size(), 3u) << name;
    for (const auto& [iteration, done] : runtime.ended) {
      int last = 0;  // 1 + the index of the iteration's last action
      for (std::size_t i = 0; i < actions.size(); ++i) last = actions[i].iteration == iteration ? static_cast<int>(i) + 1 : last;
      EXPECT_EQ(done, last) << name << " iteration " << iteration;
    }
  }
}

TEST(ScheduleCsv, RefusesTheOldFormatAndABadFirstLine) {
  const std::string old = "worker,index,action,stage,kind,microbatch,peer,bytes\n0,0,0F0,0,FORWARD,0,-1,0\n";
  try {
    schedule_file_from_csv(old, "old.csv");
    FAIL();
  } catch (const Error& error) {
    EXPECT_EQ(error.context().field, "format");
    EXPECT_THAT(error.what(), HasSubstr("regenerate"));
  }
  const std::string header = "worker,index,action,stage,kind,microbatch,iteration,peer,bytes,message,overlap\n";
  for (const auto& [first, field] : std::vector<std::pair<std::string, std::string>>{
           {"# pipetwin.schedule/3,name=1f1b,microbatches=4,iterations=1,chunks=1", "workers"},
           {"# pipetwin.schedule/3,name=1f1b,microbatches=0,iterations=1,chunks=1,workers=2", "microbatches"},
           {"# pipetwin.schedule/3,name=1f1b,microbatches=4,iterations=1,chunks=1,workers=2,colour=red", "colour"}}) {
    try {
      schedule_file_from_csv(first + "\n" + header, "s.csv");
      FAIL() << first;
    } catch (const Error& error) {
      EXPECT_EQ(error.context().line, 1);
      EXPECT_EQ(error.context().field, field) << error.what();
    }
  }
}

// pipetwin.schedule/2 files (written before the overlap column) still load, every action unpaired.
TEST(ScheduleCsv, ReadsTheSecondFormWithoutTheOverlapColumn) {
  const Schedule schedule = testing::lowered("1f1b", testing::straight(2), 2);
  std::string v2;
  std::istringstream in(schedule_to_csv(schedule));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# pipetwin.schedule/3", 0) == 0) line.replace(0, 21, "# pipetwin.schedule/2");
    else line = line.substr(0, line.rfind(','));  // drop the overlap column (and its header)
    v2 += line + "\n";
  }
  const ScheduleFile file = schedule_file_from_csv(v2, "v2.csv");
  EXPECT_EQ(file.actions, schedule.workers);
  // ... and a /2 header with an overlap column is refused.
  EXPECT_THROW(schedule_file_from_csv(schedule_to_csv(schedule).replace(0, 21, "# pipetwin.schedule/2"), "v2.csv"), Error);
}

TEST(ScheduleCsv, MalformedRowsNameLineAndColumn) {
  const Schedule schedule = testing::lowered("1f1b", testing::straight(2), 2);
  const std::string csv = schedule_to_csv(schedule);
  const std::size_t second_line = csv.find('\n') + 1;
  const std::string header = csv.substr(0, csv.find('\n', second_line) + 1);  // the description and the header
  struct Case {
    std::string text;
    int line;
    std::string field;
  };
  const std::vector<Case> cases = {
      {csv.substr(0, second_line) + "worker,action\n", 2, "header"},
      {header + "0,0,0F0,0,FORWARD,0,0,-1\n", 3, "row"},
      {header + "0,0,0F0,0,FORWARD,0,0,-1,0,-1\n", 3, "row"},  // the overlap column is missing
      {header + "0,1,0F0,0,FORWARD,0,0,-1,0,-1,0\n", 3, "index"},
      {header + "5,0,0F0,0,FORWARD,0,0,-1,0,-1,0\n", 3, "worker"},
      {header + "0,0,0F0,0,BACKWARD,0,0,-1,0,-1,0\n", 3, "kind"},
      {header + "0,0,0F0,0,FORWARD,0,3,-1,0,-1,0\n", 3, "iteration"},
      {header + "0,0,0F0,0,FORWARD,0,0,-1,0,-1,0\n0,1,0SEND_F0,0,SEND_ACT,0,0,7,1e6,0,0\n", 4, "peer"},
      {header + "0,0,0F0,0,FORWARD,0,0,-1,lots,-1,0\n", 3, "bytes"},
      {header + "0,0,0SEND_F0,0,SEND_ACT,0,0,1,1e6,x,0\n", 3, "message"},
      {header + "0,0,0F0,0,FORWARD,0,0,-1,0,-1,yes\n", 3, "overlap"},
  };
  for (const Case& c : cases) {
    try {
      schedule_file_from_csv(c.text, "s.csv");
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
