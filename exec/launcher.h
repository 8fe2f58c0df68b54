// Launcher — `pipetwin run` on one machine: starts one worker process per plan worker (times the
// tensor-parallel degree, worker.tensor_parallel: process r is worker r mod W of lane r / W; rendezvous on
// a free local port; each interprets the schedule built once, options.worker.built, when given), watches
// them, and merges their traces into one measured trace.
//
// If a worker fails (exits non-zero or dies), the others notice through their transport (a closed
// connection, or the timeout) and exit naming it; any still running `grace` after the first failure are
// killed. Every child is reaped, so no zombie remains. Throws pipetwin::Error naming the first worker
// that failed.
#pragma once

#include <chrono>
#include <string>

#include "exec/worker.h"
#include "traces/trace.h"

namespace pipetwin::exec {

struct LaunchOptions {
  WorkerOptions worker;
  int workers = 2;
  std::chrono::milliseconds grace{5000};
};

Trace launch_local(const LaunchOptions& options);

}  // namespace pipetwin::exec
