#include "planner/cluster.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "planner/error.h"
#include "planner/json_fields.h"

namespace pipetwin {

namespace {

// The fabric's shape: a known kind, one entry per switch level in each list, and as many leaves as
// the cluster has servers.
void check_fabric(const Fabric& fabric, int servers, const std::string& path) {
  const std::vector<std::string> kinds = {"fat-tree", "torus", "dragonfly", "rail-optimized"};
  if (std::find(kinds.begin(), kinds.end(), fabric.kind) == kinds.end()) {
    throw Error({path, 0, "fabric.kind"}, "unknown fabric '" + fabric.kind + "'",
                "use \"fat-tree\", \"torus\", \"dragonfly\" or \"rail-optimized\" (or leave fabric out)");
  }
  if (!(fabric.bandwidth_bytes_per_s > 0.0) || !std::isfinite(fabric.bandwidth_bytes_per_s)) {
    throw Error({path, 0, "fabric.bandwidth_bytes_per_s"}, "bandwidth must be a positive number of bytes per second",
                "e.g. 50e9 for one 400 Gb/s link");
  }
  if (fabric.latency_s < 0.0 || !std::isfinite(fabric.latency_s)) {
    throw Error({path, 0, "fabric.latency_s"}, "latency must be >= 0 seconds", "e.g. 1e-6");
  }
  if (fabric.kind == "rail-optimized") {
    if (fabric.servers_per_leaf < 0 || (fabric.servers_per_leaf > 0 && servers % fabric.servers_per_leaf != 0)) {
      throw Error({path, 0, "fabric.servers_per_leaf"},
                  "the " + std::to_string(servers) + " servers do not split into leaves of " +
                      std::to_string(fabric.servers_per_leaf),
                  "give a divisor of the server count (or 0: one switch per rail)");
    }
    if (!(fabric.spine_oversubscription >= 1.0) || !std::isfinite(fabric.spine_oversubscription)) {
      throw Error({path, 0, "fabric.spine_oversubscription"}, "an oversubscription below 1",
                  "1 for a non-blocking spine, e.g. 2 for a leaf with half its NICs' bandwidth up");
    }
    return;
  }
  auto check_leaves = [&](long long leaves, const std::string& field, const std::string& what) {
    if (leaves != servers) {
      throw Error({path, 0, "fabric." + field},
                  what + " (" + std::to_string(leaves) + ") are not the cluster's " + std::to_string(servers) +
                      " servers (units of levels[0])",
                  "make " + what + " equal the number of servers");
    }
  };
  if (fabric.kind == "torus") {
    if (fabric.dimensions.empty()) {
      throw Error({path, 0, "fabric.dimensions"}, "a torus needs its dimensions", "e.g. \"dimensions\": [4, 4, 2]");
    }
    long long leaves = 1;
    for (int size : fabric.dimensions) {
      if (size < 1) throw Error({path, 0, "fabric.dimensions"}, "a dimension below 1", "sizes are >= 1");
      leaves *= size;
    }
    check_leaves(leaves, "dimensions", "the torus's nodes, the product of dimensions,");
    return;
  }
  if (fabric.kind == "dragonfly") {
    long long leaves = fabric.nodes;
    for (auto [field, pair] : {std::pair{"groups", &fabric.groups}, std::pair{"chassis", &fabric.chassis},
                               std::pair{"routers", &fabric.routers}}) {
      if (pair->size() != 2 || (*pair)[0] < 1 || (*pair)[1] < 1) {
        throw Error({path, 0, std::string("fabric.") + field}, "expected [count, links] of two counts >= 1",
                    "e.g. \"groups\": [4, 2], \"chassis\": [2, 1], \"routers\": [4, 1], \"nodes\": 2");
      }
      leaves *= (*pair)[0];
    }
    if (fabric.nodes < 1) throw Error({path, 0, "fabric.nodes"}, "a router needs at least one server", "e.g. \"nodes\": 2");
    check_leaves(leaves, "nodes", "the dragonfly's nodes, groups x chassis x routers x nodes,");
    return;
  }
  const std::size_t switch_levels = fabric.down.size();
  if (switch_levels == 0 || fabric.up.size() != switch_levels || fabric.link_count.size() != switch_levels) {
    throw Error({path, 0, "fabric.up"}, "down, up and link_count need one entry per switch level (" +
                                            std::to_string(switch_levels) + " in down)",
                "e.g. \"down\": [16, 8], \"up\": [1, 16], \"link_count\": [1, 1]");
  }
  long long leaves = 1;
  for (const auto* list : {&fabric.down, &fabric.up, &fabric.link_count}) {
    for (int value : *list) {
      if (value < 1) throw Error({path, 0, "fabric"}, "a count below 1 in down, up or link_count", "counts are >= 1");
    }
  }
  for (int down : fabric.down) leaves *= down;
  check_leaves(leaves, "down", "the fat tree's leaves, the product of down,");
}

}  // namespace

Cluster::Cluster(std::string name, std::string description, DeviceSpec device, std::vector<ClusterLevel> levels,
                 std::string source_path, Fabric fabric)
    : name_(std::move(name)),
      description_(std::move(description)),
      source_path_(std::move(source_path)),
      device_(std::move(device)),
      levels_(std::move(levels)),
      fabric_(std::move(fabric)) {
  if (levels_.empty()) {
    throw Error({source_path_, 0, "levels"}, "the cluster has no levels",
                "describe at least one level, e.g. the GPUs inside one server");
  }
  if (!(device_.speed > 0.0) || !std::isfinite(device_.speed)) {
    throw Error({source_path_, 0, "device.speed"}, "speed must be > 0", "1.0 means as fast as the profiled device");
  }
  if (device_.memory_bytes < 0.0 || !(device_.runtime_memory_bytes >= 0.0) || device_.peak_flops < 0.0 || device_.action_overhead_s < 0.0 ||
      device_.send_overhead_s < 0.0 || device_.recv_overhead_s < 0.0 || device_.shared_compute < 0.0 ||
      !(device_.all_reduce_overhead_s >= 0.0) || !(device_.all_reduce_s_per_byte >= 0.0) ||
      !(device_.message_cpu_s >= 0.0) || !(device_.message_cpu_s_per_byte >= 0.0)) {
    throw Error({source_path_, 0, "device"},
                "memory_bytes, runtime_memory_bytes, peak_flops, action_overhead_s, send_overhead_s, recv_overhead_s, shared_compute, "
                "all_reduce_overhead_s, all_reduce_s_per_byte, message_cpu_s and message_cpu_s_per_byte must be >= 0",
                "fix the device entry");
  }
  if (device_.cores < 0) {
    throw Error({source_path_, 0, "device.cores"}, "must be >= 0", "the cores of one machine, or 0 when not known");
  }
  if (!(device_.busy_wake_s >= 0.0) || !std::isfinite(device_.busy_wake_s)) {
    throw Error({source_path_, 0, "device.busy_wake_s"}, "must be a number >= 0",
                "seconds of CPU a wake-up on busy cores costs the machine, e.g. 0.002, or 0 for none");
  }
  if (!(device_.receive_wait_s >= 0.0) || !std::isfinite(device_.receive_wait_s)) {
    throw Error({source_path_, 0, "device.receive_wait_s"}, "must be a number >= 0",
                "seconds each receive that waits for its message loses, e.g. 0.0005, or 0 for none");
  }
  if (!(device_.matmul_efficiency > 0.0) || device_.matmul_efficiency > 1.0) {
    throw Error({source_path_, 0, "device.matmul_efficiency"}, "the GEMM efficiency must be in (0, 1]",
                "the share of peak_flops a large GEMM reaches, e.g. 0.6");
  }
  if (!(device_.matmul_half_dimension >= 0.0) || !std::isfinite(device_.matmul_half_dimension)) {
    throw Error({source_path_, 0, "device.matmul_half_dimension"}, "must be >= 0",
                "the GEMM dimension at which the rate halves, e.g. 64, or 0 for none");
  }
  for (std::size_t k = 0; k < device_.shared_compute_by_count.size(); ++k) {
    const double capacity = device_.shared_compute_by_count[k];
    if (!(capacity > 0.0) || !std::isfinite(capacity)) {
      throw Error({source_path_, 0, "device.shared_compute_by_count[" + std::to_string(k) + "]"}, "not a positive number",
                  "the machine's capacity in workers' worth when 1, 2, ... workers compute, e.g. [1, 1.6, 1.4]");
    }
  }
  double workers = 1.0;
  for (std::size_t l = 0; l < levels_.size(); ++l) {
    const std::string where = "levels[" + std::to_string(l) + "]";
    const ClusterLevel& level = levels_[l];
    if (level.count < 1) {
      throw Error({source_path_, 0, where + ".count"}, "count is " + std::to_string(level.count),
                  "each level groups at least one unit of the level below");
    }
    if (!(level.bandwidth_bytes_per_s > 0.0) || !std::isfinite(level.bandwidth_bytes_per_s)) {
      throw Error({source_path_, 0, where + ".bandwidth_bytes_per_s"},
                  "bandwidth must be a positive number of bytes per second",
                  "e.g. 1.25e9 for 10 Gb/s Ethernet, 12e9 for PCIe 3.0 x16");
    }
    if (level.latency_s < 0.0 || !std::isfinite(level.latency_s)) {
      throw Error({source_path_, 0, where + ".latency_s"}, "latency must be >= 0 seconds", "e.g. 5e-6");
    }
    workers *= level.count;
  }
  if (workers > 1e7) {
    throw Error({source_path_, 0, "levels"}, "more than 10 million workers", "check the level counts");
  }
  if (!device_.worker_speed_factors.empty() && device_.worker_speed_factors.size() != static_cast<std::size_t>(workers)) {
    throw Error({source_path_, 0, "device.worker_speed_factors"},
                std::to_string(device_.worker_speed_factors.size()) + " factors for " +
                    std::to_string(static_cast<long long>(workers)) + " workers",
                "give one factor per worker, or leave the field out");
  }
  for (double factor : device_.worker_speed_factors) {
    if (!(factor > 0.0) || !std::isfinite(factor)) {
      throw Error({source_path_, 0, "device.worker_speed_factors"}, "a factor is not > 0", "1.0 means the device's speed");
    }
  }
  if (fabric_.present()) check_fabric(fabric_, servers(), source_path_);
}

int Cluster::worker_count() const {
  int workers = 1;
  for (const ClusterLevel& level : levels_) workers *= level.count;
  return workers;
}

Cluster Cluster::first_workers(int workers) const {
  const std::string fix = "take a count that fills whole units of the inner levels, at most " +
                          std::to_string(worker_count());
  if (workers < 1 || workers > worker_count()) {
    throw Error({source_path_, 0, "--workers"},
                std::to_string(workers) + " workers asked, the cluster has " + std::to_string(worker_count()), fix);
  }
  if (fabric_.present()) {
    if (workers == worker_count()) return *this;
    throw Error({source_path_, 0, "--workers"},
                std::to_string(workers) + " of " + std::to_string(worker_count()) + " workers: the cluster's fabric describes all of them",
                "simulate all its workers, or a cluster file for the part (its own fabric, or none)");
  }
  std::vector<ClusterLevel> kept;
  int inner = 1;  // workers inside one unit of the current level
  for (const ClusterLevel& level : levels_) {
    if (workers <= inner * level.count) {
      if (workers % inner != 0) {
        throw Error({source_path_, 0, "--workers"},
                    std::to_string(workers) + " workers do not fill whole units of " + std::to_string(inner) +
                        " workers (level '" + kept.back().name + "')",
                    fix);
      }
      ClusterLevel partial = level;
      partial.count = workers / inner;
      kept.push_back(partial);
      break;
    }
    kept.push_back(level);
    inner *= level.count;
  }
  std::vector<ClusterLevel> without_ones;
  for (const ClusterLevel& level : kept) {
    if (level.count > 1) without_ones.push_back(level);
  }
  if (without_ones.empty()) without_ones.push_back(kept.front());  // a single worker: one level of 1
  DeviceSpec device = device_;
  if (!device.worker_speed_factors.empty()) device.worker_speed_factors.resize(workers);
  return Cluster(name_, description_, device, without_ones, source_path_);
}

nlohmann::json cluster_to_json(const Cluster& cluster) {
  nlohmann::json levels = nlohmann::json::array();
  for (const ClusterLevel& level : cluster.levels()) {
    levels.push_back({{"name", level.name},
                      {"count", level.count},
                      {"link", level.link},
                      {"bandwidth_bytes_per_s", level.bandwidth_bytes_per_s},
                      {"latency_s", level.latency_s}});
  }
  const DeviceSpec& device = cluster.device();
  nlohmann::json document = {{"format", "pipetwin.cluster/1"},
          {"name", cluster.name()},
          {"description", cluster.description()},
          {"device",
           {{"name", device.name},
            {"speed", device.speed},
            {"peak_flops", device.peak_flops},
            {"matmul_efficiency", device.matmul_efficiency},
            {"matmul_half_dimension", device.matmul_half_dimension},
            {"memory_bytes", device.memory_bytes},
            {"runtime_memory_bytes", device.runtime_memory_bytes},
            {"action_overhead_s", device.action_overhead_s},
            {"send_overhead_s", device.send_overhead_s},
            {"recv_overhead_s", device.recv_overhead_s},
            {"all_reduce_overhead_s", device.all_reduce_overhead_s},
            {"all_reduce_s_per_byte", device.all_reduce_s_per_byte},
            {"message_cpu_s", device.message_cpu_s},
            {"message_cpu_s_per_byte", device.message_cpu_s_per_byte},
            {"shared_compute", device.shared_compute},
            {"shared_compute_by_count", device.shared_compute_by_count},
            {"cores", device.cores},
            {"busy_wake_s", device.busy_wake_s},
            {"receive_wait_s", device.receive_wait_s},
            {"worker_speed_factors", device.worker_speed_factors}}},
          {"levels", std::move(levels)}};
  const Fabric& fabric = cluster.fabric();
  if (fabric.present()) {
    nlohmann::json& out = document["fabric"];
    out = {{"kind", fabric.kind}, {"bandwidth_bytes_per_s", fabric.bandwidth_bytes_per_s}, {"latency_s", fabric.latency_s}};
    if (fabric.kind == "torus") out["dimensions"] = fabric.dimensions;
    if (fabric.kind == "dragonfly") {
      out["groups"] = fabric.groups;
      out["chassis"] = fabric.chassis;
      out["routers"] = fabric.routers;
      out["nodes"] = fabric.nodes;
    }
    if (fabric.kind == "rail-optimized" && fabric.servers_per_leaf > 0) {
      out["servers_per_leaf"] = fabric.servers_per_leaf;
      out["spine_oversubscription"] = fabric.spine_oversubscription;
    }
    if (fabric.kind == "fat-tree") {
      out["down"] = fabric.down;
      out["up"] = fabric.up;
      out["link_count"] = fabric.link_count;
    }
  }
  return document;
}

namespace {

// An optional array of numbers of the device entry (empty when absent); throws Error naming the element.
std::vector<double> device_numbers(const nlohmann::json& device_json, const char* key, const std::string& path,
                                   const std::string& example) {
  std::vector<double> numbers;
  if (!device_json.contains(key)) return numbers;
  const std::string field = std::string("device.") + key;
  const nlohmann::json& values = device_json.at(key);
  if (!values.is_array()) throw Error({path, 0, field}, "expected an array of numbers", example);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!values[i].is_number()) throw Error({path, 0, field + "[" + std::to_string(i) + "]"}, "expected a number", example);
    numbers.push_back(values[i].get<double>());
  }
  return numbers;
}

