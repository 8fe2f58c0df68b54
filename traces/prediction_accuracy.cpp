#include "traces/prediction_accuracy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "planner/error.h"

namespace pipetwin {

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2.0;
}

double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double position = q * (values.size() - 1);
  const std::size_t low = static_cast<std::size_t>(position);
  const std::size_t high = std::min(low + 1, values.size() - 1);
  return values[low] + (values[high] - values[low]) * (position - low);
}

double kendall_tau(const std::vector<double>& a, const std::vector<double>& b) {
  const std::size_t n = std::min(a.size(), b.size());
  if (n < 2) return 0.0;
  long long concordant = 0, discordant = 0;
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) {
      const double product = (a[i] - a[j]) * (b[i] - b[j]);
      if (product > 0) ++concordant;
      if (product < 0) ++discordant;
    }
  }
  return static_cast<double>(concordant - discordant) / (static_cast<double>(n) * (n - 1) / 2.0);
}

namespace {

// The out-of-sample configurations' predictions and their measured times round by round (run r of
// each), over as many rounds as the fewest runs any of them has.
struct Rounds {
  std::vector<double> predicted_s;
  std::vector<std::vector<double>> measured_s;  // [round][configuration]
};

Rounds out_of_sample_rounds(const std::vector<ConfigurationAccuracy>& configurations) {
  Rounds rounds;
  std::size_t count = 0;
  bool any = false;
  for (const ConfigurationAccuracy& c : configurations) {
    if (c.in_sample) continue;
    count = any ? std::min(count, c.measured_s.size()) : c.measured_s.size();
    any = true;
  }
  rounds.measured_s.resize(count);
  for (const ConfigurationAccuracy& c : configurations) {
    if (c.in_sample) continue;
    rounds.predicted_s.push_back(c.predicted_s);
    for (std::size_t r = 0; r < count; ++r) rounds.measured_s[r].push_back(c.measured_s[r]);
  }
  return rounds;
}

// Median over the pairs of rounds r < s of tau(round r, round s).
double repeat_tau(const Rounds& rounds) {
  std::vector<double> taus;
  for (std::size_t r = 0; r < rounds.measured_s.size(); ++r) {
    for (std::size_t s = r + 1; s < rounds.measured_s.size(); ++s) {
      taus.push_back(kendall_tau(rounds.measured_s[r], rounds.measured_s[s]));
    }
  }
  return taus.empty() ? 0.0 : median_of(taus);
}

// Median over the rounds of tau(prediction, round r).
double per_run_tau(const Rounds& rounds) {
  std::vector<double> taus;
  for (const std::vector<double>& round : rounds.measured_s) taus.push_back(kendall_tau(rounds.predicted_s, round));
  return taus.empty() ? 0.0 : median_of(taus);
}

}  // namespace

AccuracySummary summarize_accuracy(std::vector<ConfigurationAccuracy>& configurations) {
  AccuracySummary summary;
  std::vector<double> errors, predicted, measured;
  std::vector<double> base_runs_s;          // the noise floor's draws: the base's runs
  std::vector<std::vector<double>> runs_s;  // and each out-of-sample configuration's
  double base_cpu_per_work = -1.0;
  for (ConfigurationAccuracy& c : configurations) {
    std::vector<double> known;
    for (double ratio : c.cpu_per_work) {
      if (ratio > 0.0) known.push_back(ratio);
    }
    c.median_cpu_per_work = known.empty() ? -1.0 : median_of(known);
    if (c.in_sample) base_cpu_per_work = c.median_cpu_per_work;
    summary.set_aside_runs += c.set_aside_runs;
    summary.runs_in_slow_spell += c.runs_in_slow_spell;
    summary.costlier_set_aside += c.costlier_set_aside;
    if (c.runs_still_costlier > 0) summary.still_costlier.emplace_back(c.name, c.runs_still_costlier);
  }
  for (ConfigurationAccuracy& c : configurations) {
    if (c.measured_s.empty()) {
      throw Error({"", 0, c.name}, "configuration '" + c.name + "' has no measured run", "run it at least once");
    }
    c.measured_median_s = median_of(c.measured_s);
    c.measured_min_s = *std::min_element(c.measured_s.begin(), c.measured_s.end());
    c.measured_max_s = *std::max_element(c.measured_s.begin(), c.measured_s.end());
    c.error = (c.predicted_s - c.measured_median_s) / c.measured_median_s;
    c.outside_spread = c.predicted_s < c.measured_min_s || c.predicted_s > c.measured_max_s;
    if (c.in_sample) {
      summary.base_spread = (c.measured_max_s - c.measured_min_s) / c.measured_median_s;
      summary.base_runs = static_cast<int>(c.measured_s.size());
      summary.base_runs_near_median = static_cast<int>(std::count_if(c.measured_s.begin(), c.measured_s.end(), [&](double s) {
        return std::fabs(s - c.measured_median_s) <= kSteadyBand * c.measured_median_s;
      }));
      base_runs_s = c.measured_s;
      continue;
    }
    if (c.oversubscribed) summary.oversubscribed.push_back(c.name);
    if (base_cpu_per_work > 0.0 && c.median_cpu_per_work > base_cpu_per_work * (1.0 + kCostlierComputeBand)) {
      summary.costlier_compute.emplace_back(c.name, c.median_cpu_per_work / base_cpu_per_work - 1.0);
    }
    errors.push_back(std::fabs(c.error));
    predicted.push_back(c.predicted_s);
    measured.push_back(c.measured_median_s);
    runs_s.push_back(c.measured_s);
    if (c.outside_spread) ++summary.outside_spread;
  }
  summary.configurations = static_cast<int>(errors.size());
  if (!errors.empty()) {
    summary.median_abs_error = median_of(errors);
    summary.max_abs_error = *std::max_element(errors.begin(), errors.end());
  }
  summary.kendall_tau = kendall_tau(predicted, measured);
  const Rounds rounds = out_of_sample_rounds(configurations);
  summary.repeat_tau = repeat_tau(rounds);
  summary.per_run_tau = per_run_tau(rounds);
  summary.noise_floor = noise_floor(base_runs_s, runs_s);
  return summary;
}

