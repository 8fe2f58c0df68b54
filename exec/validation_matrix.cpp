#include "exec/validation_matrix.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <thread>

#include "exec/all_reduce_probe.h"
#include "exec/core_speed.h"
#include "exec/message_probe.h"
#include "exec/probe.h"
#include "exec/process_setup.h"
#include "planner/error.h"
#include "planner/json_fields.h"
#include "planner/profile_io.h"
#include "planner/schedule_evaluator.h"
#include "planner/stage_figures.h"
#include "traces/calibration_report.h"
#include "traces/receive_wait_fit.h"
#include "traces/trace_metrics.h"

namespace pipetwin::exec {
namespace {

// Whether a measured run had more worker processes (one peak each) than its machine's cores (the
// launcher's "cores"; traces from before it have none, or one that is not a count: not flagged).
bool ran_oversubscribed(const Trace& measured) {
  const int cores = recorded_cores(measured);
  return cores > 0 && static_cast<int>(measured_peak_bytes(measured).size()) > cores;
}

std::string folder_name(const std::string& name) {
  std::string folder = name;
  for (char& c : folder) {
    if (c == ' ' || c == '/' || c == ',' || c == '+') c = '_';
  }
  return folder;
}

// The cluster with `workers` workers: one level's count changed (a single-level cluster only).
Cluster with_workers(const Cluster& cluster, int workers) {
  if (workers <= 0 || workers == cluster.worker_count()) return cluster;
  std::vector<ClusterLevel> levels = cluster.levels();
  if (levels.size() != 1) {
    throw Error({cluster.source_path(), 0, "levels"},
                "a matrix configuration needs " + std::to_string(workers) + " workers and the cluster has " +
                    std::to_string(cluster.worker_count()) + " on several levels",
                "validate --matrix on a one-level cluster of this machine (platforms/localhost-cpu.json)");
  }
  levels.front().count = workers;
  return Cluster(cluster.name(), cluster.description(), cluster.device(), levels, cluster.source_path());
}

// This machine's workers share its cores: the fitted total rate of the machine, by count of computing
// workers when the probe measured them, its cores and what a wake-up costs it on busy cores.
Cluster with_shared_compute(const Cluster& cluster, double shared_compute, const std::vector<double>& by_count,
                            int cores, double busy_wake_s) {
  DeviceSpec device = cluster.device();
  device.shared_compute = shared_compute;
  device.shared_compute_by_count = by_count;
  device.cores = cores;
  device.busy_wake_s = busy_wake_s;
  return cluster.with_device(device);
}

// The capacity fitted with `fitted_workers` computing, carried to k = 1, 2, ... by the probe's ratio of
// throughputs (k against fitted_workers); at least one worker's worth for one (a worker alone runs at
// its own speed).
std::vector<double> capacity_by_count(double fitted, int fitted_workers, const ComputeProbe& probe) {
  const auto& throughput = probe.machine_throughput;
  if (fitted_workers < 1 || fitted_workers > static_cast<int>(throughput.size())) return {};
  std::vector<double> capacities;
  for (double t : throughput) capacities.push_back(fitted * t / throughput[fitted_workers - 1]);
  capacities.front() = std::max(1.0, capacities.front());
  return capacities;
}

// Where the next take of run `run_number` set aside goes: the first free set-aside-R-K.jsonl, K from 1.
std::string next_set_aside_path(const std::string& folder, int run_number) {
  for (int take = 1;; ++take) {
    const std::filesystem::path path =
        std::filesystem::path(folder) / ("set-aside-" + std::to_string(run_number) + "-" + std::to_string(take) + ".jsonl");
    if (!std::filesystem::exists(path)) return path.string();
  }
}

// A run of the plan, taken outside the machine's slow spells (`watch`; each take set aside beside
// `trace_path` as set-aside-R-K.jsonl), or the trace a previous matrix left at `trace_path` when
// reusing runs. A kept run that ended in a spell all the same says so in its header (in_slow_spell).
Trace measured_run(const MatrixOptions& options, const std::string& plan_path, const std::string& trace_path,
                   int run_number, const ValidationRequest& request, const std::shared_ptr<const Schedule>& schedule,
                   SlowSpellWatch& watch, const StepReporter& report_step) {
  namespace fs = std::filesystem;
  if (options.reuse_runs && fs::exists(trace_path)) return load_trace(trace_path);
  Trace measured;
  const RunTakes takes = watch.take(
      [&] { measured = run_for_validation(plan_path, request, schedule); },
      [&](int) { write_trace(measured, next_set_aside_path(fs::path(trace_path).parent_path().string(), run_number)); },
      report_step);
  if (takes.kept_in_spell) measured.header.extra["in_slow_spell"] = true;
  write_trace(measured, trace_path);
  return measured;
}

// The takes of its runs a configuration's folder holds set aside (set-aside-R-K.jsonl).
std::vector<std::filesystem::path> set_aside_runs_in(const std::string& folder) {
  std::vector<std::filesystem::path> paths;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("set-aside-", 0) == 0 && entry.path().extension() == ".jsonl") paths.push_back(entry.path());
  }
  return paths;
}

