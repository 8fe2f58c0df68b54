// Helpers for schedule tests: pipelines of uniform stages and lowered schedules made from them.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "planner/error.h"
#include "planner/schedule.h"
#include "planner/schedule_validator.h"
#include "planner/schedule_generators.h"
#include "planner/schedule_builder.h"

namespace pipetwin::testing {

// `replicas[s]` workers for stage s, numbered in stage order; 1 MB activations, 10 MB parameters.
inline PipelineShape pipeline(const std::vector<int>& replicas, int chunks = 1) {
  PipelineShape shape;
  shape.chunks = chunks;
  int worker = 0;
  for (int r : replicas) {
    std::vector<int> workers;
    for (int i = 0; i < r; ++i) workers.push_back(worker++);
    shape.stage_workers.push_back(workers);
    shape.output_bytes.push_back(1e6);
    shape.param_bytes.push_back(1e7);
  }
  shape.workers = worker;
  return shape;
}

inline PipelineShape straight(int stages) { return pipeline(std::vector<int>(stages, 1)); }

// p workers holding p*v stages, stage s on worker s mod p.
inline PipelineShape interleaved(int workers, int chunks) {
  PipelineShape shape = straight(workers * chunks);
  for (int s = 0; s < workers * chunks; ++s) shape.stage_workers[s] = {s % workers};
  shape.workers = workers;
  shape.chunks = chunks;
  return shape;
}

// p workers holding 2p stages in a V: stage s on worker s for s < p, on worker 2p-1-s after.
inline PipelineShape v_shaped(int workers) {
  PipelineShape shape = interleaved(workers, 2);
  for (int s = workers; s < 2 * workers; ++s) shape.stage_workers[s] = {2 * workers - 1 - s};
  return shape;
}

// Generated, lowered and unrolled (every iteration laid out), not validated.
inline Schedule lowered(const std::string& name, const PipelineShape& shape, int microbatches, int iterations = 1) {
  return make_schedule(name, shape, microbatches, iterations);
}

// The validator's error for a schedule that must be refused (a test failure when it is accepted).
inline Error rejection(const Schedule& schedule) {
  try {
    validate_schedule(schedule);
  } catch (const Error& error) {
    return error;
  }
  ADD_FAILURE() << "accepted";
  return Error({}, "");
}

}  // namespace pipetwin::testing
