#include "traces/kineto_import.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "planner/error.h"
#include "planner/torch_schedule_csv.h"

namespace pipetwin {
namespace {

constexpr const char* kPrefix = "PP:";

struct Labelled {
  int rank;
  Action action;
  double start_us, end_us;
};

double number(const nlohmann::json& event, const char* key, const std::string& path, const std::string& where) {
  if (!event.contains(key) || !event[key].is_number()) {
    throw Error({path, 0, where + "." + key}, "missing or not a number", "profile with torch.profiler and export_chrome_trace");
  }
  const double value = event[key].get<double>();
  if (!std::isfinite(value) || (std::string(key) == "dur" && value < 0)) {
    throw Error({path, 0, where + "." + key}, "is not a finite time", "fix or regenerate the trace");
  }
  return value;
}

}  // namespace

Trace trace_from_kineto(const std::vector<KinetoFile>& files, const std::string& profile, const std::string& cluster) {
  if (files.empty()) throw Error({"", 0, "traces"}, "no trace given", "name one Kineto trace per rank, or one merged");
  std::vector<Labelled> labelled;
  for (std::size_t f = 0; f < files.size(); ++f) {
    const std::string& path = files[f].path;
    nlohmann::json document;
    try {
      document = nlohmann::json::parse(files[f].text);
    } catch (const nlohmann::json::exception& error) {
      throw Error({path, 0, ""}, std::string("not JSON: ") + error.what(), "give the file torch.profiler's export_chrome_trace wrote");
    }
    // Kineto writes {"traceEvents": [...], "distributedInfo": {...}}; torch built without Kineto (Debian's)
    // writes the Chrome trace's array form, the events alone.
    const bool array_form = document.is_array();
    if (!array_form && (!document.is_object() || !document.contains("traceEvents") || !document["traceEvents"].is_array())) {
      throw Error({path, 0, "traceEvents"}, "missing, or not a list", "give the file torch.profiler's export_chrome_trace wrote");
    }
    int file_rank = static_cast<int>(f);
    if (!array_form && document.contains("distributedInfo") && document["distributedInfo"].is_object() &&
        document["distributedInfo"].contains("rank")) {
      const auto& rank = document["distributedInfo"]["rank"];
      if (!rank.is_number_integer() || rank.get<long long>() < 0 || rank.get<long long>() > 100000) {
        throw Error({path, 0, "distributedInfo.rank"}, "is not a rank", "fix or regenerate the trace");
      }
      file_rank = rank.get<int>();
    }
    const auto& events = array_form ? document : document["traceEvents"];
    using Pid = std::tuple<int, long long, std::string>;  // numbers (Kineto) before names (the legacy profiler)
    std::set<Pid> pids;
    std::vector<std::pair<Pid, Labelled>> from_file;
    for (std::size_t i = 0; i < events.size(); ++i) {
      const auto& event = events[i];
      if (!event.is_object() || !event.contains("name") || !event["name"].is_string()) continue;
      const std::string name = event["name"].get<std::string>();
      if (name.rfind(kPrefix, 0) != 0) continue;
      const std::string where = (array_form ? "[" : "traceEvents[") + std::to_string(i) + "]";
      if (!event.contains("ph") || !event["ph"].is_string()) {
        throw Error({path, 0, where + ".ph"}, "missing or not a string", "fix or regenerate the trace");
      }
      if (event["ph"] != "X") continue;  // only complete events carry a duration
      const double start_us = number(event, "ts", path, where), duration_us = number(event, "dur", path, where);
      Pid pid{0, 0, ""};
      if (event.contains("pid") && event["pid"].is_number_integer()) pid = {0, event["pid"].get<long long>(), ""};
      if (event.contains("pid") && event["pid"].is_string()) pid = {1, 0, event["pid"].get<std::string>()};
      pids.insert(pid);
      const auto actions = torch_actions_from_text(name.substr(std::string(kPrefix).size()), path, 0, where + ".name");
      const double share = duration_us / static_cast<double>(actions.size());
      for (std::size_t a = 0; a < actions.size(); ++a) {
        Action action = actions[a];
        action.overlap = false;
        from_file.push_back({pid, Labelled{file_rank, action, start_us + a * share, start_us + (a + 1) * share}});
      }
    }
    const bool merged = files.size() == 1 && pids.size() > 1;
    for (auto& [pid, event] : from_file) {
      if (merged) event.rank = static_cast<int>(std::distance(pids.begin(), pids.find(pid)));
      labelled.push_back(event);
    }
  }
  if (labelled.empty()) {
    throw Error({files.front().path, 0, "traceEvents"}, "no \"PP:\" events",
                "profile the torch.distributed.pipelining job itself (its actions are labelled PP:<action>)");
  }
  std::stable_sort(labelled.begin(), labelled.end(), [](const Labelled& a, const Labelled& b) {
    return std::tie(a.rank, a.start_us) < std::tie(b.rank, b.start_us);
  });
  const double origin_us =
      std::min_element(labelled.begin(), labelled.end(), [](const Labelled& a, const Labelled& b) { return a.start_us < b.start_us; })
          ->start_us;
  Trace trace;
  TraceHeader& header = trace.header;
  header.source = "measured";
  header.profile = profile;
  header.cluster = cluster;
  header.schedule = "torch";
  header.extra = {{"imported_from", "kineto"}};
  std::map<std::tuple<int, int, ActionKind, int>, int> seen;  // occurrences so far: the iteration
  for (const Labelled& event : labelled) {
    TraceEvent out;
    out.worker = event.rank;
    out.stage = event.action.stage;
    out.kind = event.action.kind;
    out.microbatch = event.action.microbatch;
    out.iteration = seen[{event.rank, out.stage, out.kind, out.microbatch}]++;
    out.start_s = (event.start_us - origin_us) * 1e-6;
    out.end_s = (event.end_us - origin_us) * 1e-6;
    header.workers = std::max(header.workers, event.rank + 1);
    header.stages = std::max(header.stages, out.stage + 1);
    header.microbatches = std::max(header.microbatches, out.microbatch + 1);
    header.iterations = std::max(header.iterations, out.iteration + 1);
    trace.events.push_back(out);
  }
  sort_events(trace);
  return trace;
}

}  // namespace pipetwin
