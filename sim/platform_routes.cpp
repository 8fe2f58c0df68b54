#include "sim/platform_routes.h"

#include <map>
#include <memory>
#include <simgrid/s4u.hpp>
#include <sstream>
#include <vector>

#include "planner/error.h"
#include "sim/platform.h"
#include "sim/subprocess.h"

namespace sg4 = simgrid::s4u;

namespace pipetwin::sim {
namespace {

const char* policy_name(sg4::Link::SharingPolicy policy) {
  switch (policy) {
    case sg4::Link::SharingPolicy::FATPIPE:
      return "FATPIPE";
    case sg4::Link::SharingPolicy::SHARED:
      return "SHARED";
    default:
      // A split-duplex link's routes name its two directions, each a shared link of its own.
      throw Error({"", 0, "fabric"}, "a route crosses a link SimGrid shares by a policy the XML export does not write",
                  "simulate the cluster file itself");
  }
}

// Builds the platform in this (child) process and writes it by its routes.
std::string write_routes(const Cluster& cluster) {
  const std::unique_ptr<sg4::Engine> engine = start_engine_for_exact_links();
  const std::vector<sg4::Host*> hosts = build_platform(cluster);
  std::map<std::string, const sg4::Link*> links;  // by name: the XML lists them sorted, deterministic
  std::ostringstream routes;
  std::vector<sg4::Link*> route;
  for (const sg4::Host* from : hosts) {
    for (const sg4::Host* to : hosts) {
      if (from == to) continue;
      route.clear();
      double latency_s = 0;
      from->route_to(to, route, &latency_s);
      routes << "    <route src=\"" << from->get_name() << "\" dst=\"" << to->get_name() << "\" symmetrical=\"NO\">";
      for (const sg4::Link* link : route) {
        links.emplace(link->get_name(), link);
        routes << "<link_ctn id=\"" << link->get_name() << "\"/>";
      }
      routes << "</route>\n";
    }
  }
  std::ostringstream out;
  out << xml_opening(cluster, "Full",
                     "the " + cluster.fabric().kind + " pipetwin simulate builds with SimGrid's cluster zone, by the route " +
                         "SimGrid computes for every pair of workers.");
  for (const auto& [link_name, link] : links) {
    out << "    <link id=\"" << link_name << "\" bandwidth=\"" << xml_number(link->get_bandwidth()) << "Bps\" latency=\""
        << xml_number(link->get_latency()) << "s\" sharing_policy=\"" << policy_name(link->get_sharing_policy()) << "\"/>\n";
  }
  out << routes.str() << kXmlClosing;
  return out.str();
}

}  // namespace

std::string routed_platform_xml(const Cluster& cluster) {
  if (cluster.worker_count() > kMaxRoutedWorkers) {
    throw Error({cluster.source_path(), 0, "fabric"},
                "the XML export of a " + cluster.fabric().kind + " writes a route per pair of workers; " +
                    std::to_string(cluster.worker_count()) + " workers are more than " + std::to_string(kMaxRoutedWorkers),
                "simulate the cluster file itself (SimGrid builds the zone), or export a smaller " + cluster.fabric().kind);
  }
  const std::string text = finish_child(start_child([&cluster] { return write_routes(cluster); }));
  if (const auto error = child_error(text)) {
    throw Error({cluster.source_path(), 0, "fabric"}, "building the platform failed: " + *error, "check the cluster file's fabric");
  }
  return text;
}

}  // namespace pipetwin::sim
