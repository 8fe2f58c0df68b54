// Schedule builder — the one place a schedule is made: generate → lower → unroll → validate.
//
// The CLI (`schedule`, `simulate`, `sweep`, `run`), sim/, exec/ and the fuzz targets all call it, and
// what it returns is the artifact both back ends interpret unchanged (schedule_interpreter.h). It
// either generates the named schedule for a plan or loads a schedule CSV (pipetwin.schedule/3, perhaps
// edited by hand, or torch.distributed.pipelining's form: torch_schedule_csv.h) against the plan, and
// validates the result once: matching messages, passes,
// deadlock and, when a limit is given, memory (one report, one message). Throws pipetwin::Error.
#pragma once

#include <string>

#include "planner/plan.h"
#include "planner/schedule.h"
#include "planner/schedule_validator.h"

namespace pipetwin {

struct ScheduleRequest {
  std::string name = "1f1b";      // one of schedule_names() (schedule_generators.h)
  int microbatches = 0;           // per iteration; 0: the plan's
  int chunks = 1;                 // stages per worker (interleaved, looped-bfs, interleaved-zb; 2 for a V)
  int iterations = 1;             // iterations laid out
  std::string file;               // a schedule CSV to load instead of generating (pipetwin's gives name, counts,
                                  // chunks; torch's the placement and microbatches, repeated `iterations` times)
  double memory_limit_bytes = 0;  // per worker; 0: no memory check
  double runtime_memory_bytes = 0;  // per worker process beside its stages (device.runtime_memory_bytes)
  std::string memory_limit_source;  // where the limit comes from, named in the error ("cluster.json")
};

struct BuiltSchedule {
  Schedule schedule;
  ValidationReport report;  // memory per worker, the unit-time run
};

BuiltSchedule build_schedule(const Plan& plan, const ScheduleRequest& request);

// The unvalidated steps, on a pipeline shape (tests, benchmarks, the fuzz targets).
Schedule make_schedule(const std::string& name, const PipelineShape& shape, int microbatches, int iterations = 1);

// Lays out every iteration of a lowered schedule: a schedule with a flush (one iteration generated)
// is repeated `iterations` times; one without (all iterations generated, microbatches numbered
// across them) has each action's microbatch split into (iteration, microbatch within it). Message ids
// stay unique over the whole run: a repeated iteration's take the next block.
Schedule unroll_schedule(const Schedule& lowered, int iterations);

}  // namespace pipetwin
