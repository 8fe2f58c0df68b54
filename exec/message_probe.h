// Message probe — one-way message time against size between two worker processes of this machine,
// through the transport `run` uses (c10d Gloo over loopback, the same process set-up), and the link
// it amounts to (traces/link_fit.h: latency + bytes / bandwidth). Two processes ping-pong: five
// untimed round trips first (the pair's connection), then per size one warm-up round trip and
// `repeats` timed ones; the one-way time is half the median round trip. `pipetwin probe --messages` runs it and writes it beside the compute probe.
// Throws pipetwin::Error (a process that fails or hangs past the timeout is named).
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "traces/link_fit.h"

namespace pipetwin::exec {

struct MessageProbeOptions {
  std::vector<double> bytes = {1024, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
  int repeats = 5;
  std::chrono::milliseconds timeout{60000};
};

struct MessageProbe {
  std::vector<double> bytes;
  std::vector<double> one_way_s;  // per size: half the median round trip
  LinkFit link;
};

MessageProbe probe_messages(const MessageProbeOptions& options, const std::function<void(const std::string&)>& report);

nlohmann::json message_probe_to_json(const MessageProbe& probe);

}  // namespace pipetwin::exec
