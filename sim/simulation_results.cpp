// What a simulation hands back outside simulate(): its result across a process boundary (a child
// process simulates, its parent reads the result as JSON) and the summary `simulate` prints.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "planner/error.h"
#include "sim/simulation.h"
#include "sim/subprocess.h"

namespace pipetwin::sim {
namespace {

// Pipes a result from a child process to its parent as JSON.
nlohmann::json result_to_json(const SimulationResult& result) {
  const SimulationSummary& s = result.summary;
  return {{"trace", trace_to_jsonl(result.trace)},
          {"iteration_s", s.iteration_s},
          {"samples_per_s", s.samples_per_s},
          {"makespan_s", s.makespan_s},
          {"bubble_fraction", s.bubble_fraction},
          {"peak_memory_bytes", s.peak_memory_bytes},
          {"busiest_link",
           {{"name", s.busiest_link.name},
            {"bytes", s.busiest_link.bytes},
            {"bandwidth", s.busiest_link.bandwidth_bytes_per_s},
            {"utilisation", s.busiest_link.utilisation}}},
          {"actions", s.actions},
          {"messages", s.messages}};
}

SimulationResult result_from_json(const nlohmann::json& json) {
  SimulationResult result;
  result.trace = trace_from_jsonl(json.at("trace").get<std::string>(), "simulation");
  SimulationSummary& s = result.summary;
  s.iteration_s = json.at("iteration_s");
  s.samples_per_s = json.at("samples_per_s");
  s.makespan_s = json.at("makespan_s");
  s.bubble_fraction = json.at("bubble_fraction").get<std::vector<double>>();
  s.peak_memory_bytes = json.at("peak_memory_bytes").get<std::vector<double>>();
  const auto& link = json.at("busiest_link");
  s.busiest_link = {link.at("name"), link.at("bytes"), link.at("bandwidth"), link.at("utilisation")};
  s.actions = json.at("actions");
  s.messages = json.at("messages");
  return result;
}

}  // namespace

SimulationResult simulate_in_subprocess(const SimulationConfig& config) {
  const BuiltSchedule built = prepare_schedule(config);  // schedule errors surface here, in the caller's process
  const std::string text = finish_child(
      start_child([&config, &built] { return result_to_json(simulate_prepared(config, built)).dump(); }));
  if (const auto error = child_error(text)) throw Error({"", 0, "simulation"}, *error, "");
  return result_from_json(nlohmann::json::parse(text));
}

std::string summary_text(const SimulationConfig& config, const SimulationResult& result) {
  const SimulationSummary& s = result.summary;
  char line[512];
  std::string out;
  std::snprintf(line, sizeof line,
                "Simulated %s on %s: %d workers, %d stages, schedule %s, %d microbatches x %d iterations (%d warm-up)\n",
                result.trace.header.profile.c_str(), result.trace.header.cluster.c_str(), result.trace.header.workers,
                result.trace.header.stages, result.trace.header.schedule.c_str(), result.trace.header.microbatches,
                result.trace.header.iterations, config.warmup_iterations);
  out += line;
  std::snprintf(line, sizeof line, "Time per iteration:   %.6f s\nThroughput:           %.1f samples/s\n", s.iteration_s,
                s.samples_per_s);
  out += line;
  std::snprintf(line, sizeof line, "Busiest link:         %s, %.3f GB moved, %.1f%% utilised\n", s.busiest_link.name.c_str(),
                s.busiest_link.bytes / 1e9, 100.0 * s.busiest_link.utilisation);
  out += s.busiest_link.name.empty() ? "Busiest link:         none (no communication)\n" : line;
  out += "  worker  bubble   peak memory\n";
  for (std::size_t w = 0; w < s.bubble_fraction.size(); ++w) {
    const bool over = config.cluster.device().memory_bytes > 0 && s.peak_memory_bytes[w] > config.cluster.device().memory_bytes;
    std::snprintf(line, sizeof line, "  %-6zu  %5.1f%%  %8.3f GB%s\n", w, 100.0 * s.bubble_fraction[w],
                  s.peak_memory_bytes[w] / 1e9, over ? "  (more than the device's memory)" : "");
    out += line;
  }
  return out;
}

}  // namespace pipetwin::sim