namespace {

std::string joined(const std::vector<double>& values) {
  std::string text;
  char number[32];
  for (double value : values) {
    std::snprintf(number, sizeof number, "%.0f", value);
    if (!text.empty()) text += ';';
    text += number;  // one append each: GCC 12's -Wrestrict misreads "" + string here
  }
  return text;
}

}  // namespace

std::string accuracy_csv(const std::vector<ConfigurationAccuracy>& configurations) {
  std::string csv =
      "configuration,in_sample,predicted_s,measured_median_s,measured_min_s,measured_max_s,runs,error,outside_spread,"
      "predicted_peak_bytes,measured_peak_bytes,cpu_per_work,set_aside_runs,runs_in_slow_spell,predicted_min_s,"
      "predicted_max_s\n";
  char line[512];
  for (const ConfigurationAccuracy& c : configurations) {
    std::string name = c.name;  // quoted when it holds a comma or a quote (RFC 4180)
    if (name.find_first_of(",\"") != std::string::npos) {
      std::string quoted = "\"";
      for (char ch : name) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
      name = quoted + "\"";
    }
    std::snprintf(line, sizeof line, "%s,%d,%.6f,%.6f,%.6f,%.6f,%zu,%.4f,%d,", name.c_str(), c.in_sample ? 1 : 0,
                  c.predicted_s, c.measured_median_s, c.measured_min_s, c.measured_max_s, c.measured_s.size(), c.error,
                  c.outside_spread ? 1 : 0);
    csv += line + joined(c.predicted_peak_bytes) + "," + joined(c.measured_peak_bytes);
    const std::vector<double>& predictions = c.predicted_by_calibration_s;
    const double predicted_min_s = predictions.empty() ? c.predicted_s : *std::min_element(predictions.begin(), predictions.end());
    const double predicted_max_s = predictions.empty() ? c.predicted_s : *std::max_element(predictions.begin(), predictions.end());
    std::snprintf(line, sizeof line, ",%.4f,%d,%d,%.6f,%.6f\n", c.median_cpu_per_work, c.set_aside_runs, c.runs_in_slow_spell,
                  predicted_min_s, predicted_max_s);
    csv += line;
  }
  return csv;
}

