// Probe — how this machine's compute is shared when k worker processes train at once, measured
// through the runtime `run` uses (same allocator, threads and core placement: process_setup.h).
// For k = 1 … max_processes, k processes each train the zoo model (forward, loss, backward of one
// microbatch, over and over) from a common start for `seconds`; each reports its iterations per
// second. machine_throughput[k-1] is the sum of the k rates over the rate of one process alone: 2 on
// two idle cores with no shared bottleneck, less when they share memory bandwidth or a core. Every
// count is measured twice (1 … max, then 1 … max again) and the faster of its two takes kept: another
// job on a shared machine slows a measurement, never speeds it up.
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

ComputeProbe probe_shared_compute(const ProbeOptions& options, const std::function<void(const std::string&)>& report);

nlohmann::json probe_to_json(const ComputeProbe& probe);
// Throws Error naming the file and field.
ComputeProbe probe_from_json(const nlohmann::json& document, const std::string& path);

}  // namespace pipetwin::exec
