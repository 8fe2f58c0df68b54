// Cluster — the devices a plan runs on and the links between them, as a hierarchy of levels.
//
// Level 0 is the innermost (GPUs inside one server, over NVLink/PCIe); each further level groups
// `count` units of the level below (servers in a rack, racks in a pod). Workers are numbered
// innermost-first: worker w sits at position w % c0 inside its server, server (w / c0) % c1, ...
// Bandwidths are bytes per second per unit of that level; latencies are seconds. In a file, a level
// above the innermost may give "oversubscription" r >= 1 instead of a bandwidth: the link of each unit
// below into this level's switch then carries (the level below's count x its bandwidth) / r, e.g. a
// server of 8 GPUs on 450 GB/s NVLink with r = 9 has a 400 GB/s NIC (the reader resolves it).
// Readers throw pipetwin::Error naming the file and field ("levels[1].bandwidth_bytes_per_s").
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace pipetwin {

struct DeviceSpec {
  std::string name;            // e.g. "V100-16GB"
  double speed = 1.0;          // compute speed relative to the device the profile was taken on
  double peak_flops = 0.0;     // peak FLOP/s, 0 when unknown
  double memory_bytes = 0.0;   // device memory
  double action_overhead_s = 0.0;  // runtime time a worker spends between two actions (calibrated)
  double send_overhead_s = 0.0;    // time a worker is busy posting one send before it moves on (calibrated)
  double recv_overhead_s = 0.0;    // time a receive takes when its message has already arrived (calibrated)
  // What the runtime's all-reduce takes beyond the ring on the links, per all-reduce and per byte
  // (probe --all-reduce: Gloo on CPU sums on the CPU and hands each call to its own thread).
  double all_reduce_overhead_s = 0.0;
  double all_reduce_s_per_byte = 0.0;
  // The CPU a point-to-point message costs its machine, both ends and every thread (the transport's
  // threads, the kernel's copies over loopback), fixed and per byte (probe --messages; calibrate scales
  // that line to what a run's workers recorded). Where the machine's workers share its compute, the
  // simulator runs it there beside their computing.
  double message_cpu_s = 0.0;
  double message_cpu_s_per_byte = 0.0;
  // > 0: the workers of one machine (a unit of the innermost level) share one compute resource worth
  // this many workers at `speed`: each computes at most at its own speed, and when their sum would
  // exceed it they get shares in proportion to their stages' compute_share (co-located CPU processes,
  // cores that share memory bandwidth). 0: every worker has its own device (calibrated, validate --matrix).
  double shared_compute = 0.0;
  // When given: the machine's capacity (workers' worth) by how many of its workers compute at once,
  // k = 1, 2, ... (the last for more), instead of shared_compute (probe.h: three processes on two
  // cores share less than two).
  std::vector<double> shared_compute_by_count;
  bool shares_compute() const { return shared_compute > 0.0 || !shared_compute_by_count.empty(); }
  // Where the workers share compute: the machine's cores (0: not known), and the CPU a worker's wake-up
  // costs the machine when its message arrives while every core is held by another worker's compute
  // (more worker processes than cores: it waits for a core, the switches and a core left idle between
  // them are lost to everyone). The simulator runs it on the machine before the worker goes on; 0: none
  // (validate --matrix, bench/README.md). Where the machine has a core for each of its worker processes
  // (cores >= its workers), the runtime's own time and a message's CPU do not take compute from the
  // other workers (on this 2-core machine two workers' overlapped compute runs as fast as alone); with
  // more processes than cores, or cores unknown, the simulator runs them on the machine beside it.
  int cores = 0;
  double busy_wake_s = 0.0;
  // What each receive that waits for its message loses once the message is there: a twin of mean
  // durations has none of the waits the runs' varying durations cause, each receive that waits on a
  // slower-than-mean sender absorbing its lateness (validate --matrix fits it so that each base run's
  // calibration predicts that run, traces/receive_wait_fit.h; 0: none).
  double receive_wait_s = 0.0;
  std::vector<double> worker_speed_factors;  // per worker, multiplies speed (calibrated: co-located
                                             // workers slow each other down unequally); empty = all 1
  double matmul_efficiency = 0.5;      // share of the peak a large GEMM reaches (transformer_model.h GemmRate)
  double matmul_half_dimension = 0.0;  // GEMM dimension at which the rate halves (0: shape-independent)
  double runtime_memory_bytes = 0.0;   // what each worker process holds beside its stages (the runtime's and
                                       // libraries' own memory, receive buffers; calibrated, validate --matrix)

  double worker_speed(int worker) const {
    return worker < static_cast<int>(worker_speed_factors.size()) ? speed * worker_speed_factors[worker] : speed;
  }
};

struct ClusterLevel {
  std::string name;               // e.g. "server"
  int count = 1;                  // units of the level below grouped at this level
  std::string link;               // e.g. "NVLink", "PCIe", "10GbE"
  double bandwidth_bytes_per_s = 0.0;
  double latency_s = 0.0;
};

// The switches and links above the servers (the units of levels[0]) as a topology SimGrid builds
// itself, for the simulator; the planner keeps reading the levels (their bandwidths as its view of
// the same network). kind "fat-tree": SimGrid's FAT_TREE with `down.size()` switch levels: switches
// of level i have down[i] children and up[i] parents, joined by link_count[i] parallel links, every
// link at bandwidth_bytes_per_s and latency_s; its leaves (the product of down) are the servers.
// kind "rail-optimized": every GPU has its own NIC (bandwidth_bytes_per_s, latency_s) to the switch
// of its rail (GPU r of every server on rail r). GPUs of one server talk over levels[0]; of one rail,
// through the rail's switch; across rails and servers, over NVLink to the GPU of the destination's
// rail, then through its NIC (NCCL's PXN): routes are shortest paths, and no spine is modelled.
// kind "torus": SimGrid's TORUS, the servers on a torus of `dimensions` (their product is the servers),
// each joined to its two neighbours in every dimension by one link. kind "dragonfly": SimGrid's
// DRAGONFLY, `groups`, `chassis` per group and `routers` per chassis, each as [count, links between
// two of them], and `nodes` servers per router (groups x chassis x routers x nodes = the servers).
struct Fabric {
  std::string kind;  // empty: none (the levels' tree of switches)
  std::vector<int> down, up, link_count;  // fat-tree
  std::vector<int> dimensions;            // torus
  std::vector<int> groups, chassis, routers;  // dragonfly: [count, links]
  int nodes = 0;                              // dragonfly: servers per router
  int servers_per_leaf = 0;        // rail-optimized: servers under one leaf switch per rail, leaves joined
                                   // by a spine per rail (0: one switch per rail for all servers)
  double spine_oversubscription = 1.0;  // rail-optimized with leaves: a leaf's NICs' bandwidth over its uplink's
  double bandwidth_bytes_per_s = 0.0;
  double latency_s = 0.0;
  bool present() const { return !kind.empty(); }
};

class Cluster {
 public:
  Cluster(std::string name, std::string description, DeviceSpec device, std::vector<ClusterLevel> levels,
          std::string source_path = "", Fabric fabric = {});

  const std::string& name() const { return name_; }
  const std::string& description() const { return description_; }
  const std::string& source_path() const { return source_path_; }
  const DeviceSpec& device() const { return device_; }
  const std::vector<ClusterLevel>& levels() const { return levels_; }  // innermost first
  const Fabric& fabric() const { return fabric_; }
  int servers() const { return worker_count() / levels_.front().count; }  // units of levels[0]
  int worker_count() const;

  // The cluster made of the first `workers` workers: whole units of the inner levels plus a part of
  // the next one (8 workers of 2 servers x 8 GPUs is one server: one level). Levels of count 1 are
  // dropped. Throws Error when `workers` does not fill whole units below the level it ends in, or
  // when the cluster has a fabric (it describes the whole cluster) and `workers` is not all of them.
  Cluster first_workers(int workers) const;
  // The same cluster with another device (calibrated or probed figures); checked as any cluster.
  Cluster with_device(DeviceSpec device) const {
    return Cluster(name_, description_, std::move(device), levels_, source_path_, fabric_);
  }

 private:
  std::string name_;
  std::string description_;
  std::string source_path_;
  DeviceSpec device_;
  std::vector<ClusterLevel> levels_;
  Fabric fabric_;
};

nlohmann::json cluster_to_json(const Cluster& cluster);
Cluster cluster_from_json(const nlohmann::json& document, const std::string& path);
Cluster load_cluster(const std::string& path);

}  // namespace pipetwin
