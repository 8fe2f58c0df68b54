// Simulation — runs a built schedule (planner/schedule_builder.h) on a SimGrid model of the cluster
// and records the trace.
//
// One S4U actor per worker (a plain function) runs the one interpreter (planner/schedule_interpreter.h)
// over its list of the built schedule (planner/schedule_builder.h): before each action it spends the device's
// action_overhead_s (the runtime's own time, 0 unless calibrated), and before a send's transfer starts
// the device's send_overhead_s (posting it), and a receive whose message had already arrived takes
// the device's recv_overhead_s, one that waited for its message loses its receive_wait_s once it is
// there (all 0 unless calibrated; on a machine whose workers share compute and outnumber its cores
// the runtime's time is CPU there, beside their computing, DeviceSpec); compute takes the stage's
// profiled time (or FLOPs over the device's peak) scaled by the host's speed; SEND as an eager
// asynchronous transfer through the message's own mailbox, so transfers sharing a link share its
// bandwidth; RECV as a blocking get of its message id; ALLREDUCE as a ring of 2(n-1) point-to-point steps of bytes/n among the stage's
// replicas (or hierarchical: ring inside each outermost unit, ring across units, ring inside again;
// or tree: NCCL's double binary tree, reduce up and broadcast down two mirrored trees of half the bytes).
// With tensor parallelism (a worker of t GPUs, shape.tensor_parallel(): tensor_parallel_gpus) every rank
// sends its own share to the same rank of the peer at once, the data-parallel rings run once per rank,
// and a TENSOR_ALLREDUCE is a ring among the worker's GPUs (tensor_sums below).
// Every iteration is in the built schedule. The simulation is deterministic: the same inputs give
// the same trace.
//
// SimGrid's engine can run once per process: simulate() is for a process that runs one simulation
// (the CLI); simulate_in_subprocess() forks, so tests and sweeps can run many.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "planner/cluster.h"
#include "planner/plan.h"
#include "planner/schedule.h"
#include "planner/schedule_builder.h"
#include "planner/schedule_evaluator.h"
#include "planner/schedule_validator.h"
#include "traces/trace.h"

namespace pipetwin::sim {

struct SimulationConfig {
  Plan plan;
  Cluster cluster;
  std::string schedule_name;      // one of schedule_names() (planner/schedule_generators.h)
  int microbatches = 8;
  int chunks = 1;
  int iterations = 3;
  int warmup_iterations = 1;      // excluded from the reported iteration time
  std::string all_reduce = "ring";  // or "hierarchical", or "tree" (NCCL's double binary tree)
  // How a ring phase of a collective is simulated: "bulk", one flow per ring edge carrying all its
  // steps' bytes at once, each edge's latency paid once per step, the members leaving together;
  // or "step", every step a transfer of its own (2(n-1) rounds of n transfers: cost grows with n^2).
  std::string collective_model = "bulk";
  // How a tensor-parallel worker's sums (TENSOR_ALLREDUCE) are simulated: "links", rings among its t GPUs
  // on the platform's links (one flow per ring edge, every sum's latencies added), sharing them with the
  // pipeline's and data-parallel traffic; or "paper", the profile's time for them, no flows (faster at
  // thousands of GPUs: bench/README.md).
  std::string tensor_sums = "links";
  std::string platform_xml_path;  // a user's SimGrid XML instead of the cluster's levels
  std::string compute_model = "profile";  // "profile": profiled times; "flops": FLOPs / device peak
  std::vector<StageTimes> stage_times;  // per stage; empty: from the plan (and compute_model)
  std::string profile_name;
  std::string schedule_csv_path;  // a schedule CSV (`pipetwin schedule -o`, perhaps edited) simulated as it
                                  // is: nothing is generated; its own name, counts and chunks apply
  bool ignore_memory = false;     // simulate a plan even when a worker needs more than the device's memory
};

struct LinkUse {
  std::string name;
  double bytes = 0.0;
  double bandwidth_bytes_per_s = 0.0;
  double utilisation = 0.0;  // bytes / (bandwidth x simulated time)
};

struct SimulationSummary {
  double iteration_s = 0.0;          // mean over the measured iterations
  double samples_per_s = 0.0;
  double makespan_s = 0.0;
  std::vector<double> bubble_fraction;  // per worker, over the measured iterations
  std::vector<double> peak_memory_bytes;  // per worker: in-flight activations, weight versions, optimizer state
  LinkUse busiest_link;
  long long actions = 0;              // actions executed by all workers
  long long messages = 0;             // point-to-point transfers simulated (all-reduce steps included)
};

struct SimulationResult {
  Trace trace;
  SimulationSummary summary;
};

// Builds the schedule the configuration names (or loads schedule_csv_path) with build_schedule: throws
// Error on any fault, a deadlock included, before anything is simulated. Unless ignore_memory, a
// worker that needs more than the device's memory makes the plan infeasible: the Error names the
// cluster file, the worker, its stage and the numbers. The report's memory is the one computation
// the summary shows.
BuiltSchedule prepare_schedule(const SimulationConfig& config);

// The stage times a simulation uses, in seconds on the profiled device (hosts divide by their speed).
// "flops": forward = FLOPs / peak, backward = 2 x forward (split half and half), so that on a host of
// the cluster's speed they take FLOPs / peak. Throws Error when FLOPs or the peak are unknown.
std::vector<StageTimes> simulation_stage_times(const SimulationConfig& config);

// The GPUs of a cluster for a plan of `ranks`-way tensor parallelism: a cluster of tensor-parallel groups
// (tensor_parallel_groups, named "<cluster>-tp<ranks>", as `pipetwin model --tp` and `search` write
// them) taken apart again, its innermost count times `ranks`; any other cluster is taken as the GPUs.
Cluster tensor_parallel_gpus(const Cluster& cluster, int ranks);

SimulationResult simulate(const SimulationConfig& config);  // prepare_schedule, then simulate_prepared
// Simulates a schedule prepare_schedule returned for this configuration (no second check).
SimulationResult simulate_prepared(const SimulationConfig& config, const BuiltSchedule& built);
SimulationResult simulate_in_subprocess(const SimulationConfig& config);

std::string summary_text(const SimulationConfig& config, const SimulationResult& result);

}  // namespace pipetwin::sim
