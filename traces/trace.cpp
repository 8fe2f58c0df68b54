#include "traces/trace.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <tuple>

#include "planner/error.h"
#include "planner/json_fields.h"

namespace pipetwin {
namespace {

std::string number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.17g", value);
  return buffer;
}

nlohmann::ordered_json header_json(const TraceHeader& header) {
  nlohmann::ordered_json json;
  json["format"] = "pipetwin.trace/1";
  json["source"] = header.source;
  json["profile"] = header.profile;
  json["cluster"] = header.cluster;
  json["schedule"] = header.schedule;
  json["workers"] = header.workers;
  json["stages"] = header.stages;
  json["microbatches"] = header.microbatches;
  json["microbatch_size"] = header.microbatch_size;
  json["iterations"] = header.iterations;
  json["warmup_iterations"] = header.warmup_iterations;
  json["extra"] = nlohmann::ordered_json::parse(header.extra.dump());
  return json;
}

}  // namespace

TraceHeader trace_header(const Schedule& schedule, const std::string& source, const std::string& profile,
                         const std::string& cluster, int microbatch_size, int warmup_iterations) {
  TraceHeader header;
  header.source = source;
  header.profile = profile;
  header.cluster = cluster;
  header.schedule = schedule.name;
  header.workers = schedule.shape.workers;
  header.stages = schedule.shape.stages();
  header.microbatches = schedule.microbatches;
  header.microbatch_size = microbatch_size;
  header.iterations = schedule.iterations;
  header.warmup_iterations = warmup_iterations;
  header.extra = {{"chunks", schedule.shape.chunks}};
  return header;
}

void sort_events(Trace& trace) {
  std::stable_sort(trace.events.begin(), trace.events.end(), [](const TraceEvent& a, const TraceEvent& b) {
    return std::tie(a.start_s, a.worker, a.end_s) < std::tie(b.start_s, b.worker, b.end_s);
  });
}

std::string trace_to_jsonl(const Trace& trace) {
  std::string out = header_json(trace.header).dump() + "\n";
  for (const TraceEvent& e : trace.events) {
    out += "{\"worker\":" + std::to_string(e.worker) + ",\"stage\":" + std::to_string(e.stage) + ",\"kind\":\"" + kind_name(e.kind) +
           "\",\"microbatch\":" + std::to_string(e.microbatch) + ",\"iteration\":" + std::to_string(e.iteration) +
           ",\"start_s\":" + number(e.start_s) + ",\"end_s\":" + number(e.end_s) + ",\"bytes\":" + number(e.bytes) +
           ",\"peer\":" + std::to_string(e.peer) + ",\"message\":" + std::to_string(e.message) + "}\n";
  }
  return out;
}

std::string trace_to_csv(const Trace& trace) {
  std::string out = "worker,stage,kind,microbatch,iteration,start_s,end_s,bytes,peer,message\n";
  for (const TraceEvent& e : trace.events) {
    out += std::to_string(e.worker) + "," + std::to_string(e.stage) + "," + kind_name(e.kind) + "," + std::to_string(e.microbatch) +
           "," + std::to_string(e.iteration) + "," + number(e.start_s) + "," + number(e.end_s) + "," + number(e.bytes) +
           "," + std::to_string(e.peer) + "," + std::to_string(e.message) + "\n";
  }
  return out;
}

std::string trace_to_chrome_json(const Trace& trace) {
  // Complete events ("ph": "X") in microseconds; one row (tid) per worker.
  std::string out = "{\"displayTimeUnit\":\"ms\",\"otherData\":" + header_json(trace.header).dump() + ",\"traceEvents\":[";
  bool first = true;
  for (int w = 0; w < trace.header.workers; ++w) {
    out += std::string(first ? "" : ",") + "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":" + std::to_string(w) +
           ",\"args\":{\"name\":\"worker " + std::to_string(w) + "\"}}";
    first = false;
  }
  for (const TraceEvent& e : trace.events) {
    std::string name = std::to_string(e.stage) + kind_name(e.kind);
    if (e.microbatch >= 0) name += " mb" + std::to_string(e.microbatch);
    out += std::string(first ? "" : ",") + "{\"name\":\"" + name + "\",\"cat\":\"" + kind_name(e.kind) +
           "\",\"ph\":\"X\",\"pid\":0,\"tid\":" + std::to_string(e.worker) + ",\"ts\":" + number(e.start_s * 1e6) +
           ",\"dur\":" + number((e.end_s - e.start_s) * 1e6) + ",\"args\":{\"microbatch\":" + std::to_string(e.microbatch) +
           ",\"iteration\":" + std::to_string(e.iteration) + ",\"bytes\":" + number(e.bytes) +
           ",\"peer\":" + std::to_string(e.peer) + ",\"message\":" + std::to_string(e.message) + "}}";
    first = false;
  }
  return out + "]}\n";
}