void remove_set_aside_runs(const std::string& folder) {
  for (const std::filesystem::path& path : set_aside_runs_in(folder)) std::filesystem::remove(path);
}

// How many runs a configuration's folder holds: measured-1.jsonl, measured-2.jsonl, ... without a gap.
int measured_runs_in(const std::string& folder) {
  int count = 0;
  while (std::filesystem::exists(std::filesystem::path(folder) / ("measured-" + std::to_string(count + 1) + ".jsonl"))) ++count;
  return count;
}

// Where the median of `values` stands in them (the upper of the two middle ones of an even count): a
// value that was measured or predicted, not an average of two.
std::size_t median_position(const std::vector<double>& values) {
  std::vector<std::pair<double, std::size_t>> order;
  for (std::size_t i = 0; i < values.size(); ++i) order.emplace_back(values[i], i);
  std::sort(order.begin(), order.end());
  return order[order.size() / 2].second;
}

// Which of the base's runs has the median iteration time: its calibration is calibration/'s and the
// reference of every configuration's CPU/work.
std::size_t median_base_run(const std::vector<Trace>& base_runs) {
  std::vector<double> iteration_s;
  for (const Trace& run : base_runs) iteration_s.push_back(trace_metrics(run).median_iteration_s);
  return median_position(iteration_s);
}

// The machine as one base run calibrates it: its run-time terms, per-layer corrections, the profile
// and the cluster (network, runtime memory, shared compute) the predictions take.
struct CalibratedMachine {
  Calibration calibration;
  LayerCalibration layers;
  Profile profile;
  Cluster network;
};

// The plan's cut as a calibration has it: its stages' figures from the calibrated profile, its
// optimizer steps from the layer calibration.
Plan calibrated_cut(const Plan& plan, const Profile& calibrated, const LayerCalibration& layers) {
  Plan result = plan;
  for (PlanStage& stage : result.stages) set_stage_figures(stage, stage_figures(calibrated, stage.layer_indices));
  return with_optimizer_steps(result, layers);
}

// One configuration of the matrix: its request, machine, cut and schedule, and its runs as measured.
struct Setup {
  std::string name;
  ValidationRequest request;
  Cluster machine;
  Plan plan;
  std::string folder;
  std::shared_ptr<const Schedule> schedule;
  std::vector<WorkerMemory> memory;  // predicted per worker (the cut's bytes, not its times)
  std::vector<Trace> runs;
  std::string trace_path(int run) const {  // measured-R.jsonl, R = run + 1
    return (std::filesystem::path(folder) / ("measured-" + std::to_string(run + 1) + ".jsonl")).string();
  }
  std::string plan_path() const { return (std::filesystem::path(folder) / "plan.json").string(); }
};