std::string accuracy_text(const AccuracySummary& summary) {
  char text[512];
  std::snprintf(text, sizeof text,
                "%d configurations out of sample: median |error| %.1f%%, max |error| %.1f%%, Kendall tau %.2f, "
                "%d outside the measured spread\nOrder, one run at a time: the prediction against each run tau %.2f, run "
                "against run %.2f (the medians over runs and over pairs of runs: how far this machine repeats its own order)",
                summary.configurations, 100 * summary.median_abs_error, 100 * summary.max_abs_error, summary.kendall_tau,
                summary.outside_spread, summary.per_run_tau, summary.repeat_tau);
  std::string result = text;
  const NoiseFloor& floor = summary.noise_floor;
  if (floor.draws > 0) {
    std::snprintf(text, sizeof text,
                  "\nNoise floor: a twin exact to this machine's mean would score median |error| %.1f%%, max |error| %.1f%% "
                  "(%.1f-%.1f%%), Kendall tau %.2f (%.2f-%.2f) against these runs (%d bootstrap draws of each "
                  "configuration's runs and the base's; 10th-90th percentiles): errors and taus within these are the "
                  "machine's noise, not the twin's",
                  100 * floor.median_abs_error, 100 * floor.max_abs_error, 100 * floor.max_abs_error_low,
                  100 * floor.max_abs_error_high, floor.kendall_tau, floor.kendall_tau_low, floor.kendall_tau_high, floor.draws);
    result += text;
  }
  if (summary.base_runs > 0 && 2 * summary.base_runs_near_median <= summary.base_runs) {
    std::snprintf(text, sizeof text,
                  "\nWarning: only %d of the base configuration's %d runs lie within %.0f%% of their median (they spread "
                  "%.0f%%, max - min over the median): the machine was not steady while the calibration ran, and the "
                  "predictions (each the median over one calibration per run) may carry a slow or quick state. Run the "
                  "matrix again when the machine is quiet, or "
                  "with more --base-runs.",
                  summary.base_runs_near_median, summary.base_runs, 100 * kSteadyBand, 100 * summary.base_spread);
    result += text;
  }
  if (!summary.oversubscribed.empty()) {
    std::string names;
    for (const std::string& name : summary.oversubscribed) names += (names.empty() ? "" : ", ") + name;
    result += "\nNote: " + std::to_string(summary.oversubscribed.size()) + " configuration" +
              (summary.oversubscribed.size() > 1 ? "s" : "") +
              " ran more worker processes than the machine has cores (" + names +
              "): the processes took turns on the cores, which the twin models as a cost per wake-up on busy cores "
              "(--busy-wake-ms, fitted on a 2-core machine); their predictions are the least certain (bench/README.md).";
  }
  if (!summary.costlier_compute.empty()) {
    std::string names;
    char excess[32];
    for (const auto& [name, more] : summary.costlier_compute) {
      std::snprintf(excess, sizeof excess, " +%.0f%%", 100 * more);
      names += (names.empty() ? "" : ", ") + name;
      names += excess;
    }
    result += "\nNote: in " + std::to_string(summary.costlier_compute.size()) + " configuration" +
              (summary.costlier_compute.size() > 1 ? "s" : "") +
              " the compute cost more CPU per unit of work than in the base's runs (" + names +
              "; column CPU/work): the machine computed slower then (a slow spell, or processes sharing its caches), "
              "which the twin, charging the calibration's work, does not predict; those predictions lean fast.";
  }
  if (summary.set_aside_runs > 0 || summary.runs_in_slow_spell > 0) {
    const int in_spell = summary.set_aside_runs - summary.costlier_set_aside;
    const bool one = summary.set_aside_runs == 1;
    result += "\nNote: " + std::to_string(summary.set_aside_runs) + (one ? " take" : " takes") + " of runs " +
              (one ? "was" : "were") + " set aside and taken again (set-aside-R-K.jsonl; column set_aside_runs): ";
    if (in_spell > 0) result += std::to_string(in_spell) + " ended in a slow spell of the machine (a core slower than usual)";
    if (in_spell > 0 && summary.costlier_set_aside > 0) result += ", ";
    if (summary.costlier_set_aside > 0) {
      result += std::to_string(summary.costlier_set_aside) +
                " computed costlier per unit of work than the machine's usual state (the base's quicker runs) beyond "
                "the matrix's tolerance (a slower state within the run)";
    }
    if (summary.runs_in_slow_spell > 0) {
      result += "; " + std::to_string(summary.runs_in_slow_spell) + " run" + (summary.runs_in_slow_spell == 1 ? "" : "s") +
                " kept although still in a slow spell after the last take (column runs_in_slow_spell)";
    }
    result += ".";
  }
  if (!summary.still_costlier.empty()) {
    std::string names;
    int runs = 0;
    for (const auto& [name, count] : summary.still_costlier) {
      names += (names.empty() ? "" : ", ") + name + ": " + std::to_string(count);
      runs += count;
    }
    result += "\nNote: " + std::to_string(runs) + (runs == 1 ? " run was" : " runs were") +
              " kept although computing costlier per unit of work than the machine's usual state by more than the "
              "matrix's tolerance (" + names + "; runs_still_costlier in matrix.json; the last take of a run is kept): "
              "those configurations' medians may lean slow, and the base's such runs give slow calibrations.";
  }
  return result;
}

}  // namespace pipetwin
