#include "fuzz/readers.h"

#include <stdexcept>

#include "planner/cluster.h"
#include "planner/json_fields.h"
#include "planner/plan.h"
#include "planner/profile_io.h"
#include "planner/schedule.h"
#include "planner/error.h"
#include "planner/schedule_builder.h"
#include "planner/schedule_validator.h"
#include "planner/torch_schedule_csv.h"
#include "traces/kineto_import.h"
#include "traces/trace.h"

namespace pipetwin::fuzz {
namespace {

// Three stages on four workers, the middle one replicated twice: sends, receives and all-reduces.
Schedule reference_schedule() {
  PipelineShape shape;
  shape.stage_workers = {{0}, {1, 2}, {3}};
  shape.output_bytes = {1e6, 1e6, 0.0};
  shape.param_bytes = {1e6, 1e6, 1e6};
  shape.workers = 4;
  return make_schedule("1f1b", shape, 4, 2);
}

// The file's actions on the reference pipeline, with the counts the file gives (bounded, so that a
// fuzzed "microbatches=1000000" cannot make the validator walk a million empty slots).
void read_schedule_csv(const std::string& text) {
  Schedule schedule = reference_schedule();
  ScheduleFile file = schedule_file_from_csv(text, "fuzz.csv");
  if (file.workers != schedule.shape.workers || file.microbatches > 64 || file.iterations > 8) {
    throw Error({"fuzz.csv", 1, "workers"}, "not the reference pipeline's shape", "");
  }
  schedule.microbatches = file.microbatches;
  schedule.iterations = file.iterations;
  schedule.workers = std::move(file.actions);
  ValidationOptions options;
  options.source = "fuzz.csv";
  options.activation_bytes = {1e6, 1e6, 1e6};
  options.memory_limit_bytes = 1e9;
  validate_schedule(schedule, options);
}

// torch's schedule CSV on a pipeline of as many uniform stages as the file runs (bounded like above),
// built and validated as `--schedule-file` would.
void read_torch_schedule_csv(const std::string& text) {
  const TorchScheduleFile file = torch_schedule_from_csv(text, "fuzz.csv");
  const int stages = static_cast<int>(file.stage_rank.size());
  if (file.ranks.size() > 8 || stages > 16 || file.microbatches > 64) {
    throw Error({"fuzz.csv", 0, "ranks"}, "larger than the fuzzed pipeline", "");
  }
  PipelineShape shape;
  for (int s = 0; s < stages; ++s) shape.stage_workers.push_back({s});
  shape.output_bytes.assign(stages, 1e6);
  shape.param_bytes.assign(stages, 1e6);
  shape.workers = stages;
  ValidationOptions options;
  options.source = "fuzz.csv";
  validate_schedule(unroll_schedule(schedule_from_torch(file, shape, "fuzz.csv"), 2), options);
}

}  // namespace

const std::vector<std::string>& reader_names() {
  static const std::vector<std::string> names{"profile-json", "pipedream-graph", "cluster", "plan",
                                              "schedule-csv", "trace", "torch-schedule-csv", "kineto-trace"};
  return names;
}

void read_as(const std::string& reader, const std::string& text) {
  if (reader == "profile-json") {
    profile_from_json(json_fields::parse(text, "fuzz.json"), "fuzz.json");
  } else if (reader == "pipedream-graph") {
    import_pipedream_graph(text, "fuzz.txt", "fuzz", kPipeDreamDefaultBatchSize);
  } else if (reader == "cluster") {
    cluster_from_json(json_fields::parse(text, "fuzz.json"), "fuzz.json");
  } else if (reader == "plan") {
    plan_from_json(json_fields::parse(text, "fuzz.json"), "fuzz.json");
  } else if (reader == "schedule-csv") {
    read_schedule_csv(text);
  } else if (reader == "trace") {
    trace_from_jsonl(text, "fuzz.jsonl");
  } else if (reader == "torch-schedule-csv") {
    read_torch_schedule_csv(text);
  } else if (reader == "kineto-trace") {
    trace_from_kineto({{"fuzz.json", text}}, "", "");
  } else {
    throw std::invalid_argument("unknown reader '" + reader + "'");
  }
}

}  // namespace pipetwin::fuzz
