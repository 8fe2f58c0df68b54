#include "sim/platform.h"

#include <algorithm>
#include <cstdio>
#include <simgrid/s4u.hpp>
#include <sstream>

#include "planner/error.h"

namespace sg4 = simgrid::s4u;

namespace pipetwin::sim {
namespace {

std::string number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.17g", value);
  return buffer;
}

std::string worker_name(int w) { return "worker" + std::to_string(w); }
// The shared compute host of machine m (a unit of the innermost level).
std::string machine_name(int m) { return "machine" + std::to_string(m); }
// The switch of unit u at level L (L >= 1): for L = 1 a server's switch, and so on; the outermost
// level's single switch is the root.
std::string switch_name(std::size_t level, int unit) { return "switch" + std::to_string(level) + "_" + std::to_string(unit); }
std::string link_name(std::size_t level, int unit) { return "link" + std::to_string(level) + "_" + std::to_string(unit); }

// Units at each level: level 0 units are workers; level L units are groups of level L-1 units.
std::vector<int> units_per_level(const Cluster& cluster) {
  std::vector<int> units;
  int count = cluster.worker_count();
  for (const ClusterLevel& level : cluster.levels()) {
    units.push_back(count);
    count /= level.count;
  }
  return units;
}

}  // namespace

void configure_engine_for_exact_links() {
  sg4::Engine::set_config("network/model:CM02");
  sg4::Engine::set_config("network/TCP-gamma:1e300");
  sg4::Engine::set_config("network/crosstraffic:0");
  sg4::Engine::set_config("surf/precision:1e-12");
}

namespace {

// Builds unit `u` of level `level` inside `parent` (a star zone: the switch above it) and its link to
// that switch: a worker's host for level 0, else a star zone of its own units (the unit's switch, with
// a router as the gateway the units above route through). Hosts are appended in worker order.
void build_unit(sg4::NetZone* parent, const Cluster& cluster, std::size_t level, int u, std::vector<sg4::Host*>& hosts) {
  const ClusterLevel& spec = cluster.levels()[level];
  simgrid::kernel::routing::NetPoint* component = nullptr;
  simgrid::kernel::routing::NetPoint* gateway = nullptr;
  if (level == 0) {
    hosts.push_back(parent->create_host(worker_name(u), cluster.device().worker_speed(u) * kReferenceFlopsPerSecond));
    component = hosts.back()->get_netpoint();
  } else {
    sg4::NetZone* zone = sg4::create_star_zone("unit" + std::to_string(level) + "_" + std::to_string(u));
    zone->set_parent(parent);
    const int below = cluster.levels()[level - 1].count;
    for (int child = u * below; child < (u + 1) * below; ++child) build_unit(zone, cluster, level - 1, child, hosts);
    gateway = zone->create_router(switch_name(level, u));
    zone->seal();
    component = zone->get_netpoint();
  }
  sg4::Link* link = parent->create_split_duplex_link(link_name(level, u), spec.bandwidth_bytes_per_s)->set_latency(spec.latency_s / 2);
  parent->add_route(component, nullptr, gateway, nullptr, {sg4::LinkInRoute(link, sg4::LinkInRoute::Direction::UP)}, true);
}

}  // namespace

// Nested star zones, one per switch: routes follow the tree (up to the lowest common switch, down),
// found level by level without a graph search, so building and routing stay linear in the workers.
std::vector<sg4::Host*> build_platform(const Cluster& cluster) {
  const auto& levels = cluster.levels();
  sg4::NetZone* root = sg4::create_star_zone(cluster.name());
  std::vector<sg4::Host*> hosts;
  const int outermost_units = units_per_level(cluster).back();
  for (int u = 0; u < outermost_units; ++u) build_unit(root, cluster, levels.size() - 1, u, hosts);
  if (cluster.device().shares_compute()) {
    // One pstate per number of computing workers (a single one with shared_compute alone); unrouted.
    std::vector<double> speeds;
    const double unit = cluster.device().speed * kReferenceFlopsPerSecond;
    for (double capacity : cluster.device().shared_compute_by_count) speeds.push_back(capacity * unit);
    if (speeds.empty()) speeds.push_back(cluster.device().shared_compute * unit);
    for (int m = 0; m < cluster.worker_count() / levels[0].count; ++m) root->create_host(machine_name(m), speeds);
  }
  root->seal();
  return hosts;
}

