// Importing PyTorch profiler traces of pipeline jobs: a real trace recorded by Debian's python3-torch
// (tests/kineto_trace.py, record_function("PP:<action>") as torch.distributed.pipelining labels its
// actions), a merged Kineto-form file written by hand, and malformed input.
#include "traces/kineto_import.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "planner/error.h"
#include "planner/json_fields.h"
#include "test_support.h"
#include "traces/trace_compare.h"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;

TEST(KinetoImport, ARealProfilerTraceBecomesTheActionsTheScriptRan) {
  testing::TempDir dir;
  const auto recorded = testing::run_command("/usr/bin/python3 " PIPETWIN_SOURCE_DIR "/tests/kineto_trace.py " + dir.path());
  ASSERT_EQ(recorded.exit_code, 0) << recorded.output << "\n(python3-torch comes with scripts/install-deps.sh)";
  const auto imported = testing::run_pipetwin("import-trace " + dir.file("rank0.json") + " " + dir.file("rank1.json") +
                                              " --profile script -o " + dir.file("measured.jsonl"));
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  const Trace trace = load_trace(dir.file("measured.jsonl"));
  EXPECT_EQ(trace.header.source, "measured");
  EXPECT_EQ(trace.header.workers, 2);
  EXPECT_EQ(trace.header.stages, 2);
  EXPECT_EQ(trace.header.iterations, 2);
  const auto expected = json_fields::read_file(dir.file("expected.json"));
  std::map<int, std::vector<const TraceEvent*>> by_rank;
  for (const TraceEvent& e : trace.events) by_rank[e.worker].push_back(&e);
  std::map<int, std::size_t> next;
  ASSERT_EQ(trace.events.size(), expected.size());
  for (const auto& done : expected) {
    const int rank = done.at("rank");
    ASSERT_LT(next[rank], by_rank[rank].size());
    const TraceEvent& e = *by_rank[rank][next[rank]++];
    const std::string label = done.at("label");
    EXPECT_EQ(e.stage, done.at("stage").get<int>()) << label;
    EXPECT_EQ(kind_name(e.kind), done.at("kind").get<std::string>()) << label;
    EXPECT_EQ(e.microbatch, done.at("microbatch").get<int>()) << label;
    EXPECT_EQ(e.iteration, done.at("iteration").get<int>()) << label;
    // The profiler's span encloses the script's timing inside the record_function and lies inside the
    // script's timing of the whole `with` (its entry and exit included, however long a busy machine
    // makes them); 0.1 ms for the profiler's microsecond stamps and the two clocks.
    const double inner_s = done.at("duration_s"), outer_s = done.at("outer_duration_s");
    const double duration_s = e.end_s - e.start_s;
    EXPECT_GE(duration_s, inner_s - 1e-4) << label;
    EXPECT_LE(duration_s, outer_s + 1e-4) << label << " (the script timed " << inner_s << " s inside the span)";
  }
  // compare takes it like any measured trace: against itself, no error.
  const Comparison same = compare_traces(trace, trace);
  EXPECT_NEAR(same.iteration_error, 0.0, 1e-12);
}

constexpr const char* kMerged = R"({"traceEvents": [
  {"name": "PP:0F0", "ph": "X", "ts": 1000, "dur": 100, "pid": 70, "tid": 1},
  {"name": "PP:1F0", "ph": "X", "ts": 1200, "dur": 100, "pid": 9, "tid": 1},
  {"name": "aten::mm", "ph": "X", "ts": 1210, "dur": 5, "pid": 9, "tid": 1},
  {"name": "PP:(1F1;1B0)OVERLAP_F_B", "ph": "X", "ts": 1400, "dur": 300, "pid": 9, "tid": 1},
  {"name": "PP:0F0", "ph": "X", "ts": 2000, "dur": 100, "pid": 70, "tid": 1},
  {"name": "PP:0F9", "ph": "i", "ts": 2100, "pid": 70, "tid": 1}
]})";

TEST(KinetoImport, AMergedFileTakesRanksFromPidsAndSplitsPairs) {
  const Trace trace = trace_from_kineto({{"merged.json", kMerged}}, "", "");
  ASSERT_EQ(trace.events.size(), 5u);  // aten::mm and the instant event are not pipeline actions
  EXPECT_EQ(trace.header.workers, 2);
  std::map<std::pair<int, std::string>, const TraceEvent*> found;
  for (const TraceEvent& e : trace.events) {
    found[{e.worker, to_text(Action{.stage = e.stage, .kind = e.kind, .microbatch = e.microbatch}) + "@" + std::to_string(e.iteration)}] = &e;
  }
  // pid 9 < pid 70: rank 0 holds stage 1.
  ASSERT_TRUE(found.count({0, "1F0@0"}));
  ASSERT_TRUE(found.count({1, "0F0@1"}));  // the second 0F0 is the next iteration
  const TraceEvent& forward = *found.at({0, "1F1@0"});
  const TraceEvent& backward = *found.at({0, "1B0@0"});
  EXPECT_NEAR(forward.start_s, 400e-6, 1e-12);  // times from the earliest event
  EXPECT_NEAR(forward.end_s, 550e-6, 1e-12);    // half the pair each
  EXPECT_NEAR(backward.start_s, 550e-6, 1e-12);
  EXPECT_NEAR(backward.end_s, 700e-6, 1e-12);
}

TEST(KinetoImport, MalformedTracesNameTheFileAndTheEvent) {
  struct Bad {
    std::string text, expected;
  };
  for (const Bad& bad : std::vector<Bad>{
           {"{not json", "k.json: not JSON"},
           {R"({"events": []})", "'traceEvents': missing, or not a list"},
           {R"([{"name": "PP:0F1x", "ph": "X", "ts": 1, "dur": 2}])", "'[0].name': '0F1x': has 'x' after the action"},
           {R"({"traceEvents": [{"name": "aten::mm", "ph": "X", "ts": 1, "dur": 2}, {"name": "PP:0F1", "ph": "X", "ts": 1}]})",
            "'traceEvents[1].dur': missing or not a number"},
           {R"({"traceEvents": [{"name": "aten::mm", "ph": "X", "ts": 1, "dur": 2}]})", "no \"PP:\" events"},
           {R"({"traceEvents": [{"name": "PP:0F1", "ph": "X", "ts": 1, "dur": 2}], "distributedInfo": {"rank": -1}})",
            "'distributedInfo.rank': is not a rank"},
       }) {
    try {
      trace_from_kineto({{"k.json", bad.text}}, "", "");
      ADD_FAILURE() << "accepted " << bad.text;
    } catch (const Error& error) {
      EXPECT_THAT(error.what(), HasSubstr(bad.expected)) << bad.text;
    }
  }
}

TEST(KinetoImport, TheRankComesFromDistributedInfo) {
  const std::string rank_three = R"({"traceEvents": [{"name": "PP:3F0", "ph": "X", "ts": 5, "dur": 2}],
                                     "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 4}})";
  const Trace trace = trace_from_kineto({{"r3.json", rank_three}}, "gpt", "dgx");
  ASSERT_EQ(trace.events.size(), 1u);
  EXPECT_EQ(trace.events[0].worker, 3);
  EXPECT_EQ(trace.header.workers, 4);
  EXPECT_EQ(trace.header.profile, "gpt");
}

}  // namespace
}  // namespace pipetwin