// The runs of configurations [first, last) that computed costlier than the machine's usual state
// (costlier_runs), set aside and taken again, at most options.slow_spells.retakes times each
// (MatrixOptions::costlier_compute_tolerance). The work is charged as the base's median run calibrates
// each cut (the reference the matrix's CPU/work column has), that run found again before each pass: a
// pass over the base's own runs may change which it is.
void retake_costlier_runs(std::vector<Setup>& setups, std::size_t first, std::size_t last, const Profile& profile,
                          const MatrixOptions& options, SlowSpellWatch& watch, const StepReporter& report_step) {
  for (int pass = 0; pass < options.slow_spells.retakes; ++pass) {
    const Setup& base = setups.front();
    const LayerCalibration layers = calibrate_layers(base.runs[median_base_run(base.runs)], base.plan, options.shared_compute);
    const Profile calibrated = calibrated_profile(profile, layers);
    std::vector<std::vector<double>> cpu_per_work;
    for (const Setup& setup : setups) {
      const std::vector<StageTimes> charged = stage_times_from_plan(calibrated_cut(setup.plan, calibrated, layers));
      cpu_per_work.emplace_back();
      for (const Trace& run : setup.runs) cpu_per_work.back().push_back(compute_cpu_per_work(run, charged));
    }
    const CostlierRuns costlier = costlier_runs(cpu_per_work, options.costlier_compute_tolerance);
    std::vector<ScheduledRun> again;
    for (const ScheduledRun& run : costlier.runs) {
      if (run.configuration >= first && run.configuration < last) again.push_back(run);
    }
    for (std::size_t i = 0; i < again.size(); ++i) {
      Setup& setup = setups[again[i].configuration];
      const int run = again[i].run;
      const double figure = cpu_per_work[again[i].configuration][run], usual = costlier.usual_cpu_per_work;
      char line[256];
      std::snprintf(line, sizeof line,
                    "[again %zu/%zu] %s (run %d): its compute cost %.2f CPU per unit of work, the machine's usual "
                    "%.2f (the base's runs): more than %.0f%% over, a slower state; taken again",
                    i + 1, again.size(), setup.name.c_str(), run + 1, figure, usual,
                    100 * options.costlier_compute_tolerance);
      report_step(line);
      Trace aside = setup.runs[run];
      aside.header.extra["costlier_compute"] = {{"cpu_per_work", figure}, {"usual_cpu_per_work", usual}};
      write_trace(aside, next_set_aside_path(setup.folder, run + 1));
      setup.runs[run] = measured_run(options, setup.plan_path(), setup.trace_path(run), run + 1, setup.request,
                                     setup.schedule, watch, report_step);
    }
    if (again.empty()) break;
  }
}

// How many of a configuration's set-aside takes were set aside for computing costlier than the usual.
int costlier_set_aside_in(const std::string& folder) {
  int count = 0;
  for (const std::filesystem::path& path : set_aside_runs_in(folder)) {
    count += load_trace(path.string()).header.extra.contains("costlier_compute");
  }
  return count;
}

}  // namespace

std::vector<MatrixConfiguration> default_matrix(const std::string& schedule, int microbatches) {
  const std::string m = " m=" + std::to_string(microbatches);
  std::vector<MatrixConfiguration> matrix = {{schedule + m, schedule, microbatches}};
  for (const char* other : {"gpipe", "1f1b", "pipedream", "2bw", "zb-h1", "zb-h2"}) {
    if (other != schedule) matrix.push_back({other + m, other, microbatches});
  }
  for (int count : {4, 16, 32}) {
    if (count != microbatches) matrix.push_back({"1f1b m=" + std::to_string(count), "1f1b", count});
  }
  for (int count : {4, 16}) {
    if (count != microbatches) matrix.push_back({"gpipe m=" + std::to_string(count), "gpipe", count});
  }
  matrix.push_back({"1f1b" + m + " balanced 1+1", "1f1b", microbatches, 2, {1, 1}});
  matrix.push_back({"1f1b" + m + " optimizer 3 workers", "1f1b", microbatches, 3, {}});
  matrix.push_back({"1f1b" + m + " balanced 1+1+1", "1f1b", microbatches, 3, {1, 1, 1}});
  matrix.push_back({"1f1b" + m + " replicated 2+1", "1f1b", microbatches, 3, {2, 1}});
  return matrix;
}