// A level given by its oversubscription r instead of a bandwidth: the link from each unit of the level
// below up to this level's switch carries 1/r of what that unit's own members can send into it at once
// (the level below's count x its bandwidth): r = 1 is full bisection; a rack of 16 servers with
// 400 GB/s NICs and r = 2 has a 3.2 TB/s uplink.
double oversubscribed_bandwidth(const nlohmann::json& level, const std::vector<ClusterLevel>& inner,
                                const std::string& where, const std::string& path) {
  if (inner.empty()) {
    throw Error({path, 0, where + ".oversubscription"}, "the innermost level has no level below to be oversubscribed against",
                "give levels[0] a bandwidth_bytes_per_s");
  }
  if (level.contains("bandwidth_bytes_per_s")) {
    throw Error({path, 0, where + ".oversubscription"}, "both oversubscription and bandwidth_bytes_per_s are given",
                "keep one: the uplink's bandwidth, or its oversubscription against the links below");
  }
  const double ratio = json_fields::number(level, "oversubscription", where, path);
  if (!(ratio >= 1.0) || !std::isfinite(ratio)) {
    throw Error({path, 0, where + ".oversubscription"}, "oversubscription below 1",
                "1 is full bisection, 2 an uplink half as fast as the links below it together (a faster uplink: give bandwidth_bytes_per_s)");
  }
  return inner.back().count * inner.back().bandwidth_bytes_per_s / ratio;
}

