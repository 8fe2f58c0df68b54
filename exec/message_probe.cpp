#include "exec/message_probe.h"

#include <algorithm>
#include <thread>

#include "exec/child_processes.h"
#include "exec/cpu_time.h"
#include "exec/transport.h"
#include "planner/error.h"
#include "traces/prediction_accuracy.h"

namespace pipetwin::exec {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kSmallMessageBytes = 65536;  // up to this size, posting and taking are their fixed costs

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Rank 0 of the pair, per size: the one-way time (half the median round trip), the median time to
// post the send, and the median time to take the echo once it has surely arrived (rank 0 waits twice
// the median round trip before it asks); rank 1 echoes (zeros there). Then, both ranks, the process's
// CPU time per message (half its median round trip's). Four numbers per size, in that order.
std::vector<double> ping_pong(const MessageProbeOptions& options, Transport& transport, int rank) {
  const int peer = 1 - rank;
  int tag = 0;
  struct Timed {
    double round_trip_s, post_s, take_s, cpu_s;
  };
  auto round_trip = [&](torch::Tensor& tensor, double pause_s) {
    Timed timed{0.0, 0.0, 0.0, 0.0};
    const double cpu_before_s = process_cpu_s();
    torch::Tensor echo = torch::empty_like(tensor);
    if (rank == 0) {
      transport.post_receive(echo, peer, tag + 1, "probe echo");  // ahead, as a worker posts its receives
      const Clock::time_point start = Clock::now();
      transport.send(tensor, peer, tag, "probe message");
      timed.post_s = seconds_since(start);
      if (pause_s > 0.0) std::this_thread::sleep_for(std::chrono::duration<double>(pause_s));
      const Clock::time_point asked = Clock::now();
      transport.take_receive(tag + 1);
      timed.take_s = seconds_since(asked);
      timed.round_trip_s = seconds_since(start);
    } else {
      transport.receive(tensor, peer, tag, "probe message");
      transport.send(tensor, peer, tag + 1, "probe echo");
    }
    tag += 2;
    timed.cpu_s = process_cpu_s() - cpu_before_s;
    return timed;
  };
  torch::Tensor first = torch::zeros({1});
  for (int warm = 0; warm < 5; ++warm) round_trip(first, 0.0);  // the pair's connection set up, untimed
  std::vector<double> figures;
  for (double bytes : options.bytes) {
    torch::Tensor tensor = torch::zeros({std::max<std::int64_t>(1, static_cast<std::int64_t>(bytes) / 4)});
    std::vector<double> round_trips, posts, takes, cpus;
    for (int repeat = -1; repeat < options.repeats; ++repeat) {  // -1: the warm-up
      const Timed timed = round_trip(tensor, 0.0);
      if (repeat >= 0) round_trips.push_back(timed.round_trip_s), posts.push_back(timed.post_s), cpus.push_back(timed.cpu_s);
    }
    // This process's share of a message's CPU: a round trip is two messages, each costing its sender
    // and its receiver (every thread: the caller's, the transport's, the kernel's copies). The median
    // round trip's: one disturbed by another job or a page fault does not count.
    const double cpu_per_message_s = median_of(cpus) / 2.0;
    const double round_trip_s = median_of(round_trips);
    // Rank 1 cannot know the pause: it echoes as before, and the echo waits for rank 0 to ask.
    for (int repeat = 0; repeat < options.repeats; ++repeat) takes.push_back(round_trip(tensor, 2 * round_trip_s + 2e-4).take_s);
    if (rank == 0) {
      figures.insert(figures.end(), {round_trip_s / 2, median_of(posts), median_of(takes), cpu_per_message_s});
    } else {
      figures.insert(figures.end(), {0.0, 0.0, 0.0, cpu_per_message_s});
    }
  }
  transport.finish_sends();
  transport.barrier();
  return figures;
}

}  // namespace

MessageProbe probe_messages(const MessageProbeOptions& options, const std::function<void(const std::string&)>& report) {
  if (options.bytes.size() < 2 || options.repeats < 1 ||
      std::any_of(options.bytes.begin(), options.bytes.end(), [](double b) { return !(b >= 4); })) {
    throw Error({"", 0, "--message-sizes"}, "the message probe needs two sizes of 4 bytes or more and one repeat",
                "e.g. the default sizes, 1 KB to 64 MB");
  }
  report("[probe messages] 2 processes, " + std::to_string(options.bytes.size()) + " sizes, " +
         std::to_string(options.repeats) + " round trips each");
  MessageProbe probe;
  probe.bytes = options.bytes;
  const std::vector<std::vector<double>> ranks = run_connected_children(
      2, 4 * options.bytes.size(), options.timeout, {},
      [&](Transport& transport, int rank) { return ping_pong(options, transport, rank); }, "message probe",
      "read its message above (a peer that hangs is given up after a minute)");
  const std::vector<double>& figures = ranks[0];  // rank 0 timed the round trips
  for (std::size_t i = 0; i < options.bytes.size(); ++i) {
    probe.one_way_s.push_back(figures[4 * i]);
    probe.post_s.push_back(figures[4 * i + 1]);
    probe.take_s.push_back(figures[4 * i + 2]);
    probe.cpu_s.push_back(ranks[0][4 * i + 3] + ranks[1][4 * i + 3]);
  }
  probe.link = fit_link(probe.bytes, probe.one_way_s);
  try {
    const LinkFit cpu = fit_link(probe.bytes, probe.cpu_s);  // the same line: a fixed part and one per byte
    probe.link.message_cpu_s = cpu.latency_s;
    probe.link.message_cpu_s_per_byte = 1.0 / cpu.bandwidth_bytes_per_s;
  } catch (const Error&) {  // no growth with the size (noise on a quiet machine): the fixed part alone
    probe.link.message_cpu_s = median_of(probe.cpu_s);
  }
  // The fixed parts: medians over the sizes up to 64 KB (all of them when none is that small). Larger
  // messages' posting and taking include copying and, where the transport waits for the receiver
  // before it sends a large message, the transfer itself: the link's bandwidth carries those.
  std::vector<double> small_posts, small_takes;
  for (std::size_t i = 0; i < probe.bytes.size(); ++i) {
    if (probe.bytes[i] > kSmallMessageBytes) continue;
    small_posts.push_back(probe.post_s[i]);
    small_takes.push_back(probe.take_s[i]);
  }
  probe.link.send_overhead_s = median_of(small_posts.empty() ? probe.post_s : small_posts);
  probe.link.recv_overhead_s = median_of(small_takes.empty() ? probe.take_s : small_takes);
  return probe;
}

nlohmann::json message_probe_to_json(const MessageProbe& probe) {
  return {{"bytes", probe.bytes},
          {"one_way_s", probe.one_way_s},
          {"post_s", probe.post_s},
          {"take_s", probe.take_s},
          {"cpu_s", probe.cpu_s},
          {"message_cpu_s", probe.link.message_cpu_s},
          {"message_cpu_s_per_byte", probe.link.message_cpu_s_per_byte},
          {"send_overhead_s", probe.link.send_overhead_s},
          {"recv_overhead_s", probe.link.recv_overhead_s},
          {"latency_s", probe.link.latency_s},
          {"bandwidth_bytes_per_s", probe.link.bandwidth_bytes_per_s},
          {"rms_relative_error", probe.link.rms_relative_error}};
}

}  // namespace pipetwin::exec