Trace trace_from_jsonl(const std::string& text, const std::string& path) {
  using namespace json_fields;
  Trace trace;
  std::istringstream in(text);
  std::string line;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.empty()) continue;
    nlohmann::json json;
    try {
      json = json_fields::parse(line, path);
    } catch (const Error& error) {  // the line inside the file, not inside the one-line text
      throw Error({path, line_number, ""}, error.problem(), "each line of a trace is one JSON object");
    }
    const std::string where;
    if (line_number == 1) {
      expect_format(json, "pipetwin.trace/1", path);
      TraceHeader& h = trace.header;
      h.source = string(json, "source", where, path);
      h.profile = string_or(json, "profile", "", where, path);
      h.cluster = string_or(json, "cluster", "", where, path);
      h.schedule = string_or(json, "schedule", "", where, path);
      h.workers = small_integer(json, "workers", where, path);
      h.stages = small_integer(json, "stages", where, path);
      h.microbatches = small_integer(json, "microbatches", where, path);
      h.microbatch_size = small_integer_or(json, "microbatch_size", 0, where, path);
      h.iterations = small_integer(json, "iterations", where, path);
      h.warmup_iterations = small_integer_or(json, "warmup_iterations", 0, where, path);
      if (json.contains("extra")) h.extra = json.at("extra");
      continue;
    }
    try {
      TraceEvent e;
      e.worker = small_integer(json, "worker", where, path);
      e.stage = small_integer(json, "stage", where, path);
      e.kind = kind_from_name(string(json, "kind", where, path), path, "kind");
      e.microbatch = small_integer(json, "microbatch", where, path);
      e.iteration = small_integer(json, "iteration", where, path);
      e.start_s = number(json, "start_s", where, path);
      e.end_s = number(json, "end_s", where, path);
      e.bytes = number_or(json, "bytes", 0.0, where, path);
      e.peer = small_integer_or(json, "peer", -1, where, path);
      if (json.contains("message")) {  // absent in traces written before message ids
        e.message = small_integer(json, "message", where, path);
      }
      if (e.worker < 0 || e.worker >= trace.header.workers) {
        throw Error({path, line_number, "worker"}, "worker " + std::to_string(e.worker) + " is outside the header's " +
                                                       std::to_string(trace.header.workers) + " workers",
                    "fix the event or the header");
      }
      if (e.end_s < e.start_s) throw Error({path, line_number, "end_s"}, "ends before it starts", "fix the times");
      trace.events.push_back(e);
    } catch (const Error& error) {
      if (error.context().line > 0) throw;
      throw Error({path, line_number, error.context().field}, error.problem(), error.fix());
    }
  }
  if (line_number == 0) throw Error({path, 0, ""}, "empty trace", "write traces with pipetwin simulate or run");
  return trace;
}

void write_trace(const Trace& trace, const std::string& path) {
  const bool csv = path.size() >= 4 && path.compare(path.size() - 4, 4, ".csv") == 0;
  json_fields::write_text_atomically(path, csv ? trace_to_csv(trace) : trace_to_jsonl(trace));
}

void write_chrome_trace(const Trace& trace, const std::string& path) {
  json_fields::write_text_atomically(path, trace_to_chrome_json(trace));
}

Trace load_trace(const std::string& path) {
  return trace_from_jsonl(json_fields::read_text(path, "trace"), path);
}

}  // namespace pipetwin
