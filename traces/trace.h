// Trace — one event per executed action, the format both back ends write (DESIGN.md "Trace").
//
// A trace has a header (source "simulated" or "measured", what was run: profile, cluster, schedule,
// microbatches, iterations, warm-up iterations) and events (worker, stage, kind, microbatch, iteration,
// start_s, end_s, bytes, peer). Files: JSON lines ("pipetwin.trace/1": the header on the first line,
// one event per line) or CSV, and an export to Chrome trace JSON for Perfetto. Writing is
// deterministic (fixed field order, %.17g numbers) and atomic; readers throw pipetwin::Error naming
// the file, line and field.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace pipetwin {

struct TraceEvent {
  int worker = 0;
  int stage = 0;
  std::string kind;     // DESIGN.md kind name: FORWARD, BACKWARD, ..., SEND_ACT, ALLREDUCE, OPTIMIZER_STEP
  int microbatch = -1;
  int iteration = 0;
  double start_s = 0.0;
  double end_s = 0.0;
  double bytes = 0.0;
  int peer = -1;
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
