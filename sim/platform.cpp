#include "sim/platform.h"

#include <algorithm>
#include <cstdio>
#include <simgrid/kernel/routing/NetZoneImpl.hpp>
#include <simgrid/s4u.hpp>
#include <map>
#include <memory>
#include <sstream>

#include "planner/error.h"
#include "sim/platform_routes.h"

namespace sg4 = simgrid::s4u;

namespace pipetwin::sim {
namespace {

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

std::unique_ptr<sg4::Engine> start_engine_for_exact_links() {
  int argc = 2;
  char name[] = "pipetwin";
  char log[] = "--log=root.thresh:critical";
  char* argv[] = {name, log, nullptr};
  auto engine = std::make_unique<sg4::Engine>(&argc, argv);
  configure_engine_for_exact_links();
  sg4::Engine::set_config("contexts/stack-size:" + std::to_string(kActorStackKiB));
  return engine;
}

namespace {

using NetPoint = simgrid::kernel::routing::NetPoint;

// A netpoint of a zone and the gateway through which routes enter it (nullptr for a host).
using Point = std::pair<NetPoint*, NetPoint*>;

// `link` as the way up from `component` to `above` (nullptr: a star zone's centre) in `zone`, both ways.
void link_up(sg4::NetZone* zone, Point component, Point above, sg4::Link* link) {
  zone->add_route(component.first, above.first, component.second, above.second,
                  {sg4::LinkInRoute(link, sg4::LinkInRoute::Direction::UP)}, true);
}

// Worker `w`'s host in `zone`, at its device's speed.
sg4::Host* create_worker(sg4::NetZone* zone, const Cluster& cluster, int w) {
  return zone->create_host(worker_name(w), cluster.device().worker_speed(w) * kReferenceFlopsPerSecond);
}

sg4::Link* level_link(sg4::NetZone* zone, const ClusterLevel& level, std::size_t index, int unit) {
  return zone->create_split_duplex_link(link_name(index, unit), level.bandwidth_bytes_per_s)->set_latency(level.latency_s / 2);
}

// Server `s` (a unit of levels[0]) inside `parent`: a star zone of its workers, each on its own link
// to the server's switch, which is the zone's gateway. Fills hosts[w] for its workers. Built detached
// from the engine's root (detached_zone), the zone's seal would not find its hosts: it seals them.
Point build_server(sg4::NetZone* parent, const Cluster& cluster, int s, std::vector<sg4::Host*>& hosts) {
  const ClusterLevel& server = cluster.levels().front();
  sg4::NetZone* zone = sg4::create_star_zone("server" + std::to_string(s));
  zone->set_parent(parent);
  for (int w = s * server.count; w < (s + 1) * server.count; ++w) {
    hosts[w] = create_worker(zone, cluster, w);
    link_up(zone, {hosts[w]->get_netpoint(), nullptr}, {nullptr, nullptr}, level_link(zone, server, 0, w));
  }
  NetPoint* gateway = zone->create_router(switch_name(1, s));
  for (int w = s * server.count; w < (s + 1) * server.count; ++w) hosts[w]->seal();
  zone->seal();
  return {zone->get_netpoint(), gateway};
}

// The cluster's fabric above its servers as one of SimGrid's cluster zones (FAT_TREE, TORUS or
// DRAGONFLY), whose leaves are the servers (each a star zone of its workers, the server's switch as
// gateway), inside `holder`. Hosts are returned in worker order.
std::vector<sg4::Host*> build_cluster_zone(sg4::NetZone* holder, const Cluster& cluster) {
  const Fabric& fabric = cluster.fabric();
  std::vector<sg4::Host*> hosts(cluster.worker_count(), nullptr);
  auto leaf = [&](sg4::NetZone* parent, const std::vector<unsigned long>&, unsigned long id) {
    return build_server(parent, cluster, static_cast<int>(id), hosts);
  };
  const sg4::ClusterCallbacks callbacks(leaf);
  const auto policy = sg4::Link::SharingPolicy::SPLITDUPLEX;
  auto pair = [](const std::vector<int>& values) {
    return std::pair<unsigned int, unsigned int>(static_cast<unsigned int>(values[0]), static_cast<unsigned int>(values[1]));
  };
  sg4::NetZone* zone = nullptr;
  if (fabric.kind == "torus") {
    const std::vector<unsigned long> dimensions(fabric.dimensions.begin(), fabric.dimensions.end());
    zone = sg4::create_torus_zone(cluster.name() + ":fabric", holder, dimensions, callbacks, fabric.bandwidth_bytes_per_s,
                                  fabric.latency_s, policy);
  } else if (fabric.kind == "dragonfly") {
    const sg4::DragonflyParams shape(pair(fabric.groups), pair(fabric.chassis), pair(fabric.routers),
                                     static_cast<unsigned int>(fabric.nodes));
    zone = sg4::create_dragonfly_zone(cluster.name() + ":fabric", holder, shape, callbacks, fabric.bandwidth_bytes_per_s,
                                      fabric.latency_s, policy);
  } else {
    auto counts = [](const std::vector<int>& values) { return std::vector<unsigned int>(values.begin(), values.end()); };
    const sg4::FatTreeParams shape(static_cast<unsigned int>(fabric.down.size()), counts(fabric.down), counts(fabric.up),
                                   counts(fabric.link_count));
    zone = sg4::create_fatTree_zone(cluster.name() + ":fabric", holder, shape, callbacks, fabric.bandwidth_bytes_per_s,
                                    fabric.latency_s, policy);
  }
  zone->seal();
  return hosts;
}

// A rail-optimized fabric (Fabric) as a graph, the one description both the builder and the XML
// export follow: one Dijkstra zone of the workers, a switch per server (NVLink, levels[0]) and a switch
// per rail; each worker has a link to its server's switch and its own NIC to its rail's switch. With
// servers_per_leaf, each rail has a leaf switch per group of that many servers and a spine joining its
// leaves, each leaf's uplink carrying its NICs' bandwidth over spine_oversubscription (latency as a
// NIC's). Routes are shortest paths, through a worker where that is shorter: across rails and servers,
// NVLink to the GPU on the destination's rail, then its NIC (as NCCL's PXN). Not a tree, so routes
// come from the graph (cached per source): meant for thousands of GPUs, not tens of thousands.
struct RailGraph {
  struct Link {
    std::string name;
    double bandwidth_bytes_per_s;
    double latency_s;
  };
  struct Edge {  // a split-duplex link, up from `from` to `to`, down back
    std::string from, to;
    std::size_t link;
  };
  std::vector<std::string> routers;
  std::vector<Link> links;
  std::vector<Edge> edges;
};

RailGraph rail_graph(const Cluster& cluster) {
  const Fabric& fabric = cluster.fabric();
  const ClusterLevel& server = cluster.levels().front();
  RailGraph graph;
  auto join = [&](std::string from, std::string to, RailGraph::Link link) {
    graph.edges.push_back({std::move(from), std::move(to), graph.links.size()});
    graph.links.push_back(std::move(link));
  };
  // The switch a worker's NIC on rail r joins under leaf `leaf` (one leaf: the rail's switch).
  const int per_leaf = fabric.servers_per_leaf > 0 ? fabric.servers_per_leaf : cluster.servers();
  const int leaves = cluster.servers() / per_leaf;
  auto rail_switch = [&](int leaf, int r) {
    return leaves == 1 ? "rail" + std::to_string(r) : "leaf" + std::to_string(leaf) + "_rail" + std::to_string(r);
  };
  for (int leaf = 0; leaf < leaves; ++leaf) {
    for (int r = 0; r < server.count; ++r) graph.routers.push_back(rail_switch(leaf, r));
  }
  if (leaves > 1) {
    const double uplink_bytes_per_s = per_leaf * fabric.bandwidth_bytes_per_s / fabric.spine_oversubscription;
    for (int r = 0; r < server.count; ++r) {
      const std::string spine = "spine_rail" + std::to_string(r);
      graph.routers.push_back(spine);
      for (int leaf = 0; leaf < leaves; ++leaf) {
        join(rail_switch(leaf, r), spine,
             {"uplink" + std::to_string(leaf) + "_rail" + std::to_string(r), uplink_bytes_per_s, fabric.latency_s / 2});
      }
    }
  }
  for (int s = 0; s < cluster.servers(); ++s) {
    graph.routers.push_back(switch_name(1, s));
    for (int r = 0; r < server.count; ++r) {
      const int w = s * server.count + r;
      join(worker_name(w), switch_name(1, s), {link_name(0, w), server.bandwidth_bytes_per_s, server.latency_s / 2});
      join(worker_name(w), rail_switch(s / per_leaf, r), {"nic" + std::to_string(w), fabric.bandwidth_bytes_per_s, fabric.latency_s / 2});
    }
  }
  return graph;
}

std::vector<sg4::Host*> build_rail_optimized(const Cluster& cluster) {
  const RailGraph graph = rail_graph(cluster);
  sg4::NetZone* zone = sg4::create_dijkstra_zone(cluster.name(), true);
  std::vector<sg4::Host*> hosts;
  std::map<std::string, NetPoint*> points;
  for (int w = 0; w < cluster.worker_count(); ++w) {
    hosts.push_back(create_worker(zone, cluster, w));
    points[worker_name(w)] = hosts.back()->get_netpoint();
  }
  for (const std::string& router : graph.routers) points[router] = zone->create_router(router);
  std::vector<sg4::Link*> links;
  for (const RailGraph::Link& link : graph.links) {
    links.push_back(zone->create_split_duplex_link(link.name, link.bandwidth_bytes_per_s)->set_latency(link.latency_s));
  }
  for (const RailGraph::Edge& edge : graph.edges) {
    zone->add_route(points.at(edge.from), points.at(edge.to), nullptr, nullptr,
                    {sg4::LinkInRoute(links[edge.link], sg4::LinkInRoute::Direction::UP)}, true);
  }
  zone->seal();
  return hosts;
}

// Unit `u` of build level `level` inside `parent`: a server (level 1, build_server), or a star zone of
// its units (level >= 2), each on its own link (the level's bandwidth) to the unit's switch. That
// switch is a router in a star zone of its own inside the unit: SimGrid 3.32 misroutes towards a
// router that sits beside sub-zones (a route to it took the first sub-zone's link).
Point build_unit(sg4::NetZone* parent, const Cluster& cluster, std::size_t level, int u, std::vector<sg4::Host*>& hosts) {
  if (level == 1) return build_server(parent, cluster, u, hosts);
  const auto& levels = cluster.levels();
  sg4::NetZone* zone = sg4::create_star_zone("unit" + std::to_string(level) + "_" + std::to_string(u));
  zone->set_parent(parent);
  const int below = levels[level - 1].count;
  for (int child = u * below; child < (u + 1) * below; ++child) {
    const Point unit = build_unit(zone, cluster, level - 1, child, hosts);
    link_up(zone, unit, {nullptr, nullptr}, level_link(zone, levels[level - 1], level - 1, child));
  }
  sg4::NetZone* switch_zone = sg4::create_star_zone("switch_zone" + std::to_string(level) + "_" + std::to_string(u));
  switch_zone->set_parent(zone);
  NetPoint* router = switch_zone->create_router(switch_name(level, u));
  switch_zone->seal();
  zone->add_route(switch_zone->get_netpoint(), nullptr, router, nullptr, {}, true);
  zone->seal();
  return {zone->get_netpoint(), router};
}

// The cluster's own zone, detached from the engine's root zone (`root`, which stays empty) until it is
// complete. SimGrid 3.32 checks each new host's and link's name against every zone reachable from the
// root, and each zone's seal scans every reachable host for its own: built under the root, a platform
// of Z zones costs Z x (hosts + links), quadratic in the servers (half the time of a 16,384-GPU run).
// Detached, each check sees the empty root. Names are unique by construction. Attach with set_parent.
sg4::NetZone* detached_zone(const std::string& name, const sg4::NetZone* root) {
  sg4::NetZone* zone = sg4::create_star_zone(name);
  simgrid::kernel::routing::NetZoneImpl* impl = zone->get_impl();
  const simgrid::kernel::routing::NetZoneImpl* models = root->get_impl();
  impl->set_network_model(models->get_network_model());
  impl->set_cpu_pm_model(models->get_cpu_pm_model());
  impl->set_cpu_vm_model(models->get_cpu_vm_model());
  impl->set_disk_model(models->get_disk_model());
  impl->set_host_model(models->get_host_model());
  return zone;
}

// Star zones all the way inside `holder`: each server a star of its workers (its switch as gateway),
// each unit above a star of its units, `holder` a star of the outermost units; routes are found level
// by level without a graph search. A single level: one star of workers.
std::vector<sg4::Host*> build_levels(sg4::NetZone* holder, const Cluster& cluster) {
  const auto& levels = cluster.levels();
  std::vector<sg4::Host*> hosts(cluster.worker_count(), nullptr);
  if (levels.size() == 1) {
    for (int w = 0; w < cluster.worker_count(); ++w) {
      hosts[w] = create_worker(holder, cluster, w);
      link_up(holder, {hosts[w]->get_netpoint(), nullptr}, {nullptr, nullptr}, level_link(holder, levels[0], 0, w));
    }
  } else {
    const std::size_t outermost = levels.size() - 1;
    for (int u = 0; u < units_per_level(cluster)[outermost]; ++u) {
      const Point unit = build_unit(holder, cluster, outermost, u, hosts);
      link_up(holder, unit, {nullptr, nullptr}, level_link(holder, levels[outermost], outermost, u));
    }
  }
  if (cluster.device().shares_compute()) {
    // One pstate per number of computing workers (a single one with shared_compute alone); unrouted.
    std::vector<double> speeds;
    const double unit = cluster.device().speed * kReferenceFlopsPerSecond;
    for (double capacity : cluster.device().shared_compute_by_count) speeds.push_back(capacity * unit);
    if (speeds.empty()) speeds.push_back(cluster.device().shared_compute * unit);
    for (int m = 0; m < cluster.servers(); ++m) holder->create_host(machine_name(m), speeds);
  }
  return hosts;
}

}  // namespace

// The levels as star zones (build_levels), or a fabric above the servers: one of SimGrid's cluster zones
// (build_cluster_zone) or a rail-optimized graph (build_rail_optimized, a single zone). Zoned platforms
// are built in a zone named after the cluster, detached from the engine's root until complete
// (detached_zone), so that building and routing stay linear in the workers.
std::vector<sg4::Host*> build_platform(const Cluster& cluster) {
  const bool fabric = cluster.fabric().present();
  if (fabric && cluster.device().shares_compute()) {
    throw Error({cluster.source_path(), 0, "device.shared_compute"}, "a machine's shared compute is not modelled under a fabric",
                "leave out the fabric (machines sharing compute are this machine's processes) or shared_compute");
  }
  if (fabric && cluster.fabric().kind == "rail-optimized") return build_rail_optimized(cluster);
  sg4::NetZone* engine_root = sg4::create_star_zone("pipetwin:" + cluster.name());
  sg4::NetZone* holder = detached_zone(cluster.name(), engine_root);
  std::vector<sg4::Host*> hosts = fabric ? build_cluster_zone(holder, cluster) : build_levels(holder, cluster);
  holder->set_parent(engine_root);
  engine_root->seal();
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

std::string xml_number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.17g", value);
  return buffer;
}

std::string xml_opening(const Cluster& cluster, const std::string& routing, const std::string& origin) {
  std::ostringstream out;
  out << "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
      << "<!-- " << cluster.name() << ": " << cluster.description() << " -->\n"
      << "<!-- Written by pipetwin platform: " << origin << " -->\n"
      << "<platform version=\"4.1\">\n"
      << "  <zone id=\"" << cluster.name() << "\" routing=\"" << routing << "\">\n";
  for (int w = 0; w < cluster.worker_count(); ++w) {
    out << "    <host id=\"" << worker_name(w) << "\" speed=\"" << xml_number(cluster.device().worker_speed(w) * kReferenceFlopsPerSecond)
        << "f\"/>\n";
  }
  return out.str();
}

namespace {

constexpr const char* kSameAsSimulate = "the same platform pipetwin simulate builds.";

std::string xml_link(const std::string& name, double bandwidth_bytes_per_s, double latency_s) {
  return "    <link id=\"" + name + "\" bandwidth=\"" + xml_number(bandwidth_bytes_per_s) + "Bps\" latency=\"" + xml_number(latency_s) +
         "s\" sharing_policy=\"SPLITDUPLEX\"/>\n";
}

std::string xml_route(const std::string& from, const std::string& to, const std::string& link) {
  return "    <route src=\"" + from + "\" dst=\"" + to + "\"><link_ctn id=\"" + link + "\" direction=\"UP\"/></route>\n";
}

std::string rail_optimized_xml(const Cluster& cluster) {
  const RailGraph graph = rail_graph(cluster);
  std::string out = xml_opening(cluster, "Dijkstra", kSameAsSimulate);
  for (const std::string& router : graph.routers) out += "    <router id=\"" + router + "\"/>\n";
  for (const RailGraph::Link& link : graph.links) out += xml_link(link.name, link.bandwidth_bytes_per_s, link.latency_s);
  for (const RailGraph::Edge& edge : graph.edges) out += xml_route(edge.from, edge.to, graph.links[edge.link].name);
  return out + kXmlClosing;
}

}  // namespace

std::string platform_xml(const Cluster& cluster) {
  if (cluster.fabric().kind == "rail-optimized") return rail_optimized_xml(cluster);
  if (cluster.fabric().present()) return routed_platform_xml(cluster);
  const auto& levels = cluster.levels();
  const std::vector<int> units = units_per_level(cluster);
  std::string out = xml_opening(cluster, "Dijkstra", kSameAsSimulate);
  for (std::size_t l = 1; l <= levels.size(); ++l) {
    const int count = l < levels.size() ? units[l] : 1;
    for (int u = 0; u < count; ++u) out += "    <router id=\"" + switch_name(l, u) + "\"/>\n";
  }
  for (std::size_t l = 0; l < levels.size(); ++l) {
    for (int u = 0; u < units[l]; ++u) out += xml_link(link_name(l, u), levels[l].bandwidth_bytes_per_s, levels[l].latency_s / 2);
  }
  for (std::size_t l = 0; l < levels.size(); ++l) {
    for (int u = 0; u < units[l]; ++u) {
      const std::string below = l == 0 ? worker_name(u) : switch_name(l, u);
      const std::string above = switch_name(l + 1, l + 1 < levels.size() ? u / levels[l].count : 0);
      out += xml_route(below, above, link_name(l, u));
    }
  }
  return out + kXmlClosing;
}

}  // namespace pipetwin::sim
