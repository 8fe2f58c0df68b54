#include "exec/message_probe.h"

#include <algorithm>

#include "exec/child_processes.h"
#include "exec/process_setup.h"
#include "exec/transport.h"
#include "planner/error.h"
#include "traces/prediction_accuracy.h"

namespace pipetwin::exec {
namespace {

using Clock = std::chrono::steady_clock;

// Rank 0 of the pair: the one-way time per size (half the median round trip); rank 1 echoes.
std::vector<double> ping_pong(const MessageProbeOptions& options, int rank, int port) {
  keep_freed_memory();
  torch::set_num_threads(1);
  Rendezvous rendezvous;
  rendezvous.master_port = port;
  rendezvous.rank = rank;
  rendezvous.world_size = 2;
  rendezvous.timeout = options.timeout;
  Transport transport(rendezvous, {});
  pin_to_own_core(rank, 2);  // after the transport, as workers
  const int peer = 1 - rank;
  int tag = 0;
  std::vector<double> one_way_s;
  auto round_trip = [&](torch::Tensor& tensor) {
    if (rank == 0) {
      transport.send(tensor, peer, tag, "probe message");
      transport.receive(tensor, peer, tag + 1, "probe echo");
    } else {
      transport.receive(tensor, peer, tag, "probe message");
      transport.send(tensor, peer, tag + 1, "probe echo");
    }
    tag += 2;
  };
  torch::Tensor first = torch::zeros({1});
  for (int warm = 0; warm < 5; ++warm) round_trip(first);  // the pair's connection set up, untimed
  for (double bytes : options.bytes) {
    torch::Tensor tensor = torch::zeros({std::max<std::int64_t>(1, static_cast<std::int64_t>(bytes) / 4)});
    std::vector<double> round_trips;
    for (int repeat = -1; repeat < options.repeats; ++repeat) {  // -1: the warm-up
      const Clock::time_point start = Clock::now();
      round_trip(tensor);
      if (repeat >= 0) round_trips.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    one_way_s.push_back(median_of(round_trips) / 2);
  }
  transport.finish_sends();
  transport.barrier();
  return one_way_s;
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
  const int port = free_local_port();
  MessageProbe probe;
  probe.bytes = options.bytes;
  probe.one_way_s = run_in_children(
      2, options.bytes.size(), [&](int rank) { return ping_pong(options, rank, port); }, "message probe",
      "read its message above (a peer that hangs is given up after a minute)")[0];  // rank 0 timed the round trips
  probe.link = fit_link(probe.bytes, probe.one_way_s);
  return probe;
}

nlohmann::json message_probe_to_json(const MessageProbe& probe) {
  return {{"bytes", probe.bytes},
          {"one_way_s", probe.one_way_s},
          {"latency_s", probe.link.latency_s},
          {"bandwidth_bytes_per_s", probe.link.bandwidth_bytes_per_s},
          {"rms_relative_error", probe.link.rms_relative_error}};
}

}  // namespace pipetwin::exec
