#include "exec/all_reduce_probe.h"

#include <algorithm>
#include <numeric>

#include "exec/child_processes.h"
#include "exec/transport.h"
#include "planner/error.h"
#include "planner/schedule_evaluator.h"
#include "traces/prediction_accuracy.h"

namespace pipetwin::exec {
namespace {

using Clock = std::chrono::steady_clock;

// One process of the all-reduce group `group`: its median all-reduce time per size (every rank times
// its own; rank 0's is kept).
std::vector<double> all_reduce_times(const AllReduceProbeOptions& options, const std::vector<int>& group,
                                     Transport& transport) {
  torch::Tensor first = torch::ones({1});
  for (int warm = 0; warm < 5; ++warm) transport.all_reduce(first, group, "probe all-reduce");  // connections, untimed
  std::vector<double> median_s;
  for (double bytes : options.bytes) {
    torch::Tensor tensor = torch::ones({std::max<std::int64_t>(1, static_cast<std::int64_t>(bytes) / 4)});
    std::vector<double> times;
    for (int repeat = -1; repeat < options.repeats; ++repeat) {  // -1: the warm-up
      const Clock::time_point start = Clock::now();
      transport.all_reduce(tensor, group, "probe all-reduce");
      if (repeat >= 0) times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    median_s.push_back(median_of(times));
  }
  transport.barrier();
  return median_s;
}

}  // namespace

AllReduceProbe probe_all_reduce(const AllReduceProbeOptions& options, const std::optional<LinkFit>& link,
                                const std::function<void(const std::string&)>& report) {
  if (options.bytes.size() < 2 || options.repeats < 1 || options.max_processes < 2 ||
      std::any_of(options.bytes.begin(), options.bytes.end(), [](double b) { return !(b >= 4); })) {
    throw Error({"", 0, "--all-reduce-sizes"},
                "the all-reduce probe needs two sizes of 4 bytes or more, one repeat and two processes",
                "e.g. the default sizes, 4 KB to 16 MB, and --max-processes 2 or more");
  }
  AllReduceProbe probe;
  probe.bytes = options.bytes;
  for (int processes = 2; processes <= options.max_processes; ++processes) {
    report("[probe all-reduce] " + std::to_string(processes) + " processes, " + std::to_string(options.bytes.size()) +
           " sizes, " + std::to_string(options.repeats) + " each");
    std::vector<int> ranks(processes);
    std::iota(ranks.begin(), ranks.end(), 0);
    AllReduceGroup group;
    group.processes = processes;
    group.seconds = run_connected_children(
        processes, options.bytes.size(), options.timeout, {ranks},
        [&](Transport& transport, int) { return all_reduce_times(options, ranks, transport); },
        "all-reduce probe", "read its message above (a peer that hangs is given up after a minute)")[0];
    try {
      group.fit = fit_link(probe.bytes, group.seconds);
    } catch (const Error&) {
      // no line through times that do not grow with the size: the times are kept, unfitted
    }
    if (link) {
      const CommunicationCost ring{link->bandwidth_bytes_per_s, link->latency_s};
      for (double bytes : probe.bytes) group.ring_s.push_back(ring.ring_allreduce_s(bytes, processes));
    }
    probe.groups.push_back(std::move(group));
  }
  if (link) {
    std::vector<AllReduceTimes> measured;
    for (const AllReduceGroup& group : probe.groups) measured.push_back({group.processes, probe.bytes, group.seconds});
    probe.beyond_ring = fit_all_reduce_overhead(measured, *link);
  }
  return probe;
}

nlohmann::json all_reduce_probe_to_json(const AllReduceProbe& probe) {
  nlohmann::json groups = nlohmann::json::array();
  for (const AllReduceGroup& group : probe.groups) {
    nlohmann::json entry = {{"processes", group.processes}, {"seconds", group.seconds}};
    if (group.fit) {
      entry["latency_s"] = group.fit->latency_s;
      entry["bandwidth_bytes_per_s"] = group.fit->bandwidth_bytes_per_s;
      entry["rms_relative_error"] = group.fit->rms_relative_error;
    }
    if (!group.ring_s.empty()) entry["ring_s"] = group.ring_s;
    groups.push_back(entry);
  }
  nlohmann::json document = {{"bytes", probe.bytes}, {"groups", groups}};
  if (probe.beyond_ring) {
    document["overhead_s"] = probe.beyond_ring->overhead_s;
    document["s_per_byte"] = probe.beyond_ring->s_per_byte;
  }
  return document;
}

}  // namespace pipetwin::exec
