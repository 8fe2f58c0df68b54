// Probe — how this machine's compute is shared when k worker processes train at once, measured
// through the runtime `run` uses (same allocator, threads and core placement: process_setup.h).
// For k = 1 … max_processes, k processes each train the zoo model (forward, loss, backward of one
// microbatch, over and over) from a common start for `seconds`; each reports its iterations per
// second. machine_throughput[k-1] is the sum of the k rates over the rate of one process alone: 2 on
// two idle cores with no shared bottleneck, less when they share memory bandwidth or a core. Every
// count is measured twice (1 … max, then 1 … max again) and the faster of its two takes kept: another
// job on a shared machine slows a measurement, never speeds it up. On CPU the probe then checks its
// figures (implausible_counts) and takes a count that looks slowed up to twice more; one still
// implausible is kept with a warning line, as it is the only figure there is.
// The simulator takes the machine's capacity by number of computing workers from it (validate
// --matrix scales the capacity fitted on the calibration run by it). Throws pipetwin::Error.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace pipetwin::exec {

struct ProbeOptions {
  std::string model = "mlp";
  int batch = 32;
  int max_processes = 3;
  double seconds = 2.0;  // measured per process count, after each process's warm-up
  std::string device = "cpu";  // or "cuda": process k on GPU k mod the GPUs, as the workers
};

struct ComputeProbe {
  std::string model;
  int batch = 0;
  std::vector<double> process_rate;        // per k: mean iterations per second of one process
  std::vector<double> machine_throughput;  // per k: sum of the k processes' rates / the rate of one alone
};

// The process counts (from 1) whose take looks slowed by something else on the machine, given the
// machine throughput by count and the cores the processes may use:
//  - 1, when some k processes did more than min(k, cores) ones' worth (by over 15%): one process
//    alone was measured slow, and every ratio over it is too high (GPT read 2.7 on two cores);
//  - k > 1, when k processes did under 85% of what k - 1 did: another process on a machine with
//    cores to spare (or time-sliced past them) leaves the total near where it was; VGG-16's three
//    processes read 1.19 and 1.55 where two gave 1.93 and 1.88, and the predictions of its
//    3-worker configurations came out 25-47% slow (bench/README.md).
// Empty when nothing looks wrong.
std::vector<int> implausible_counts(const std::vector<double>& machine_throughput, int cores);

ComputeProbe probe_shared_compute(const ProbeOptions& options, const std::function<void(const std::string&)>& report);

nlohmann::json probe_to_json(const ComputeProbe& probe);
// Throws Error naming the file and field.
ComputeProbe probe_from_json(const nlohmann::json& document, const std::string& path);

}  // namespace pipetwin::exec