std::vector<ScheduledRun> run_order(std::size_t configurations, int runs, int base_runs) {
  if (runs < 1) throw Error({"", 0, "--runs"}, "runs must be at least 1", "pass --runs 3 (the default)");
  if (base_runs < 1) {
    throw Error({"", 0, "--base-runs"}, "the base needs at least 1 run", "pass --base-runs 7 (the default: twice --runs, plus one)");
  }
  std::vector<ScheduledRun> order;
  int base_run = 0;
  for (int r = 0; r < runs; ++r) {
    // This round's share of the base's runs, placed at equal steps through the round's configurations.
    const int in_round = base_runs / runs + (r < base_runs % runs ? 1 : 0);
    int placed = 0;
    for (std::size_t k = 1; k <= configurations; ++k) {
      while (placed < in_round && static_cast<std::size_t>(placed) * configurations < k * static_cast<std::size_t>(in_round)) {
        order.push_back({0, base_run++});
        ++placed;
      }
      if (k < configurations) order.push_back({k, r});
    }
  }
  return order;
}

CostlierRuns costlier_runs(const std::vector<std::vector<double>>& cpu_per_work, double tolerance) {
  CostlierRuns costlier;
  std::vector<double> base_known;
  for (double figure : cpu_per_work.empty() ? std::vector<double>{} : cpu_per_work.front()) {
    if (figure > 0.0) base_known.push_back(figure);
  }
  if (base_known.empty()) return costlier;
  std::sort(base_known.begin(), base_known.end());
  costlier.usual_cpu_per_work = base_known[base_known.size() / 4];
  for (std::size_t k = 0; k < cpu_per_work.size(); ++k) {
    for (std::size_t r = 0; r < cpu_per_work[k].size(); ++r) {
      if (cpu_per_work[k][r] > costlier.usual_cpu_per_work * (1.0 + tolerance)) costlier.runs.push_back({k, static_cast<int>(r)});
    }
  }
  return costlier;
}

