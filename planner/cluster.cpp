#include "planner/cluster.h"

#include <cmath>

#include "planner/error.h"
#include "planner/json_fields.h"

namespace pipetwin {

Cluster::Cluster(std::string name, std::string description, DeviceSpec device, std::vector<ClusterLevel> levels,
                 std::string source_path)
    : name_(std::move(name)),
      description_(std::move(description)),
      source_path_(std::move(source_path)),
      device_(std::move(device)),
      levels_(std::move(levels)) {
  if (levels_.empty()) {
    throw Error({source_path_, 0, "levels"}, "the cluster has no levels",
                "describe at least one level, e.g. the GPUs inside one server");
  }
  if (!(device_.speed > 0.0) || !std::isfinite(device_.speed)) {
    throw Error({source_path_, 0, "device.speed"}, "speed must be > 0", "1.0 means as fast as the profiled device");
  }
  if (device_.memory_bytes < 0.0 || device_.peak_flops < 0.0 || device_.action_overhead_s < 0.0 ||
      device_.send_overhead_s < 0.0 || device_.recv_overhead_s < 0.0 || device_.shared_compute < 0.0) {
    throw Error({source_path_, 0, "device"},
                "memory_bytes, peak_flops, action_overhead_s, send_overhead_s, recv_overhead_s and shared_compute must be >= 0",
                "fix the device entry");
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
  return {{"format", "pipetwin.cluster/1"},
          {"name", cluster.name()},
          {"description", cluster.description()},
          {"device",
           {{"name", device.name},
            {"speed", device.speed},
            {"peak_flops", device.peak_flops},
            {"memory_bytes", device.memory_bytes},
            {"action_overhead_s", device.action_overhead_s},
            {"send_overhead_s", device.send_overhead_s},
            {"recv_overhead_s", device.recv_overhead_s},
            {"shared_compute", device.shared_compute},
            {"shared_compute_by_count", device.shared_compute_by_count},
            {"worker_speed_factors", device.worker_speed_factors}}},
          {"levels", std::move(levels)}};
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

}  // namespace

Cluster cluster_from_json(const nlohmann::json& document, const std::string& path) {
  json_fields::expect_format(document, "pipetwin.cluster/1", path);
  const nlohmann::json& device_json = json_fields::require(document, "device", "", path);
  DeviceSpec device;
  device.name = json_fields::string_or(device_json, "name", "device", "device", path);
  device.speed = json_fields::number_or(device_json, "speed", 1.0, "device", path);
  device.peak_flops = json_fields::number_or(device_json, "peak_flops", 0.0, "device", path);
  device.memory_bytes = json_fields::number(device_json, "memory_bytes", "device", path);
  device.action_overhead_s = json_fields::number_or(device_json, "action_overhead_s", 0.0, "device", path);
  device.send_overhead_s = json_fields::number_or(device_json, "send_overhead_s", 0.0, "device", path);
  device.recv_overhead_s = json_fields::number_or(device_json, "recv_overhead_s", 0.0, "device", path);
  device.shared_compute = json_fields::number_or(device_json, "shared_compute", 0.0, "device", path);
  device.shared_compute_by_count = device_numbers(device_json, "shared_compute_by_count", path, "e.g. [1, 1.6, 1.4]");
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
    level.bandwidth_bytes_per_s = json_fields::number(level_list[l], "bandwidth_bytes_per_s", where, path);
    level.latency_s = json_fields::number_or(level_list[l], "latency_s", 0.0, where, path);
    levels.push_back(level);
  }
  return Cluster(json_fields::string_or(document, "name", "cluster", "", path),
                 json_fields::string_or(document, "description", "", "", path), device, levels, path);
}

Cluster load_cluster(const std::string& path) { return cluster_from_json(json_fields::read_file(path), path); }

}  // namespace pipetwin
