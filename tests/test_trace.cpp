#include "traces/trace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "planner/error.h"
#include "test_support.h"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;

Trace sample() {
  Trace trace;
  trace.header = {"simulated", "vgg16", "cluster-a", "1f1b", 2, 2, 4, 64, 3, 1, {{"note", "x"}}};
  trace.events = {{1, 1, ActionKind::FORWARD, 0, 0, 0.5, 1.25, 0, -1}, {0, 0, ActionKind::FORWARD, 0, 0, 0.0, 0.5, 0, -1},
                  {0, 0, ActionKind::SEND_ACT, 0, 0, 0.5, 0.5000001, 1e6, 1, 0}};
  sort_events(trace);
  return trace;
}

TEST(Trace, SortsByStartThenWorker) {
  const Trace trace = sample();
  EXPECT_EQ(trace.events[0].kind, ActionKind::FORWARD);
  EXPECT_EQ(trace.events[0].worker, 0);
  EXPECT_EQ(trace.events[1].kind, ActionKind::SEND_ACT);
  EXPECT_EQ(trace.events[2].worker, 1);
}

TEST(Trace, JsonLinesRoundTripExactly) {
  const Trace trace = sample();
  testing::TempDir dir;
  write_trace(trace, dir.file("t.jsonl"));
  const Trace loaded = load_trace(dir.file("t.jsonl"));
  EXPECT_EQ(trace_to_jsonl(loaded), trace_to_jsonl(trace));
  EXPECT_EQ(loaded.header.extra.at("note"), "x");
  EXPECT_DOUBLE_EQ(loaded.events[1].end_s, 0.5000001);
}

TEST(Trace, CsvAndChromeExports) {
  const Trace trace = sample();
  const std::string csv = trace_to_csv(trace);
  EXPECT_THAT(csv, HasSubstr("worker,stage,kind,microbatch,iteration,start_s,end_s,bytes,peer,message\n"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 4);
  const auto chrome = nlohmann::json::parse(trace_to_chrome_json(trace));
  const auto& events = chrome.at("traceEvents");
  int complete = 0;
  for (const auto& e : events) {
    if (e.at("ph") == "X") {
      ++complete;
      if (e.at("tid") == 1) {
        EXPECT_DOUBLE_EQ(e.at("dur").get<double>(), 750000.0);
      }
    }
  }
  EXPECT_EQ(complete, 3);
}

TEST(Trace, BadFilesNameLineAndField) {
  const std::string header = trace_to_jsonl(sample()).substr(0, trace_to_jsonl(sample()).find('\n') + 1);
  try {
    trace_from_jsonl(header + "{\"worker\":0,\"stage\":0,\"kind\":\"FORWARD\",\"microbatch\":0,\"iteration\":0}\n", "t.jsonl");
    FAIL();
  } catch (const Error& error) {
    EXPECT_EQ(error.context().line, 2);
    EXPECT_EQ(error.context().field, "start_s");
  }
  EXPECT_THROW(trace_from_jsonl(header + "{\"worker\":9,\"stage\":0,\"kind\":\"F\",\"microbatch\":0,\"iteration\":0,"
                                         "\"start_s\":0,\"end_s\":1}\n",
                                "t.jsonl"),
               Error);
  EXPECT_THROW(trace_from_jsonl(header + "not json\n", "t.jsonl"), Error);
  EXPECT_THROW(trace_from_jsonl("{\"format\":\"pipetwin.plan/1\"}\n", "t.jsonl"), Error);
  EXPECT_THROW(trace_from_jsonl("", "t.jsonl"), Error);
}

}  // namespace
}  // namespace pipetwin
