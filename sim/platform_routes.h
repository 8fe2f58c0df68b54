// Platform routes — any platform build_platform makes, written as SimGrid XML by its routes: one Full
// zone of the workers, every link a route uses (split-duplex links as their two directions, e.g.
// "link0_3_UP"), and for every ordered pair of workers the route SimGrid itself computes between them.
// Used for the fabrics built with SimGrid's own cluster zones (fat tree, torus, dragonfly), whose XML
// form (<cluster topology=...>) makes each leaf one host where pipetwin's leaves are servers of
// several GPUs; the routes are taken from the built zone, so the XML routes as the simulator does.
// Pairs grow with the square of the workers: kMaxRoutedWorkers bounds the file (~20 MB at the bound).
#pragma once

#include <string>

#include "planner/cluster.h"

namespace pipetwin::sim {

inline constexpr int kMaxRoutedWorkers = 256;

// The platform of `cluster` as SimGrid XML (DTD 4.1), built in a child process (SimGrid's engine runs
// once per process). Throws Error naming the levels above kMaxRoutedWorkers workers.
std::string routed_platform_xml(const Cluster& cluster);

}  // namespace pipetwin::sim
