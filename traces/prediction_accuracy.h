// Prediction accuracy — how well a set of predictions matches repeated measurements, the figures of
// `validate --matrix`: per configuration the measured median and its spread (min–max over the runs),
// the signed error of the prediction against the median and whether that error lies outside the
// spread (an error inside it cannot be told from the machine's noise); over the configurations the
// median and the largest |error| and Kendall's tau between the predicted and the measured order
// (tau-a: (concordant - discordant pairs) / all pairs; a pair tied on either side counts as neither),
// and the order one run at a time: the prediction against each round of runs, and one round against
// another (what the machine repeats of its own order; medians over rounds are steadier than one run,
// so this is no bound on the tau against the medians).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "traces/noise_floor.h"

namespace pipetwin {

struct ConfigurationAccuracy {
  std::string name;
  bool in_sample = false;           // the calibration run's own configuration: left out of the summary
  double predicted_s = 0.0;         // predicted time per iteration
  std::vector<double> measured_s;   // time per iteration of each run (its median over iterations)
  std::vector<double> predicted_peak_bytes, measured_peak_bytes;  // per worker (measured: the runs' median; -1 unknown)
  // Per run, the CPU its compute used per unit of the work the calibration charged (validate --matrix:
  // the median base run's, one reference for every configuration; compute_cpu_per_work
  // in calibration.h; -1 unknown): how much slower per unit of work the machine computed than the
  // calibration measured.
  std::vector<double> cpu_per_work;
  // Filled by summarize_accuracy():
  double measured_median_s = 0.0, measured_min_s = 0.0, measured_max_s = 0.0;
  double error = 0.0;               // signed: (predicted - measured median) / measured median
  bool outside_spread = false;      // predicted outside [min, max] of the runs
  // Its runs had more worker processes than the machine's cores: they took turns on the cores
  // (bench/README.md: on 2 cores such runs came out slower than predicted).
  bool oversubscribed = false;
  // Filled by summarize_accuracy(): the median of cpu_per_work's known values (-1 without one).
  double median_cpu_per_work = -1.0;
  // Takes of its runs set aside because they ended in a slow spell of the machine (exec/slow_spell.h)
  // or computed costlier than its usual state (costlier_set_aside below), and runs kept although they
  // ended in a slow spell (the last take allowed).
  int set_aside_runs = 0, runs_in_slow_spell = 0;
  // Where several calibrations predicted it (validate --matrix: one per base run), each one's
  // prediction; predicted_s is their median. Empty: predicted_s is the one prediction.
  std::vector<double> predicted_by_calibration_s;
  int calibration_run = 0;  // which of them gave predicted_s, from 1 (the base's measured-R.jsonl); 0: one
  // Of set_aside_runs, the takes set aside because their compute cost more CPU per unit of work than
  // the machine's usual state (validate --matrix: a slower state within the run), not for a slow spell
  // at its end.
  int costlier_set_aside = 0;
  // Of its runs as kept, those whose compute still cost more than the matrix's tolerance over the
  // machine's usual state (validate --matrix keeps a run's last take).
  int runs_still_costlier = 0;
};

struct AccuracySummary {
  int configurations = 0;           // out of sample
  double median_abs_error = 0.0, max_abs_error = 0.0;
  double kendall_tau = 0.0;
  int outside_spread = 0;
  // Kendall's tau between the measured times of run r and of run s of every out-of-sample
  // configuration, the median over the pairs r < s (0 with fewer than two runs each): the order the
  // machine itself repeats, to compare per_run_tau with.
  double repeat_tau = 0.0;
  // Kendall's tau between the predictions and run r of every out-of-sample configuration, the median
  // over r: the prediction's order against one run, like for like with repeat_tau.
  double per_run_tau = 0.0;
  // What a twin exact to the machine's mean would score against these runs (traces/noise_floor.h):
  // the prediction's figures beside it tell the twin's error from the machine's noise.
  NoiseFloor noise_floor;
  // (max - min) / median of the in-sample configuration's runs (0 without one): how steady the
  // machine was while the calibration's runs ran.
  double base_spread = 0.0;
  // The in-sample configuration's runs, and how many of them lie within kSteadyBand of their median:
  // unless they are a majority, the median of the predictions (one calibration per run) may stand in
  // a slow spell or a quick one, and accuracy_text says so.
  int base_runs = 0, base_runs_near_median = 0;
  std::vector<std::string> oversubscribed;  // the out-of-sample configurations flagged so, in order
  // The out-of-sample configurations whose compute cost more CPU per unit of work than the in-sample
  // configuration's by more than kCostlierComputeBand (medians over the runs), in order, with that
  // excess ((theirs / base's) - 1): a slower spell of the machine or processes contending for its
  // caches, which the twin does not predict.
  std::vector<std::pair<std::string, double>> costlier_compute;
  // Over every configuration, the base's included: takes set aside (in a slow spell, or computing
  // costlier than the machine's usual state: costlier_set_aside of them), runs kept in a slow spell.
  int set_aside_runs = 0, runs_in_slow_spell = 0, costlier_set_aside = 0;
  // The configurations holding runs kept although they computed costlier than the tolerance, with
  // how many each (their runs_still_costlier), in order.
  std::vector<std::pair<std::string, int>> still_costlier;
};

// A configuration whose compute cost this much more CPU per unit of work than the base's is named
// (bench/README.md: on 2 cores, the 3-process configurations 1-8% more than their base; GPT's slow runs 16-35%).
constexpr double kCostlierComputeBand = 0.05;

// A base whose runs mostly agree with their median run within this calibrates on the machine's usual
// state even when one or two runs fell in a slow spell (bench/README.md, 2026-12-06: GPT's base, 7
// runs spreading 73%, 5 of them within 4% of the median, behind a matrix off by 1.7% at the median and
// 7.2% at worst; 3 runs 0.161, 0.249, 0.277 s, one near the median, behind errors of 44-59%).
constexpr double kSteadyBand = 0.10;

// Median of a non-empty list.
double median_of(std::vector<double> values);
// The value at fraction q (0..1) of the sorted values, interpolated between neighbours; 0 for none.
double quantile(std::vector<double> values, double q);
// Kendall's tau-a between two equally long lists; 0 with fewer than two entries.
double kendall_tau(const std::vector<double>& a, const std::vector<double>& b);
// Fills each configuration's figures and summarizes those not in sample. Throws Error for a
// configuration without a measured run.
AccuracySummary summarize_accuracy(std::vector<ConfigurationAccuracy>& configurations);
// One row per configuration: name,in_sample,predicted_s,measured_median_s,measured_min_s,measured_max_s,
// runs,error,outside_spread,predicted_peak_bytes,measured_peak_bytes (per worker, ';'-separated),
// cpu_per_work (the median over the runs; -1 unknown),set_aside_runs,runs_in_slow_spell,
// predicted_min_s,predicted_max_s (over predicted_by_calibration_s: how far the calibrations' own
// spread moves the prediction; predicted_s both where there is one prediction).
std::string accuracy_csv(const std::vector<ConfigurationAccuracy>& configurations);
// The summary line, the order line, the noise floor's line, a warning unless most of the base's runs lie within kSteadyBand of
// their median, and notes naming the oversubscribed configurations and those whose compute cost more
// CPU per unit of work than the base's, and how many takes the slow spells cost, if any.
std::string accuracy_text(const AccuracySummary& summary);

}  // namespace pipetwin
