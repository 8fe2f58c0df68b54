#include "exec/probe.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "exec/child_processes.h"
#include "exec/compute_device.h"
#include "exec/model_zoo.h"
#include "exec/process_setup.h"
#include "planner/error.h"
#include "planner/json_fields.h"

namespace pipetwin::exec {
namespace {

using Clock = std::chrono::steady_clock;

// One probe process: train from `start` until `start + seconds`; iterations per second.
double train_until(const ProbeOptions& options, int rank, int processes, Clock::time_point start) {
  keep_freed_memory();
  torch::set_num_threads(1);
  pin_to_own_core(rank, processes);
  const torch::Device device = device_for_rank(options.device, rank);
  auto model = make_model(options.model, true);
  auto whole = model->stage(0, model->layer_count() - 1);
  whole->to(device);
  const Batch batch = model->batch(1, rank, options.batch);
  const torch::Tensor inputs = batch.inputs.to(device), labels = batch.labels.to(device);
  auto step = [&] {
    model->loss(whole->forward(inputs), labels).backward();
    wait_for(device);
  };
  for (int warm = 0; warm < 2; ++warm) step();
  std::this_thread::sleep_until(start);
  const Clock::time_point end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.seconds));
  int iterations = 0;
  Clock::time_point now = Clock::now();
  while (now < end) {
    step();
    ++iterations;
    now = Clock::now();
  }
  return iterations / std::chrono::duration<double>(now - start).count();
}

// k processes at once; their rates.
std::vector<double> rates_of(const ProbeOptions& options, int k) {
  // Time to build the model and warm up before the common start.
  const Clock::time_point start = Clock::now() + std::chrono::milliseconds(1500);
  std::vector<double> rates;
  for (const std::vector<double>& rate : run_in_children(
           k, 1, [&](int rank) { return std::vector<double>{train_until(options, rank, k, start)}; }, "probe",
           "read its message above; try --seconds 2 or a smaller --batch")) {
    rates.push_back(rate.front());
  }
  return rates;
}

}  // namespace

std::vector<int> implausible_counts(const std::vector<double>& machine_throughput, int cores) {
  constexpr double kTolerance = 0.15;
  std::vector<int> counts;
  for (std::size_t k = 1; k <= machine_throughput.size(); ++k) {
    const double most = static_cast<double>(std::min<std::size_t>(k, std::max(cores, 1)));
    if (machine_throughput[k - 1] > most * (1 + kTolerance)) {
      counts.push_back(1);
      break;
    }
  }
  for (std::size_t k = 2; k <= machine_throughput.size(); ++k) {
    if (machine_throughput[k - 1] < (1 - kTolerance) * machine_throughput[k - 2]) counts.push_back(static_cast<int>(k));
  }
  return counts;
}

namespace {

std::vector<double> throughput_by_count(const std::vector<double>& process_rate) {
  std::vector<double> throughput;
  for (std::size_t k = 1; k <= process_rate.size(); ++k) throughput.push_back(k * process_rate[k - 1] / process_rate.front());
  return throughput;
}

std::string figures(const std::vector<double>& throughput) {
  std::string text;
  char figure[32];
  for (double value : throughput) {
    std::snprintf(figure, sizeof figure, "%s%.2f", text.empty() ? "" : ", ", value);
    text += figure;
  }
  return text;
}

}  // namespace

ComputeProbe probe_shared_compute(const ProbeOptions& options, const std::function<void(const std::string&)>& report) {
  if (options.max_processes < 1 || !(options.seconds > 0) || options.batch < 1) {
    throw Error({"", 0, "--max-processes"}, "processes, seconds and batch must be positive",
                "e.g. --max-processes 3 --seconds 2");
  }
  ComputeProbe probe;
  probe.model = options.model;
  probe.batch = options.batch;
  probe.process_rate.assign(options.max_processes, 0.0);
  auto take = [&](int k, const std::string& progress, const std::string& note) {
    report(progress + " " + std::to_string(k) + " process" + (k > 1 ? "es" : "") + " training " + options.model +
           " at once" + note);
    double sum = 0.0;
    for (double rate : rates_of(options, k)) sum += rate;
    probe.process_rate[k - 1] = std::max(probe.process_rate[k - 1], sum / k);
  };
  // Process counts 1 … max, then each again: on a shared machine another job can slow either take of
  // a count (a slow spell of one core held three processes at 1.2 ones' worth where two gave 1.9,
  // bench/README.md), and the faster of the two is the nearer to the count's own rate.
  const int rounds = options.max_processes > 1 ? 2 * options.max_processes : 1;
  for (int round = 1; round <= rounds; ++round) {
    const int k = (round - 1) % options.max_processes + 1;
    take(k, "[probe " + std::to_string(round) + "/" + std::to_string(rounds) + "]",
         round > options.max_processes ? " (again)" : "");
  }
  probe.machine_throughput = throughput_by_count(probe.process_rate);
  if (options.device != "cpu" || options.max_processes < 2) return probe;
  // A figure no idle CPU gives is taken again, twice at most.
  const int cores = usable_cores();
  for (int check = 1; check <= 2; ++check) {
    const std::vector<int> suspects = implausible_counts(probe.machine_throughput, cores);
    if (suspects.empty()) return probe;
    for (int k : suspects) {
      report("[probe check] throughput by process count " + figures(probe.machine_throughput) + " on " +
             std::to_string(cores) + " cores: " + std::to_string(k) +
             (k == 1 ? " process alone looks" : " processes look") + " slowed by another job; taking it again");
      take(k, "[probe check]", " (again)");
    }
    probe.machine_throughput = throughput_by_count(probe.process_rate);
  }
  if (const std::vector<int> suspects = implausible_counts(probe.machine_throughput, cores); !suspects.empty()) {
    report("[probe] warning: throughput by process count " + figures(probe.machine_throughput) + " on " +
           std::to_string(cores) + " cores still looks slowed at " + std::to_string(suspects.front()) +
           (suspects.front() == 1 ? " process (every count is over its rate)" : " processes") +
           " after two more takes; kept as measured: take the probe again on a quieter machine");
  }
  return probe;
}

nlohmann::json probe_to_json(const ComputeProbe& probe) {
  return {{"format", "pipetwin.probe/1"},
          {"model", probe.model},
          {"batch", probe.batch},
          {"process_rate", probe.process_rate},
          {"machine_throughput", probe.machine_throughput}};
}

ComputeProbe probe_from_json(const nlohmann::json& document, const std::string& path) {
  json_fields::expect_format(document, "pipetwin.probe/1", path);
  ComputeProbe probe;
  probe.model = json_fields::string(document, "model", "", path);
  probe.batch = json_fields::small_integer(document, "batch", "", path);
  auto positive_numbers = [&](const char* key) {
    const nlohmann::json& values = json_fields::require(document, key, "", path);
    std::vector<double> numbers;
    for (const auto& value : values.is_array() ? values : nlohmann::json::array()) {
      numbers.push_back(value.is_number() ? value.get<double>() : -1.0);
    }
    if (numbers.empty() || std::any_of(numbers.begin(), numbers.end(), [](double v) { return !(v > 0); })) {
      throw Error({path, 0, key}, "expected a non-empty array of positive numbers", "write it again with pipetwin probe");
    }
    return numbers;
  };
  probe.process_rate = positive_numbers("process_rate");
  probe.machine_throughput = positive_numbers("machine_throughput");
  return probe;
}

}  // namespace pipetwin::exec
