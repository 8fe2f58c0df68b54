// Calibration — fits the figures a simulation depends on to a measured trace's own events, those of
// its typical iterations: past the warm-up, the middle half by length (the figure compared is the
// median iteration time, so neither the warm-up's first-touch costs nor a stalled iteration count):
//  - compute scale k: the mean measured duration of each (stage, kind) against the plan's stage
//    time, least squares through the origin (the device runs k times slower than the profile said);
//    means, not medians: an iteration is a sum of durations, so the occasional slow one counts;
//  - send overhead: the mean duration of a SEND event, the time the sender is busy posting it, over the
//    sends that crossed none; a send crossed one when a send from its peer to its worker was being
//    posted meanwhile (their events overlap). Gloo stalls both senders of a crossing pair for about
//    2 ms of a spinning core here (bench/README.md); what crossing sends took more on average is
//    reported, not simulated: their stall counts as CPU with the message CPU below;
//  - receive overhead: the mean duration of a receive that began after its message had arrived (by
//    the fitted transfer time below): the receiver's own cost of taking a delivered message;
//  - per-message overhead and bandwidth: for every transfer whose receiver was already waiting, the
//    time from the send's end to the receive's end, fitted as overhead + bytes / bandwidth
//    (ordinary least squares; with a single message size only the overhead is fitted).
//  - action overhead: on each worker, the time between the end of one event and the start of the
//    next (time no action covers: the runtime's own), over the number of actions.
//  - runtime memory: where the trace records each worker's peak memory, the median over the workers of
//    measured peak - what the memory model gives its stages under the trace's schedule.
//  - message CPU: where the trace records each worker process's CPU over the measured iterations and
//    its compute actions' within it, the rest summed over the workers, less the runtime's own time the
//    simulator already spends as CPU (action, send and receive overheads), over the messages sent
//    (crossing sends' stalls included):
//    what a message costs the machine inside the run (calibrated_network scales the probe's line
//    message_cpu_s + bytes x message_cpu_s_per_byte to it at the run's mean message size).
// Compute scales are fitted for all workers together and for each worker (co-located processes slow
// each other unequally; the rms error is of the per-worker fit), against the profiled stage times
// re-split between forward and backward in each stage's measured proportion (calibrated_plan).
// With a probed link (`probe --messages`, with_probed_link) the bandwidth is the probe's, measured
// over 1 KB .. 64 MB, and the trace fits only the per-message overhead against it (LinkTerms::kOverheadOnly):
// a pipeline run sends one or two sizes, too few to tell bandwidth from overhead.
// calibrated_cluster() writes them into a cluster spec: device speed 1/k, each worker's speed factor
// k / k_worker (so the worker runs at 1 / k_worker), the device's action, send
// and receive overheads, every level's latency the message overhead and bandwidth the fitted one (one machine's
// loopback: a single figure).
#pragma once

#include "planner/cluster.h"
#include "planner/plan.h"
#include "planner/stage_times.h"
#include "traces/link_fit.h"
#include "traces/trace.h"

