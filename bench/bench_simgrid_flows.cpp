// SimGrid 3.32's own cost per transfer against the transfers in flight, without pipetwin's simulator:
// P independent pairs of hosts, each on its own link, each pair's actor posting 7 transfers of 1 MB
// (1 ms each on a 1 GB/s link, so 7 in flight per pair) and sleeping 1 s, 200 times. The work is
// linear in P; the wall time measures whether SimGrid's cost per transfer grows with the transfers
// in flight elsewhere, which bounded simulate_llama3_405b's 16,384 GPUs with the sums on the links
// while they were host-to-host flows (16k ring flows at once).
// kind 0: host-to-host flows (Comm::sendto, detached), as pipetwin's ranks' lanes;
// kind 1: mailbox messages between two actors per pair (detached put, waited get), as pipeline sends;
// kind 2: host-to-host flows waited for by their poster (sendto detaches them all the same);
// kind 3: mailbox messages waited for at both ends (put_async, get), as the tensor-parallel sums.
// SimGrid keeps every detached transfer on the maestro's list of activities and removes it from that
// list, by a linear search, when it ends: kinds 0-2 grow with all transfers in flight, kind 3 not.
#include <benchmark/benchmark.h>

#include <chrono>
#include <simgrid/s4u.hpp>
#include <string>

#include "sim/subprocess.h"

namespace sg4 = simgrid::s4u;

namespace {

constexpr int kRounds = 200;
constexpr int kPerRound = 7;

std::string numbered(const char* prefix, int n) {
  std::string text(prefix);
  text += std::to_string(n);
  return text;
}

// Runs the pairs in this (child) process; returns the engine's wall time in seconds.
enum class Kind { detached_flows = 0, mailbox = 1, waited_flows = 2, waited_mailbox = 3 };

std::string run_pairs(int pairs, Kind kind) {
  int argc = 2;
  char name[] = "bench";
  char log[] = "--log=root.thresh:critical";
  char* argv[] = {name, log, nullptr};
  sg4::Engine engine(&argc, argv);
  sg4::NetZone* zone = sg4::create_full_zone("pairs");
  std::vector<sg4::Host*> hosts;
  for (int h = 0; h < 2 * pairs; ++h) hosts.push_back(zone->create_host(numbered("h", h), 1e9));
  for (int p = 0; p < pairs; ++p) {
    sg4::Link* link = zone->create_link(numbered("l", p), 1e9);
    zone->add_route(hosts[2 * p]->get_netpoint(), hosts[2 * p + 1]->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(link)}, true);
  }
  zone->seal();
  for (int p = 0; p < pairs; ++p) {
    sg4::Host* from = hosts[2 * p];
    sg4::Host* to = hosts[2 * p + 1];
    const std::string mailbox = numbered("m", p);
    sg4::Actor::create(numbered("sender", p), from, [=] {
      std::vector<sg4::CommPtr> waited;
      for (int round = 0; round < kRounds; ++round) {
        for (int k = 0; k < kPerRound; ++k) {
          if (kind == Kind::mailbox) {
            sg4::Mailbox::by_name(mailbox)->put_init(new int(k), 1000000)->detach();
          } else if (kind == Kind::waited_mailbox) {
            waited.push_back(sg4::Mailbox::by_name(mailbox)->put_async(new int(k), 1000000));
          } else if (kind == Kind::detached_flows) {
            sg4::Comm::sendto_init(from, to)->set_payload_size(1000000)->detach();
          } else {
            waited.push_back(sg4::Comm::sendto_init(from, to)->set_payload_size(1000000)->start());
          }
        }
        if (kind == Kind::waited_flows || kind == Kind::waited_mailbox) {
          sg4::Comm::wait_all(waited);
          waited.clear();
        }
        sg4::this_actor::sleep_for(1.0);
      }
    });
    if (kind == Kind::mailbox || kind == Kind::waited_mailbox) {
      sg4::Actor::create(numbered("receiver", p), to, [=] {
        for (int n = 0; n < kRounds * kPerRound; ++n) {
          int* payload = nullptr;
          sg4::Mailbox::by_name(mailbox)->get_async<int>(&payload)->wait();
          delete payload;
        }
      });
    }
  }
  const auto start = std::chrono::steady_clock::now();
  engine.run();
  return std::to_string(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

void simgrid_flows_in_flight(benchmark::State& state) {
  const int pairs = static_cast<int>(state.range(0));
  const Kind kind = static_cast<Kind>(state.range(1));
  double engine_s = 0.0;
  for (auto _ : state) {
    engine_s = std::stod(pipetwin::sim::finish_child(pipetwin::sim::start_child([&] { return run_pairs(pairs, kind); })));
    state.SetIterationTime(engine_s);
  }
  const double transfers = static_cast<double>(pairs) * kRounds * kPerRound;
  state.counters["transfers"] = transfers;
  state.counters["in_flight"] = static_cast<double>(pairs) * kPerRound;
  state.counters["us_per_transfer"] = engine_s / transfers * 1e6;
}

}  // namespace

BENCHMARK(simgrid_flows_in_flight)
    ->ArgNames({"pairs", "kind"})
    ->ArgsProduct({{50, 100, 200, 400}, {0, 1, 2, 3}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseManualTime();

BENCHMARK_MAIN();
