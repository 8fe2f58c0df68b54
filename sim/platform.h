// Platform — a cluster spec as a SimGrid 3.32 platform, built in C++, and the same as SimGrid XML.
//
// Every worker is a host (speed = device speed x 1 Gflop/s, so a host runs the profile's times as
// profiled when speed is 1). Each unit of level L is joined to its parent's switch by a split-duplex
// link with level L's bandwidth (a GPU's NVLink/PCIe link to its server switch, a server's NIC to the
// rack switch, ...), half of the level's latency each way, so a route between two workers of the same
// unit at level L crosses 2(L+1) links and has the level's latency summed over the levels it climbs.
// Routing is shortest-path (Dijkstra, cached). The engine is configured for exact link figures:
// CM02 network model, no TCP-gamma cap, no cross-traffic.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "planner/cluster.h"

namespace simgrid::s4u {
class Engine;
class Host;
}

namespace pipetwin::sim {

inline constexpr double kReferenceFlopsPerSecond = 1e9;

// Engine settings for exact link figures; call before the platform is created.
void configure_engine_for_exact_links();

// Each actor's stack. SimGrid's default, 8 MiB, costs the mapping of 8 MiB per actor: at 16,384
// GPUs a third of the run (bench/README.md). pipetwin's actors need under 8 KiB (the whole test suite
// passes at 8 KiB, not at 4 KiB): 256 KiB leaves a 32-fold margin.
inline constexpr int kActorStackKiB = 256;

// This process's SimGrid engine (one per process), logging only critical messages, configured for
// exact link figures, its actors' stacks kActorStackKiB.
std::unique_ptr<simgrid::s4u::Engine> start_engine_for_exact_links();

// Builds the platform in the current engine and returns the workers' hosts, worker 0 first. With the
// device's shared_compute > 0 it also makes one unrouted host per machine (a unit of the innermost
// level), speed shared_compute x device speed x 1 Gflop/s, where that machine's workers compute; with
// shared_compute_by_count, one pstate per count of computing workers (the simulator switches them).
std::vector<simgrid::s4u::Host*> build_platform(const Cluster& cluster);

// The machine host of a worker when the cluster's workers share compute (nullptr otherwise).
simgrid::s4u::Host* shared_compute_host(const Cluster& cluster, int worker);

// Loads a user's SimGrid XML platform; workers are its hosts in name order ("a host list"), or the
// hosts named in `host_names` in that order. Throws Error when there are fewer hosts than needed.
std::vector<simgrid::s4u::Host*> load_platform_xml(const std::string& path, int workers);

// The platform build_platform makes, as a SimGrid XML document (DTD 4.1) that load_platform_xml reads:
// the levels' tree, or a rail-optimized fabric's graph; SimGrid's fat tree, torus or dragonfly by their
// routes (platform_routes.h: their XML form makes each leaf one host, not a server of several GPUs).
std::string platform_xml(const Cluster& cluster);

// Pieces both XML exports write: a figure to full precision ("%.17g"); the document's opening through
// the zone's opening tag (`routing`: Dijkstra, Full) and the worker hosts, `origin` saying what the
// file is; its closing.
std::string xml_number(double value);
std::string xml_opening(const Cluster& cluster, const std::string& routing, const std::string& origin);
inline constexpr const char* kXmlClosing = "  </zone>\n</platform>\n";

}  // namespace pipetwin::sim
