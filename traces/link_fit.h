// Link fit — a link's latency and bandwidth from message times measured at several sizes: the line
// time = latency + bytes / bandwidth with the least squared relative error (every size counts alike;
// `pipetwin probe --messages`). A negative latency (noise on a fast link) is clamped to 0 and the
// slope refitted through the origin, so both figures are usable in a cluster file. Throws pipetwin::Error when fewer
// than two distinct sizes are given or the times do not grow with the size.
// probed_link() reads the fit back from a probe file's `messages` section (`calibrate --probe`).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace pipetwin {

struct LinkFit {
  double latency_s = 0.0;
  double bandwidth_bytes_per_s = 0.0;
  double rms_relative_error = 0.0;  // of the fitted times against the measured ones
};

LinkFit fit_link(const std::vector<double>& bytes, const std::vector<double>& seconds);

// The link of a probe JSON (pipetwin.probe/1) `messages` section: its latency_s and
// bandwidth_bytes_per_s. Throws Error naming `path` and the field when there is none (a probe run
// without --messages) or a figure is not a positive number (latency: not negative).
LinkFit probed_link(const nlohmann::json& probe, const std::string& path);

}  // namespace pipetwin