namespace pipetwin {

struct Calibration {
  double compute_scale = 1.0;
  std::vector<double> worker_compute_scale;  // per worker of the trace (0: no compute events)
  std::vector<double> stage_forward_fraction;  // per plan stage: measured forward / (forward + backward); -1: not measured
  std::vector<double> stage_optimizer_s;  // per plan stage: one optimizer step at speed 1 (measured / worker scale); 0: none
  double message_overhead_s = 0.0;
  double bandwidth_bytes_per_s = 0.0;  // 0: not fitted (kept from the cluster)
  double action_overhead_s = 0.0;
  double send_overhead_s = 0.0;
  int send_samples = 0;
  double send_crossing_s = 0.0;   // what a send that crossed one the other way took more (0: none crossed)
  int send_crossing_samples = 0;  // of send_samples, those that crossed
  double recv_overhead_s = 0.0;
  int recv_samples = 0;
  int compute_samples = 0;
  int transfer_samples = 0;
  double compute_rms_relative_error = 0.0;   // of the fitted compute model
  double transfer_rms_error_s = 0.0;         // of the fitted transfer model
  // What each worker process held beside its stages (fit_runtime_memory_bytes over the trace's workers,
  // the stages' bytes from the memory model of the trace's schedule); -1: not fitted (the trace has no
  // measured peak per worker, or its schedule cannot be rebuilt from its header).
  double runtime_memory_bytes = -1.0;
  double message_cpu_s = 0.0;      // a message's CPU inside the run, at the run's mean message size
  double message_cpu_bytes = 0.0;  // that mean size
  int message_cpu_samples = 0;     // messages it is over (0: the trace records no CPU)
};

// Throws Error, naming both, when the trace is of a run of another model or another number of stages.
void check_trace_matches_plan(const Trace& measured, const Plan& plan);
// The events of the iterations calibrate() uses (all of them when none is past the warm-up).
Trace typical_iterations(const Trace& measured);
enum class LinkTerms {
  kOverheadAndBandwidth,  // fit both where the transfers have two sizes or more
  kOverheadOnly,          // keep the cluster's bandwidth (a probed one), fit the overhead against it
};
// Throws Error when the trace is of another model or another number of stages than the plan (naming
// both), or has no compute events for the plan's stages.
Calibration calibrate(const Trace& measured, const Plan& plan, const Cluster& cluster,
                      LinkTerms link_terms = LinkTerms::kOverheadAndBandwidth);
// The cluster with every level's (and the fabric's) bandwidth the probed one, the device's send and
// receive overheads the probed ones (where measured), and latency the probed one-way latency less the
// send overhead, not below 0 (the simulator adds it to each message; in a ping-pong the receiver is
// waiting, so no receive overhead is in the one-way time).
Cluster with_probed_link(const Cluster& cluster, const LinkFit& link);
// The cluster whose device's all-reduces cost `overhead` beyond the ring (probe --all-reduce).
Cluster with_all_reduce_overhead(const Cluster& cluster, const AllReduceOverhead& overhead);
// The cluster with what a probe file (pipetwin.probe/1) measured: its link (with_probed_link) and,
// where it timed all-reduces, their cost beyond the ring. Throws Error naming `path` and the field
// when it timed no messages (probed_link).
Cluster with_probe(const Cluster& cluster, const nlohmann::json& probe, const std::string& path);
// The plan with each stage's forward + backward time re-split in the measured proportion (a profile
// taken layer by layer on an idle machine can put time on the wrong side; totals are kept) and each
// stage's measured optimizer step (a profile has none).
Plan calibrated_plan(const Plan& plan, const Calibration& calibration);
Cluster calibrated_cluster(const Cluster& cluster, const Calibration& calibration);
// calibrated_cluster() with the fitted compute scale k in the device's GEMM efficiency instead of its
// speed: matmul_efficiency / k, speed as the cluster's (`calibrate --fit-efficiency`). For profiles
// `pipetwin model` writes, whose times are GEMM FLOPs over peak x efficiency (x a shape factor): the
// profile written again from this cluster runs k times slower, the efficiency fitted. Exact where a
// layer's time is all GEMMs; tensor-parallel all-reduces folded into the layers' times are counted as
// GEMM time. Throws Error when the device has no peak_flops or the fitted efficiency exceeds 1.
Cluster calibrated_efficiency_cluster(const Cluster& cluster, const Calibration& calibration);
// The cluster with the calibrated overheads and links only, compute left at the cluster's speed: for a
// profile that carries the compute corrections itself (layer_calibration.h).
Cluster calibrated_network(const Cluster& cluster, const Calibration& calibration);

// The peak memory of each worker a measured trace records (header extra "peak_memory_bytes"; -1 where
// unknown); empty when it records none.
std::vector<double> measured_peak_bytes(const Trace& measured);

// The cores the run's worker processes had between them (header "cores", which `pipetwin run`
// records); 0 where the trace records none or one that is not a positive count (traces from before it).
int recorded_cores(const Trace& measured);

// The CPU a measured run's compute actions used in its measured iterations (header "compute_cpu_s",
// summed over the workers: forward, backward, recompute and optimizer steps) over the work `times`
// charges those same actions (their seconds, as a worker alone spends them: the calibrated stages').
// 1 where the run computed as the calibration measured; above 1 where the same work cost more CPU (a
// slower spell of the machine, caches and memory shared with more processes): the twin charges `times`,
// so its prediction of such a run leans fast. -1 where the trace records no compute CPU for every
// worker (traces from before it, tensor-parallel runs record one per rank) or its actions no work.
double compute_cpu_per_work(const Trace& measured, const std::vector<StageTimes>& times);

// Per worker, the share of its compute actions' wall time in the measured iterations (forward,
// backward, recompute, optimizer steps) that its thread ran on a core: header "compute_cpu_s" over
// that time. Near 1 where each worker had a core to itself; lower where other processes took the cores
// (three workers on two cores: 0.6-0.85 here) and the run's timings include waiting for one. Empty
// where the trace records no compute CPU for every worker; -1 for a worker with no figure or no compute.
std::vector<double> compute_core_share(const Trace& measured);

// What each worker process holds beside its stages (device.runtime_memory_bytes): the median over the
// workers of every measured run of (measured peak - what the memory model gives its stages,
// WorkerMemory::stage_bytes), at least 0; a measured peak below 0 (unknown) is left out; 0 when none.
// `measured_peaks`: per run, per worker.
double fit_runtime_memory_bytes(const std::vector<double>& stage_bytes, const std::vector<std::vector<double>>& measured_peaks);

}  // namespace pipetwin