Fabric fabric_from_json(const nlohmann::json& fabric_json, const std::string& path) {
  if (!fabric_json.is_object()) throw Error({path, 0, "fabric"}, "expected an object", "write \"fabric\": {\"kind\": \"fat-tree\", ...}");
  Fabric fabric;
  fabric.kind = json_fields::string(fabric_json, "kind", "fabric", path);
  const std::map<std::string, std::vector<std::string>> needed = {
      {"fat-tree", {"down", "up", "link_count"}}, {"torus", {"dimensions"}}, {"dragonfly", {"groups", "chassis", "routers"}}};
  for (auto [key, list] : {std::pair{"down", &fabric.down}, std::pair{"up", &fabric.up}, std::pair{"link_count", &fabric.link_count},
                           std::pair{"dimensions", &fabric.dimensions}, std::pair{"groups", &fabric.groups},
                           std::pair{"chassis", &fabric.chassis}, std::pair{"routers", &fabric.routers}}) {
    const auto kind = needed.find(fabric.kind);
    const bool required = kind != needed.end() && std::find(kind->second.begin(), kind->second.end(), key) != kind->second.end();
    if (!required && !fabric_json.contains(key)) continue;
    const nlohmann::json& values = json_fields::require(fabric_json, key, "fabric", path);
    if (!values.is_array()) throw Error({path, 0, std::string("fabric.") + key}, "expected an array of counts", "e.g. [16, 8]");
    for (const auto& value : values) {
      if (!value.is_number_integer() || value.get<long long>() > 1'000'000) {
        throw Error({path, 0, std::string("fabric.") + key}, "expected whole numbers up to 1000000", "e.g. [16, 8]");
      }
      list->push_back(static_cast<int>(value.get<long long>()));
    }
  }
  if (fabric.kind == "dragonfly") {
    const nlohmann::json& nodes = json_fields::require(fabric_json, "nodes", "fabric", path);
    if (!nodes.is_number_integer() || nodes.get<long long>() < 1 || nodes.get<long long>() > 1'000'000) {
      throw Error({path, 0, "fabric.nodes"}, "expected a whole number of servers per router, 1 to 1000000", "e.g. \"nodes\": 2");
    }
    fabric.nodes = static_cast<int>(nodes.get<long long>());
  }
  if (fabric.kind == "rail-optimized") {
    fabric.servers_per_leaf = json_fields::small_integer_or(fabric_json, "servers_per_leaf", 0, "fabric", path);
    fabric.spine_oversubscription = json_fields::number_or(fabric_json, "spine_oversubscription", 1.0, "fabric", path);
  }
  fabric.bandwidth_bytes_per_s = json_fields::number(fabric_json, "bandwidth_bytes_per_s", "fabric", path);
  fabric.latency_s = json_fields::number_or(fabric_json, "latency_s", 0.0, "fabric", path);
  return fabric;
}

}  // namespace

