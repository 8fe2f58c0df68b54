// Message probe — one-way message time against size between two worker processes of this machine,
// through the transport `run` uses (c10d Gloo over loopback, the same process set-up), and the link
// it amounts to (traces/link_fit.h: latency + bytes / bandwidth). Two processes ping-pong: five
// untimed round trips first (the pair's connection), then per size one warm-up round trip and
// `repeats` timed ones; the one-way time is half the median round trip, and the sender's time to post
// its send is timed on each. The first process posts its receive of the echo before it sends, as a
// worker posts its receives ahead (Transport::post_receive). Then `repeats` round trips where it
// takes the echo only after twice the median round trip: the time to take a message that has
// arrived. Their medians over the sizes up to 64 KB are the link's send and receive overheads (a
// cluster device's): the fixed parts; at larger sizes both grow (copies), which the bandwidth
// carries. Both processes also count their CPU time (every thread) over the timed round trips: what a
// message costs the machine's cores, fitted as a fixed part and one per byte (device.message_cpu_s,
// message_cpu_s_per_byte: on a machine whose workers share its cores it competes with their compute). `pipetwin probe --messages` runs it and writes it beside the compute probe.
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
  std::vector<double> post_s;     // per size: median time to post a send
  std::vector<double> take_s;     // per size: median time to take an arrived message
  std::vector<double> cpu_s;      // per size: CPU time a message costs the machine (both processes, every thread)
  LinkFit link;
};

MessageProbe probe_messages(const MessageProbeOptions& options, const std::function<void(const std::string&)>& report);

nlohmann::json message_probe_to_json(const MessageProbe& probe);

}  // namespace pipetwin::exec
