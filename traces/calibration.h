// Calibration — fits the figures a simulation depends on to a measured trace's own events:
//  - compute scale k: the median measured duration of each (stage, kind) against the plan's stage
//    time, least squares through the origin (the device runs k times slower than the profile said);
//  - per-message overhead and bandwidth: for every transfer whose receiver was already waiting, the
//    time from the send's start to the receive's end, fitted as overhead + bytes / bandwidth
//    (ordinary least squares; with a single message size only the overhead is fitted).
//  - action overhead: on each worker, the time between the end of one event and the start of the
//    next (time no action covers: the runtime's own), over the number of actions.
// calibrated_cluster() writes them into a cluster spec: device speed 1/k, the device's action
// overhead, every level's latency the message overhead and bandwidth the fitted one (one machine's
// loopback: a single figure).
#pragma once

#include "planner/cluster.h"
#include "planner/plan.h"
#include "traces/trace.h"

namespace pipetwin {

struct Calibration {
  double compute_scale = 1.0;
  double message_overhead_s = 0.0;
  double bandwidth_bytes_per_s = 0.0;  // 0: not fitted (kept from the cluster)
  double action_overhead_s = 0.0;
  int compute_samples = 0;
  int transfer_samples = 0;
  double compute_rms_relative_error = 0.0;   // of the fitted compute model
  double transfer_rms_error_s = 0.0;         // of the fitted transfer model
};

// Throws Error when the trace has no compute events for the plan's stages.
Calibration calibrate(const Trace& measured, const Plan& plan, const Cluster& cluster);
Cluster calibrated_cluster(const Cluster& cluster, const Calibration& calibration);

}  // namespace pipetwin