Cluster cluster_from_json(const nlohmann::json& document, const std::string& path) {
  json_fields::expect_format(document, "pipetwin.cluster/1", path);
  const nlohmann::json& device_json = json_fields::require(document, "device", "", path);
  DeviceSpec device;
  device.name = json_fields::string_or(device_json, "name", "device", "device", path);
  device.speed = json_fields::number_or(device_json, "speed", 1.0, "device", path);
  device.peak_flops = json_fields::number_or(device_json, "peak_flops", 0.0, "device", path);
  device.matmul_efficiency = json_fields::number_or(device_json, "matmul_efficiency", 0.5, "device", path);
  device.matmul_half_dimension = json_fields::number_or(device_json, "matmul_half_dimension", 0.0, "device", path);
  device.memory_bytes = json_fields::number(device_json, "memory_bytes", "device", path);
  device.runtime_memory_bytes = json_fields::number_or(device_json, "runtime_memory_bytes", 0.0, "device", path);
  device.action_overhead_s = json_fields::number_or(device_json, "action_overhead_s", 0.0, "device", path);
  device.send_overhead_s = json_fields::number_or(device_json, "send_overhead_s", 0.0, "device", path);
  device.recv_overhead_s = json_fields::number_or(device_json, "recv_overhead_s", 0.0, "device", path);
  device.all_reduce_overhead_s = json_fields::number_or(device_json, "all_reduce_overhead_s", 0.0, "device", path);
  device.all_reduce_s_per_byte = json_fields::number_or(device_json, "all_reduce_s_per_byte", 0.0, "device", path);
  device.message_cpu_s = json_fields::number_or(device_json, "message_cpu_s", 0.0, "device", path);
  device.message_cpu_s_per_byte = json_fields::number_or(device_json, "message_cpu_s_per_byte", 0.0, "device", path);
  device.shared_compute = json_fields::number_or(device_json, "shared_compute", 0.0, "device", path);
  device.shared_compute_by_count = device_numbers(device_json, "shared_compute_by_count", path, "e.g. [1, 1.6, 1.4]");
  device.cores = json_fields::small_integer_or(device_json, "cores", 0, "device", path);
  device.busy_wake_s = json_fields::number_or(device_json, "busy_wake_s", 0.0, "device", path);
  device.receive_wait_s = json_fields::number_or(device_json, "receive_wait_s", 0.0, "device", path);
  device.worker_speed_factors = device_numbers(device_json, "worker_speed_factors", path, "e.g. [1.0, 0.8]");
  const nlohmann::json& level_list = json_fields::require(document, "levels", "", path);
  if (!level_list.is_array()) throw Error({path, 0, "levels"}, "expected an array", "write \"levels\": [...]");
  std::vector<ClusterLevel> levels;
  for (std::size_t l = 0; l < level_list.size(); ++l) {
    const std::string where = "levels[" + std::to_string(l) + "]";
    ClusterLevel level;
    level.name = json_fields::string_or(level_list[l], "name", "level" + std::to_string(l), where, path);
    const long long count = json_fields::integer(level_list[l], "count", where, path);
    if (count < 1 || count > 1'000'000) {
      throw Error({path, 0, where + ".count"}, "count " + std::to_string(count) + " is out of range",
                  "a level groups between 1 and 1000000 units");
    }
    level.count = static_cast<int>(count);
    level.link = json_fields::string_or(level_list[l], "link", "", where, path);
    level.bandwidth_bytes_per_s = level_list[l].is_object() && level_list[l].contains("oversubscription")
                                      ? oversubscribed_bandwidth(level_list[l], levels, where, path)
                                      : json_fields::number(level_list[l], "bandwidth_bytes_per_s", where, path);
    level.latency_s = json_fields::number_or(level_list[l], "latency_s", 0.0, where, path);
    levels.push_back(level);
  }
  return Cluster(json_fields::string_or(document, "name", "cluster", "", path),
                 json_fields::string_or(document, "description", "", "", path), device, levels, path,
                 document.contains("fabric") ? fabric_from_json(document.at("fabric"), path) : Fabric{});
}

Cluster load_cluster(const std::string& path) { return cluster_from_json(json_fields::read_file(path), path); }

}  // namespace pipetwin
