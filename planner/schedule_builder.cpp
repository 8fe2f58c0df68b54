#include "planner/schedule_builder.h"

#include <algorithm>

#include "planner/error.h"
#include "planner/schedule_generators.h"
#include "planner/schedule_lowering.h"
#include "planner/json_fields.h"
#include "planner/torch_schedule_csv.h"

namespace pipetwin {

Schedule unroll_schedule(const Schedule& lowered, int iterations) {
  if (iterations < 1) throw Error({"", 0, "--iterations"}, "iterations must be >= 1", "e.g. --iterations 3");
  Schedule unrolled{lowered.name, lowered.microbatches, iterations, lowered.shape,
                    std::vector<std::vector<Action>>(lowered.workers.size())};
  const int m = lowered.microbatches;
  int ids_per_iteration = 0;  // a repeated iteration's messages take the next block of ids
  for (const auto& list : lowered.workers) {
    for (const Action& action : list) ids_per_iteration = std::max(ids_per_iteration, action.message + 1);
  }
  for (std::size_t w = 0; w < lowered.workers.size(); ++w) {
    std::vector<Action>& out = unrolled.workers[w];
    if (schedule_has_flush(lowered.name)) {
      out.reserve(lowered.workers[w].size() * static_cast<std::size_t>(iterations));
      for (int iteration = 0; iteration < iterations; ++iteration) {
        for (Action action : lowered.workers[w]) {
          action.iteration = iteration;
          if (action.message >= 0) action.message += iteration * ids_per_iteration;
          out.push_back(action);
        }
      }
    } else {
      out.reserve(lowered.workers[w].size());
      for (Action action : lowered.workers[w]) {
        if (action.microbatch >= 0) {
          action.iteration = action.microbatch / m;
          action.microbatch %= m;
        }
        out.push_back(action);
      }
    }
  }
  return unrolled;
}

Schedule make_schedule(const std::string& name, const PipelineShape& shape, int microbatches, int iterations) {
  return unroll_schedule(lower_schedule(generate_schedule(name, shape, microbatches, iterations)), iterations);
}

BuiltSchedule build_schedule(const Plan& plan, const ScheduleRequest& request) {
  ValidationOptions options;
  options.activation_bytes = per_stage(plan, &PlanStage::activation_bytes);
  options.output_gradient_bytes = per_stage(plan, &PlanStage::output_gradient_bytes);
  options.recompute_bytes = per_stage(plan, &PlanStage::recompute_bytes);
  options.memory_limit_bytes = request.memory_limit_bytes;
  options.runtime_memory_bytes = request.runtime_memory_bytes;
  options.memory_limit_source = request.memory_limit_source;
  BuiltSchedule built;
  if (request.file.empty()) {
    const int microbatches = request.microbatches > 0 ? request.microbatches : plan.microbatches;
    const int chunks = schedule_chunks(request.name, request.chunks);
    built.schedule = make_schedule(request.name, pipeline_shape(plan, chunks, schedule_placement(request.name)), microbatches,
                                   request.iterations);
    options.source = request.name + " schedule";
  } else if (const std::string text = json_fields::read_text(request.file, "schedule CSV"); looks_like_torch_schedule(text)) {
    for (const PlanStage& stage : plan.stages) {
      if (stage.replicas != 1) {
        throw Error({request.file, 0, "plan"}, "torch's schedule CSV gives every stage one rank; the plan replicates stages",
                    "plan with --straight");
      }
    }
    Schedule one = schedule_from_torch(torch_schedule_from_csv(text, request.file), pipeline_shape(plan, 1, Placement::OneStagePerWorker),
                                             request.file);
    add_recomputation(one);  // torch's format has no recomputation nor tensor parallelism: the plan says where they run
    add_tensor_sums(one);
    built.schedule = unroll_schedule(one, request.iterations);
    options.source = request.file;
  } else {
    ScheduleFile file = schedule_file_from_csv(text, request.file);
    const auto names = schedule_names();
    if (std::find(names.begin(), names.end(), file.name) == names.end()) {
      throw Error({request.file, 1, "name"}, "unknown schedule '" + file.name + "'",
                  "name one of " + schedule_names_text() + " (the schedule the file was made from)");
    }
    Schedule& schedule = built.schedule;
    schedule.shape = pipeline_shape(plan, file.chunks, schedule_placement(file.name));
    if (file.workers != schedule.shape.workers) {
      throw Error({request.file, 1, "workers"},
                  "the file has " + std::to_string(file.workers) + " workers, the plan " +
                      std::to_string(schedule.shape.workers) + (file.chunks > 1 ? " (with its chunks)" : ""),
                  "use the plan the schedule was made for");
    }
    schedule.name = file.name;
    schedule.microbatches = file.microbatches;
    schedule.iterations = file.iterations;
    schedule.workers = std::move(file.actions);
    add_tensor_sums(schedule);  // a file written by hand may leave them out; one written by pipetwin has them
    options.source = request.file;
  }
  built.report = validate_schedule(built.schedule, options);
  return built;
}

}  // namespace pipetwin
