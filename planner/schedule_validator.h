// ScheduleValidator — proves a lowered schedule sound before anything runs it.
//
// Checks, in order, and throws pipetwin::Error naming the worker and the action at the first fault:
//  - every action's stage is held by its worker, its microbatch and peer are in range;
//  - every (stage, microbatch) has exactly one forward and one backward (B, or I and W) on the
//    replica that owns it; B/I follow their F, W follows its I;
//  - every forward/backward that needs another worker's data has its RECV before it, every RECV has
//    exactly one SEND and every SEND a RECV; replicas of a stage run the same number of all-reduces;
//  - memory: peak in-flight activations and stashed weight versions per worker, against an optional limit;
//  - no deadlock: a run with unit durations must finish (schedule_evaluator.h).
#pragma once

#include <string>
#include <vector>

#include "planner/schedule.h"
#include "planner/schedule_evaluator.h"

namespace pipetwin {

struct ValidationOptions {
  std::string source = "schedule";        // named in error messages (a file, or the schedule's name)
  double memory_limit_bytes = 0.0;        // per worker; 0 = no check
  std::vector<double> activation_bytes;   // per stage: stashed per in-flight microbatch (memory check)
};

struct WorkerMemory {
  int peak_in_flight = 0;   // microbatches forwarded and not yet backwarded (B or I)
  int weight_versions = 0;  // peak distinct weight versions in use (current + those in-flight forwards used)
  double peak_bytes = 0.0;  // peak in-flight x activations + versions x parameters
};

struct ValidationReport {
  std::vector<WorkerMemory> memory;  // per worker
  Evaluation unit_run;               // the deadlock check's run (every compute takes 1)
};

ValidationReport validate_schedule(const Schedule& schedule, const ValidationOptions& options = {});

// Peak in-flight activations and weight versions of every worker, without the other checks.
std::vector<WorkerMemory> schedule_memory(const Schedule& schedule, const std::vector<double>& activation_bytes = {});

}  // namespace pipetwin
