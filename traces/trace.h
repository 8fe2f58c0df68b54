// Trace — one event per executed action, the format both back ends write (DESIGN.md "Trace").
//
// A trace has a header (source "simulated" or "measured", what was run: profile, cluster, schedule,
// microbatches, iterations, warm-up iterations; made in one place, trace_header) and events (worker,
// stage, kind, microbatch, iteration, start_s, end_s, bytes, peer, message: the schedule's message id,
// shared by a send and its receive, -1 for compute). Files: JSON lines ("pipetwin.trace/1": the header on the first line,
// one event per line) or CSV, and an export to Chrome trace JSON for Perfetto. Writing is
// deterministic (fixed field order, %.17g numbers) and atomic; readers throw pipetwin::Error naming
// the file, line and field.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "planner/schedule.h"

namespace pipetwin {

struct TraceEvent {
  int worker = 0;
  int stage = 0;
  ActionKind kind = ActionKind::FORWARD;  // written as its DESIGN.md name: FORWARD, ..., SEND_ACT, OPTIMIZER_STEP
  int microbatch = -1;
  int iteration = 0;
  double start_s = 0.0;
  double end_s = 0.0;
  double bytes = 0.0;
  int peer = -1;
  int message = -1;     // the action's message id in the schedule (sends, receives, all-reduces)
};

struct TraceHeader {
  std::string source;       // "simulated" or "measured"
  std::string profile, cluster, schedule;
  int workers = 0;
  int stages = 0;
  int microbatches = 0;
  int microbatch_size = 0;
  int iterations = 0;
  int warmup_iterations = 0;
  nlohmann::json extra = nlohmann::json::object();  // anything else a back end wants to record
};

struct Trace {
  TraceHeader header;
  std::vector<TraceEvent> events;  // sorted by (start_s, worker, end_s) when written
};

// The header of a trace of `schedule`, for both back ends: its name, workers, stages, microbatches,
// iterations and chunks (in extra), with what ran it.
TraceHeader trace_header(const Schedule& schedule, const std::string& source, const std::string& profile,
                         const std::string& cluster, int microbatch_size, int warmup_iterations);

void sort_events(Trace& trace);

std::string trace_to_jsonl(const Trace& trace);
std::string trace_to_csv(const Trace& trace);
std::string trace_to_chrome_json(const Trace& trace);
Trace trace_from_jsonl(const std::string& text, const std::string& path);

// Writes JSON lines, or CSV when the path ends in ".csv". Atomic.
void write_trace(const Trace& trace, const std::string& path);
void write_chrome_trace(const Trace& trace, const std::string& path);
Trace load_trace(const std::string& path);  // JSON lines

}  // namespace pipetwin
