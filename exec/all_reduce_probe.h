// All-reduce probe — the time of an all-reduce by group size and bytes among worker processes of this
// machine, through the transport `run` uses for data-parallel replicas (c10d Gloo), beside what the
// simulator's ring would take on the message probe's link (2(g-1)/g S/B + 2(g-1) L: DESIGN.md),
// so a user sees how far the ring model is from the runtime's collective. For each group size g = 2 ..
// max_processes, g processes run a few untimed all-reduces (the group's connections), then per size one
// warm-up and `repeats` timed ones, back to back; rank 0's median is the size's time. Each group's
// times are fitted as latency + bytes / bandwidth (traces/link_fit.h) where they grow with the size.
// With the message probe's link, the cost beyond the simulator's ring is fitted over every group
// (fit_all_reduce_overhead): a cluster's device.all_reduce_overhead_s and all_reduce_s_per_byte.
// `pipetwin probe --all-reduce`.
// Throws pipetwin::Error (a process that fails or hangs past the timeout is named).
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "traces/link_fit.h"

namespace pipetwin::exec {

struct AllReduceProbeOptions {
  std::vector<double> bytes = {4096, 65536, 1 << 20, 16 << 20};
  int max_processes = 3;
  int repeats = 5;
  std::chrono::milliseconds timeout{60000};
};

struct AllReduceGroup {
  int processes = 0;
  std::vector<double> seconds;     // per size: rank 0's median
  std::vector<double> ring_s;      // per size: the ring on the probed link; empty without one
  std::optional<LinkFit> fit;      // the group's times as latency + bytes / bandwidth; none when
                                   // they do not grow with the size (a noisy spell)
};

struct AllReduceProbe {
  std::vector<double> bytes;
  std::vector<AllReduceGroup> groups;  // 2 .. max_processes processes
  std::optional<AllReduceOverhead> beyond_ring;  // with a link: the runtime's cost beyond the ring (link_fit.h)
};

// `link`: the message probe's, for the ring column (none: no ring column).
AllReduceProbe probe_all_reduce(const AllReduceProbeOptions& options, const std::optional<LinkFit>& link,
                                const std::function<void(const std::string&)>& report);

nlohmann::json all_reduce_probe_to_json(const AllReduceProbe& probe);

}  // namespace pipetwin::exec