sg4::Host* shared_compute_host(const Cluster& cluster, int worker) {
  if (!cluster.device().shares_compute()) return nullptr;
  return sg4::Host::by_name(machine_name(worker / cluster.levels().front().count));
}

std::vector<sg4::Host*> load_platform_xml(const std::string& path, int workers) {
  try {
    sg4::Engine::get_instance()->load_platform(path);
  } catch (const std::exception& error) {
    throw Error({path, 0, ""}, std::string("SimGrid cannot load this platform: ") + error.what(),
                "check it against SimGrid's platform DTD 4.1, or write one with pipetwin platform");
  }
  std::vector<sg4::Host*> hosts = sg4::Engine::get_instance()->get_all_hosts();
  std::sort(hosts.begin(), hosts.end(), [](const sg4::Host* a, const sg4::Host* b) {
    // Natural order: worker2 before worker10.
    const std::string& x = a->get_name();
    const std::string& y = b->get_name();
    const auto digits_x = x.find_last_not_of("0123456789") + 1, digits_y = y.find_last_not_of("0123456789") + 1;
    if (x.substr(0, digits_x) == y.substr(0, digits_y) && digits_x < x.size() && digits_y < y.size()) {
      return std::stoll(x.substr(digits_x)) < std::stoll(y.substr(digits_y));
    }
    return x < y;
  });
  if (static_cast<int>(hosts.size()) < workers) {
    throw Error({path, 0, "host"}, "the platform has " + std::to_string(hosts.size()) + " hosts, the plan needs " +
                                       std::to_string(workers),
                "add hosts, or plan for fewer workers");
  }
  hosts.resize(workers);
  return hosts;
}

std::string platform_xml(const Cluster& cluster) {
  const auto& levels = cluster.levels();
  const std::vector<int> units = units_per_level(cluster);
  std::ostringstream out;
  out << "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
      << "<!-- " << cluster.name() << ": " << cluster.description() << " -->\n"
      << "<!-- Written by pipetwin platform; the same platform pipetwin simulate builds. -->\n"
      << "<platform version=\"4.1\">\n"
      << "  <zone id=\"" << cluster.name() << "\" routing=\"Dijkstra\">\n";
  for (int w = 0; w < cluster.worker_count(); ++w) {
    out << "    <host id=\"" << worker_name(w) << "\" speed=\"" << number(cluster.device().worker_speed(w) * kReferenceFlopsPerSecond)
        << "f\"/>\n";
  }
  for (std::size_t l = 1; l <= levels.size(); ++l) {
    const int count = l < levels.size() ? units[l] : 1;
    for (int u = 0; u < count; ++u) out << "    <router id=\"" << switch_name(l, u) << "\"/>\n";
  }
  for (std::size_t l = 0; l < levels.size(); ++l) {
    for (int u = 0; u < units[l]; ++u) {
      out << "    <link id=\"" << link_name(l, u) << "\" bandwidth=\"" << number(levels[l].bandwidth_bytes_per_s)
          << "Bps\" latency=\"" << number(levels[l].latency_s / 2) << "s\" sharing_policy=\"SPLITDUPLEX\"/>\n";
    }
  }
  for (std::size_t l = 0; l < levels.size(); ++l) {
    for (int u = 0; u < units[l]; ++u) {
      const std::string below = l == 0 ? worker_name(u) : switch_name(l, u);
      const std::string above = switch_name(l + 1, l + 1 < levels.size() ? u / levels[l].count : 0);
      out << "    <route src=\"" << below << "\" dst=\"" << above << "\"><link_ctn id=\"" << link_name(l, u)
          << "\" direction=\"UP\"/></route>\n";
    }
  }
  out << "  </zone>\n</platform>\n";
  return out.str();
}

}  // namespace pipetwin::sim
