// Link fit — a link's latency and bandwidth from message times measured at several sizes: the line
// time = latency + bytes / bandwidth with the least squared relative error (every size counts alike;
// `pipetwin probe --messages`). A negative latency (noise on a fast link) is clamped to 0 and the
// slope refitted through the origin, so both figures are usable in a cluster file. Throws pipetwin::Error when fewer
// than two distinct sizes are given or the times do not grow with the size.
// probed_link() reads the fit back from a probe file's `messages` section (`calibrate --probe`).
// fit_all_reduce_overhead(): what a runtime's all-reduce takes beyond the simulator's ring on that
// link, as a fixed and a per-byte cost (probe --all-reduce; device.all_reduce_overhead_s and
// device.all_reduce_s_per_byte of a cluster file).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace pipetwin {

struct LinkFit {
  double latency_s = 0.0;
  double bandwidth_bytes_per_s = 0.0;
  double rms_relative_error = 0.0;  // of the fitted times against the measured ones
  double send_overhead_s = 0.0;     // the sender's time to post a message (probe; 0: not measured)
  double recv_overhead_s = 0.0;     // the receiver's time to take one that has arrived (probe; 0: not measured)
  double message_cpu_s = 0.0;           // CPU a message costs the machine, both ends (probe; 0: not measured)
  double message_cpu_s_per_byte = 0.0;  // and per byte
};

LinkFit fit_link(const std::vector<double>& bytes, const std::vector<double>& seconds);

// The link of a probe JSON (pipetwin.probe/1) `messages` section: its latency_s and
// bandwidth_bytes_per_s, and send_overhead_s and recv_overhead_s where the probe measured them. Throws Error naming `path` and the field when there is none (a probe run
// without --messages) or a figure is not a positive number (latency: not negative).
LinkFit probed_link(const nlohmann::json& probe, const std::string& path);

// All-reduce times measured among `processes` processes, one per size (probe --all-reduce).
struct AllReduceTimes {
  int processes = 0;
  std::vector<double> bytes;
  std::vector<double> seconds;
};

struct AllReduceOverhead {
  double overhead_s = 0.0;   // per all-reduce
  double s_per_byte = 0.0;   // per byte all-reduced (a CPU runtime sums the data itself)
};

// The residuals of every group, measured less the ring on `link` (2(g-1)/g S/B + 2(g-1) L,
// DESIGN.md), fitted as overhead_s + bytes * s_per_byte by fit_link (every sample counting alike);
// only residuals above 0 count. With fewer than two sizes left, or residuals that do not grow with
// the size, the median residual as overhead alone; nothing left: zero (a runtime as fast as the ring).
AllReduceOverhead fit_all_reduce_overhead(const std::vector<AllReduceTimes>& groups, const LinkFit& link);

// The overhead a probe file's `all_reduce` section holds (overhead_s, s_per_byte); none when the
// probe timed no all-reduce or no link. Throws Error naming `path` and the field for a negative figure.
std::optional<AllReduceOverhead> probed_all_reduce_overhead(const nlohmann::json& probe, const std::string& path);

}  // namespace pipetwin