MatrixResult validate_matrix(const ValidationRequest& base, const std::vector<MatrixConfiguration>& matrix,
                             const MatrixOptions& options, const Predictor& predict, const StepReporter& report_step) {
  namespace fs = std::filesystem;
  const int runs = options.runs;
  if (matrix.empty()) throw Error({"", 0, "matrix"}, "the matrix is empty", "give at least one configuration");
  create_output_folder(base.output_dir);
  auto file = [&](const std::string& name) { return (fs::path(base.output_dir) / name).string(); };
  // Re-predicting a folder takes the base runs it holds (an older matrix ran the base --runs times).
  const int found_base_runs = options.reuse_runs ? measured_runs_in(file(folder_name(matrix.front().name))) : 0;
  const int base_runs = options.base_runs != 0 ? options.base_runs : found_base_runs > 0 ? found_base_runs : 2 * runs + 1;
  const std::vector<ScheduledRun> order = run_order(matrix.size(), runs, base_runs);
  if (matrix.front().schedule != base.schedule || matrix.front().microbatches != base.microbatches ||
      matrix.front().stage_replicas != base.stage_replicas) {
    throw Error({"", 0, "matrix"}, "the matrix's first configuration is not the base the calibration runs",
                "put the base (--schedule, --microbatches) first (default_matrix does)");
  }
  const bool reuse = options.reuse_runs && fs::exists(file("profile.json"));
  SlowSpellWatch watch(options.slow_spells, [] { return kernel_seconds_per_core(); },
                       [](double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); });
  if (!reuse) watch.wait_for_usual(report_step);
  report_step(reuse ? "reusing " + file("profile.json") : "profiling " + base.model + " (batch " + std::to_string(base.batch) + ")");
  const Profile profile = reuse ? load_profile(file("profile.json")) : profile_for_validation(base);
  if (!reuse) write_profile_json(profile, file("profile.json"));
  const Cluster cluster = load_cluster(base.cluster_path);

  // Every configuration's cut, from the profile as measured (a reused folder keeps its cut).
  std::vector<Setup> setups;
  for (const MatrixConfiguration& configuration : matrix) {
    ValidationRequest request = base;
    request.schedule = configuration.schedule;
    request.microbatches = configuration.microbatches;
    request.stage_replicas = configuration.stage_replicas;
    const Cluster machine = with_workers(cluster, configuration.workers);
    const std::string folder = file(folder_name(configuration.name));
    create_output_folder(folder);
    if (!options.reuse_runs) remove_set_aside_runs(folder);  // an earlier matrix's, in the same folder
    const std::string plan_path = (fs::path(folder) / "plan.json").string();
    const Plan plan = reuse && fs::exists(plan_path) ? load_plan(plan_path)
                                                     : plan_for_validation(profile, machine, request.stage_replicas,
                                                                           request.schedule, request.microbatches);
    write_plan(plan, plan_path);
    BuiltSchedule built = schedule_for_validation(plan, machine, request);
    setups.push_back({configuration.name, request, machine, plan, folder,
                      std::make_shared<const Schedule>(std::move(built.schedule)), std::move(built.report.memory), {}});
  }
  // Runs round-robin over the configurations, so a slow spell of this shared machine spreads over all
  // of them instead of biasing one.
  for (std::size_t i = 0; i < order.size(); ++i) {
    const ScheduledRun& scheduled = order[i];
    Setup& setup = setups[scheduled.configuration];
    const std::string trace_path = setup.trace_path(scheduled.run);
    const int of = scheduled.configuration == 0 ? base_runs : runs;
    report_step(std::string(options.reuse_runs && fs::exists(trace_path) ? "[reusing " : "[run ") + std::to_string(i + 1) +
                "/" + std::to_string(order.size()) + "] " + matrix[scheduled.configuration].name + " (" +
                std::to_string(scheduled.run + 1) + " of " + std::to_string(of) + ")");
    setup.runs.push_back(measured_run(options, setup.plan_path(), trace_path, scheduled.run + 1, setup.request,
                                      setup.schedule, watch, report_step));
  }
  // On CPU, runs that computed in a slower state than the machine's usual one: the base's own first
  // (which may change its median run, the reference), then every other configuration's.
  if (!options.reuse_runs && options.costlier_compute_tolerance > 0.0 && base.device == "cpu") {
    retake_costlier_runs(setups, 0, 1, profile, options, watch, report_step);
    retake_costlier_runs(setups, 1, setups.size(), profile, options, watch, report_step);
  }

  // How the machine's capacity changes with the number of processes computing at once (the compute
  // probe), up to the most workers of the matrix, and the link between two processes (the message
  // probe, over 1 KB .. 64 MB: the bandwidth the base's one or two message sizes cannot give) and
  // what an all-reduce among 2 .. most workers costs beyond the ring on it (the all-reduce probe).
  int most_workers = 0;
  for (const Setup& setup : setups) most_workers = std::max(most_workers, setup.schedule->shape.workers);
  std::optional<ComputeProbe> probe;
  std::optional<Cluster> linked;  // the cluster with the probed link and all-reduce cost
  if (options.probe) {
    const std::string probe_path = file("probe.json");
    nlohmann::json document;
    if (reuse && fs::exists(probe_path)) {
      document = json_fields::read_file(probe_path);
    } else {
      document = {{"format", "pipetwin.probe/1"}};
      watch.wait_for_usual(report_step);
      if (options.shared_compute) {
        ProbeOptions probe_options;
        probe_options.model = base.model;
        probe_options.batch = base.batch;
        probe_options.max_processes = most_workers;
        probe_options.device = base.device;
        document = probe_to_json(probe_shared_compute(probe_options, report_step));
      }
      if (base.device == "cpu") {
        const MessageProbe messages = probe_messages({}, report_step);
        document["messages"] = message_probe_to_json(messages);
        if (most_workers >= 2) {
          AllReduceProbeOptions all_reduce;
          all_reduce.max_processes = most_workers;
          document["all_reduce"] = all_reduce_probe_to_json(probe_all_reduce(all_reduce, messages.link, report_step));
        }
      }
      json_fields::write_text_atomically(probe_path, document.dump(2) + "\n");
    }
    if (options.shared_compute) probe = probe_from_json(document, probe_path);
    if (document.contains("messages")) linked = with_probe(cluster, document, probe_path);
  }

  MatrixResult result;
  if (options.measure_only) {
    result.measured_only = true;
    return result;
  }
  const Plan& base_plan = setups.front().plan;
  const Cluster& probed_cluster = linked ? *linked : cluster;
  // What each worker process holds beside its stages, from every base run's peaks: it does not follow
  // the cores' speed, and six peaks fit it better than two (bench/README.md).
  double runtime_memory_bytes = 0.0;
  {
    std::vector<double> stage_bytes;
    for (const WorkerMemory& memory : setups.front().memory) stage_bytes.push_back(memory.stage_bytes());
    std::vector<std::vector<double>> peaks;
    for (const Trace& run : setups.front().runs) peaks.push_back(measured_peak_bytes(run));
    runtime_memory_bytes = fit_runtime_memory_bytes(stage_bytes, peaks);
  }
  // Every term of one calibration from one run: on this machine a run's two cores are often unequally
  // slow, and per-term medians over the runs mix the states of different runs (bench/README.md).
  auto calibrate_on = [&](const Trace& run) {
    const Calibration calibration =
        calibrate(run, base_plan, probed_cluster, linked ? LinkTerms::kOverheadOnly : LinkTerms::kOverheadAndBandwidth);
    const LayerCalibration layers = calibrate_layers(run, base_plan, options.shared_compute);
    Cluster network = calibrated_network(probed_cluster, calibration);
    DeviceSpec device = network.device();
    device.runtime_memory_bytes = runtime_memory_bytes;
    network = network.with_device(device);
    if (options.shared_compute) {
      network = with_shared_compute(
          network, layers.shared_compute,
          probe ? capacity_by_count(layers.shared_compute, setups.front().schedule->shape.workers, *probe) : std::vector<double>{},
          recorded_cores(run) > 0 ? recorded_cores(run) : usable_cores(), options.busy_wake_s);
    }
    Profile calibrated = calibrated_profile(profile, layers);
    // The waits a twin of mean durations misses, fitted so that this calibration predicts its own run.
    const Plan own_cut = calibrated_cut(base_plan, calibrated, layers);
    const auto predicted_with_wait_s = [&](double receive_wait_s) {
      DeviceSpec waiting = network.device();
      waiting.receive_wait_s = receive_wait_s;
      const Cluster cluster = with_workers(network.with_device(waiting), matrix.front().workers);
      return trace_metrics(predict(own_cut, cluster, setups.front().request)).median_iteration_s;
    };
    device = network.device();
    device.receive_wait_s = fit_receive_wait_s(predicted_with_wait_s, trace_metrics(run).median_iteration_s);
    network = network.with_device(device);
    return CalibratedMachine{calibration, layers, std::move(calibrated), network};
  };
  // One calibration per base run, each predicting every configuration; a configuration's prediction is
  // the median of its predictions. The calibration of the median run alone carried that run's state
  // into every prediction (over #17-#28's 504 configurations an RMS error of 8.6%, against 8.0% now;
  // bench/README.md).
  const std::vector<Trace>& base_runs_measured = setups.front().runs;
  const std::size_t median_base = median_base_run(base_runs_measured);
  std::vector<CalibratedMachine> machines;
  for (std::size_t r = 0; r < base_runs_measured.size(); ++r) {
    report_step("calibrating on run " + std::to_string(r + 1) + " of the " + std::to_string(base_runs_measured.size()) +
                " of " + matrix.front().name);
    machines.push_back(calibrate_on(base_runs_measured[r]));
  }
  // The files under calibration/ are the median run's calibration.
  const CalibratedMachine& median_machine = machines[median_base];
  result.calibration = median_machine.calibration;
  result.layers = median_machine.layers;
  create_output_folder(file("calibration"));
  write_profile_json(median_machine.profile, file("calibration/calibrated-profile.json"));
  json_fields::write_text_atomically(file("calibration/calibrated-cluster.json"), cluster_to_json(median_machine.network).dump(2) + "\n");
  json_fields::write_text_atomically(file("calibration/layer-calibration.json"),
                                     layer_calibration_to_json(result.layers).dump(2) + "\n");
  json_fields::write_text_atomically(file("calibration/calibration.json"), calibration_to_json(result.calibration).dump(2) + "\n");

  for (std::size_t k = 0; k < setups.size(); ++k) {
    const Setup& setup = setups[k];
    report_step("predicting " + matrix[k].name + " (with each of the " + std::to_string(machines.size()) + " calibrations)");
    ConfigurationAccuracy row;
    std::vector<Plan> plans;
    std::vector<Cluster> clusters;
    std::vector<Trace> predictions;
    for (const CalibratedMachine& machine : machines) {
      plans.push_back(calibrated_cut(setup.plan, machine.profile, machine.layers));
      clusters.push_back(with_workers(machine.network, matrix[k].workers));
      predictions.push_back(predict(plans.back(), clusters.back(), setup.request));
      row.predicted_by_calibration_s.push_back(trace_metrics(predictions.back()).median_iteration_s);
    }
    // The median prediction, with the plan and cluster that gave it (simulate reproduces it); the plan
    // as the median base run calibrates it (calibration/) charges the runs' compute (CPU/work: one
    // reference for every configuration, as the note on costlier compute compares them).
    const std::size_t chosen = median_position(row.predicted_by_calibration_s);
    row.calibration_run = static_cast<int>(chosen) + 1;
    write_plan(plans[median_base], (fs::path(setup.folder) / "calibrated-plan.json").string());
    write_plan(plans[chosen], (fs::path(setup.folder) / "predicted-plan.json").string());
    json_fields::write_text_atomically((fs::path(setup.folder) / "predicted-cluster.json").string(),
                                       cluster_to_json(clusters[chosen]).dump(2) + "\n");
    write_trace(predictions[chosen], (fs::path(setup.folder) / "predicted.jsonl").string());
    row.name = matrix[k].name;
    row.in_sample = k == 0;
    row.predicted_s = row.predicted_by_calibration_s[chosen];
    for (const WorkerMemory& memory : setup.memory) row.predicted_peak_bytes.push_back(memory.stage_bytes() + runtime_memory_bytes);
    const std::vector<StageTimes> charged = stage_times_from_plan(plans[median_base]);
    for (const Trace& measured : setup.runs) {
      row.measured_s.push_back(trace_metrics(measured).median_iteration_s);
      row.oversubscribed = row.oversubscribed || ran_oversubscribed(measured);
      row.cpu_per_work.push_back(compute_cpu_per_work(measured, charged));
      row.runs_in_slow_spell += measured.header.extra.value("in_slow_spell", false);
    }
    row.set_aside_runs = static_cast<int>(set_aside_runs_in(setup.folder).size());
    row.costlier_set_aside = costlier_set_aside_in(setup.folder);
    for (std::size_t w = 0; w < row.predicted_peak_bytes.size(); ++w) {
      std::vector<double> worker;
      for (const Trace& measured : setup.runs) {
        const std::vector<double> peaks = measured_peak_bytes(measured);
        if (w < peaks.size() && peaks[w] >= 0) worker.push_back(peaks[w]);
      }
      row.measured_peak_bytes.push_back(worker.empty() ? -1.0 : median_of(worker));
    }
    result.configurations.push_back(row);
  }
  // The runs kept (the last take of each) although they computed costlier than the tolerance allows.
  if (options.costlier_compute_tolerance > 0.0) {
    std::vector<std::vector<double>> cpu_per_work;
    for (const ConfigurationAccuracy& row : result.configurations) cpu_per_work.push_back(row.cpu_per_work);
    for (const ScheduledRun& run : costlier_runs(cpu_per_work, options.costlier_compute_tolerance).runs) {
      ++result.configurations[run.configuration].runs_still_costlier;
    }
  }
  result.summary = summarize_accuracy(result.configurations);
  nlohmann::json rows = nlohmann::json::array();
  for (const ConfigurationAccuracy& c : result.configurations) {
    rows.push_back({{"configuration", c.name},
                    {"in_sample", c.in_sample},
                    {"predicted_s", c.predicted_s},
                    {"predicted_by_calibration_s", c.predicted_by_calibration_s},
                    {"calibration_run", c.calibration_run},
                    {"measured_s", c.measured_s},
                    {"measured_median_s", c.measured_median_s},
                    {"error", c.error},
                    {"outside_spread", c.outside_spread},
                    {"oversubscribed", c.oversubscribed},
                    {"cpu_per_work", c.cpu_per_work},
                    {"median_cpu_per_work", c.median_cpu_per_work},
                    {"set_aside_runs", c.set_aside_runs},
                    {"costlier_set_aside", c.costlier_set_aside},
                    {"runs_still_costlier", c.runs_still_costlier},
                    {"runs_in_slow_spell", c.runs_in_slow_spell},
                    {"predicted_peak_bytes", c.predicted_peak_bytes},
                    {"measured_peak_bytes", c.measured_peak_bytes}});
  }
  const AccuracySummary& s = result.summary;
  const nlohmann::json summary = {{"model", base.model},
                                  {"base", base.schedule + " m=" + std::to_string(base.microbatches)},
                                  {"runs", runs},
                                  {"base_runs", base_runs},
                                  {"repeat_tau", s.repeat_tau},
                                  {"per_run_tau", s.per_run_tau},
                                  {"configurations", s.configurations},
                                  {"median_abs_error", s.median_abs_error},
                                  {"max_abs_error", s.max_abs_error},
                                  {"kendall_tau", s.kendall_tau},
                                  {"outside_spread", s.outside_spread},
                                  {"base_spread", s.base_spread},
                                  {"base_runs_near_median", s.base_runs_near_median},
                                  {"noise_floor",
                                   {{"draws", s.noise_floor.draws},
                                    {"median_abs_error", s.noise_floor.median_abs_error},
                                    {"max_abs_error", s.noise_floor.max_abs_error},
                                    {"max_abs_error_low", s.noise_floor.max_abs_error_low},
                                    {"max_abs_error_high", s.noise_floor.max_abs_error_high},
                                    {"kendall_tau", s.noise_floor.kendall_tau},
                                    {"kendall_tau_low", s.noise_floor.kendall_tau_low},
                                    {"kendall_tau_high", s.noise_floor.kendall_tau_high}}},
                                  {"rows", rows}};
  json_fields::write_text_atomically(file("matrix.json"), summary.dump(2) + "\n");
  json_fields::write_text_atomically(file("matrix.csv"), accuracy_csv(result.configurations));
  return result;
}

}  // namespace pipetwin::exec
