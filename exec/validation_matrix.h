// Out-of-sample validation — `validate --matrix`: calibrate once, then predict configurations the
// calibration never saw and run each of them several times on this machine.
//
// 1. profile the zoo model; cut every configuration of the matrix from that profile (the optimizer's
//    straight plan or a balanced one, on the configuration's workers);
// 2. run every configuration `runs` times, round-robin (a slow spell of a shared machine spreads over
//    all configurations instead of biasing one), and the base `base_runs` times, spread evenly through
//    the rounds (each calibrates the machine once and the predictions' median is kept: the more
//    runs, the less one run's slow or quick spell moves it); each run waits while a core is in a slow
//    spell, and is taken again when it ends in one (slow_spell.h: the twin predicts the machine in its
//    usual state); then, on CPU, a run whose compute cost more CPU per unit of work than the
//    machine's usual state (the lower quartile of the base's runs) by more than
//    costlier_compute_tolerance (a slow state within the run, which the kernel's checks before and
//    after it missed) is set aside and taken again (costlier_runs): the base's own runs first, then
//    the other configurations';
// 3. calibrate on each run of the base configuration (the first of the matrix: the request's
//    schedule and microbatches): run-time terms (overheads, links: calibration.h) and per-layer compute
//    corrections with the machine's shared compute (layer_calibration.h), each calibration from one
//    run (a run's cores may be unequally slow: figures from different runs would mix states); what each
//    worker process holds beside its stages (device.runtime_memory_bytes) from every base run's peaks;
//    With the probe (probe.h, probe.json), the capacity fitted for the base's worker count is carried
//    to other counts by the probe's throughput ratios (device.shared_compute_by_count), and on CPU the
//    link is the message probe's (message_probe.h): its bandwidth kept, the base's runs fitting only
//    the per-message overhead against it (calibration.h, LinkTerms::kOverheadOnly), and each
//    all-reduce costs what the all-reduce probe (all_reduce_probe.h) found beyond the ring;
// 4. predict every configuration (SimGrid, given as a function) with each calibration's profile and
//    network, and take the median prediction (its plan and trace are the ones written): all but the
//    base are out of sample; summarize (prediction_accuracy.h).
// measure_only stops after 2 and the probe; reuse_runs later starts from the profile, cuts, runs and
// probe already in the folder (measured on a GPU machine, predicted where SimGrid is).
// Files: profile.json, calibration/ (the median base run's calibrated profile and cluster, layer
// scales, run-time terms), one folder per configuration (plan.json, measured-R.jsonl,
// calibrated-plan.json as calibration/ has it, and the median prediction's predicted.jsonl with the
// predicted-plan.json and predicted-cluster.json that gave it), then matrix.csv and matrix.json, each
// written whole at the end (an interrupted run leaves neither).
// Throws pipetwin::Error.
#pragma once

#include <string>
#include <vector>

#include "exec/slow_spell.h"
#include "exec/validation.h"
#include "traces/layer_calibration.h"
#include "traces/prediction_accuracy.h"

namespace pipetwin::exec {

struct MatrixConfiguration {
  std::string name;                 // "zb-h1 m=8", unique, used as its folder name (spaces become '_')
  std::string schedule = "1f1b";
  int microbatches = 8;
  int workers = 0;                  // 0: the cluster's
  std::vector<int> stage_replicas;  // a balanced plan; empty: the optimizer's straight plan
};

// The default matrix around the base (`schedule`, `microbatches`): the six one-stage-per-worker
// schedules, 4 to 32 microbatches, the balanced partition on 2 stages, the optimizer's and the
// balanced partition on 3 workers, and a replicated first stage (2,1). The base itself comes first.
std::vector<MatrixConfiguration> default_matrix(const std::string& schedule, int microbatches);

struct MatrixResult {
  bool measured_only = false;  // measure_only: nothing below is filled
  Calibration calibration;  // the median base run's (as under calibration/)
  LayerCalibration layers;
  std::vector<ConfigurationAccuracy> configurations;
  AccuracySummary summary;
};

struct MatrixOptions {
  int runs = 3;               // runs of every configuration but the base
  int base_runs = 0;          // runs of the base, the calibration's (0: 2 runs + 1, odd: its median is one
                              // run; with reuse_runs, the base runs the folder holds, if any)
  bool shared_compute = true; // fit and simulate the machine's shared compute (layer_calibration.h)
  bool reuse_runs = false;    // take the measured traces a previous matrix left in the folder (same cuts)
  bool probe = true;          // probe 1 .. most workers processes (probe.h) for the capacity by count,
                              // messages between two (message_probe.h) for the link's bandwidth and
                              // all-reduces (all_reduce_probe.h) for their cost beyond the ring
  bool measure_only = false;  // stop after the runs and the probe: a machine without SimGrid (a GPU box)
                              // measures, another predicts from the same folder with reuse_runs
  // With shared_compute: what a worker's wake-up costs the machine when its message arrives while every
  // core is held by another worker's compute (device.busy_wake_s; only where a configuration has more
  // workers than the base run's cores). The base cannot show it (two workers on two cores); 2 ms was
  // chosen on the 3-process runs of six matrices on the 2-core machine here, each matrix predicted with
  // the value the other five chose (bench/README.md "Out of sample").
  double busy_wake_s = 2e-3;
  // Runs (and the profile and probe) wait out a slow spell of the machine, and a run that ends in one
  // is set aside (set-aside-R-K.jsonl) and taken again (slow_spell.h); tolerance 0: no watch.
  SlowSpellOptions slow_spells;
  // On CPU, while measuring: a run (the base's included) whose compute cost more CPU per unit of work
  // than the machine's usual state by more than this computed in a slower state, and is set aside (its
  // header says so: costlier_compute) and taken again, at most slow_spells.retakes times (the last
  // take is kept). The usual state is the lower quartile of the base's runs' figures (the work as the
  // median base run calibrates it): the quickest a quarter of them show, as the slow-spell watch takes
  // the fastest a core has shown; on this machine a slow state held 4 of a base's 7 runs, and their
  // median was a slow one. 0: never. Runs of one configuration usually lie within a few percent of
  // the base's, the 3-process ones up to +9% (single runs +27%), slow states +16 to +72%
  // (bench/README.md "Out of sample": "Runs in a slower state taken again").
  double costlier_compute_tolerance = 0.15;
};

// The order of the runs: `runs` rounds over configurations 0 .. configurations - 1, configuration 0
// (the base) `base_runs` times in all, spread evenly over the rounds and within each round. Each entry
// is {configuration, its run number from 0}. Throws Error for runs or base_runs under 1.
struct ScheduledRun {
  std::size_t configuration = 0;
  int run = 0;
};
std::vector<ScheduledRun> run_order(std::size_t configurations, int runs, int base_runs);

// The runs whose compute cost more CPU per unit of work than the machine's usual state (the lower
// quartile of the base's, configuration 0's, known figures: the one at position n / 4 in increasing
// order) by more than `tolerance`, the base's own included, in order of configuration, then run:
// cpu_per_work[configuration][run], -1 where unknown (never chosen; nor any run when no base run's
// figure is known: usual_cpu_per_work -1).
struct CostlierRuns {
  double usual_cpu_per_work = -1.0;
  std::vector<ScheduledRun> runs;
};
CostlierRuns costlier_runs(const std::vector<std::vector<double>>& cpu_per_work, double tolerance);

MatrixResult validate_matrix(const ValidationRequest& base, const std::vector<MatrixConfiguration>& matrix,
                             const MatrixOptions& options, const Predictor& predict, const StepReporter& report_step);

}  // namespace pipetwin::exec
