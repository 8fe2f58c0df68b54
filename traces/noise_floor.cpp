#include "traces/noise_floor.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>

#include "traces/prediction_accuracy.h"

namespace pipetwin {

namespace {

constexpr std::uint64_t kNoiseFloorSeed = 20261207;

// The median of a bootstrap resample of `runs_s`: as many draws as runs, with replacement.
double resampled_median(const std::vector<double>& runs_s, std::mt19937_64& random) {
  std::vector<double> drawn(runs_s.size());
  for (double& value : drawn) value = runs_s[random() % runs_s.size()];
  return median_of(std::move(drawn));
}

}  // namespace

NoiseFloor noise_floor(const std::vector<double>& base_runs_s, const std::vector<std::vector<double>>& runs_s, int draws) {
  NoiseFloor floor;
  if (runs_s.empty() || draws <= 0) return floor;
  std::vector<double> true_s;
  for (const std::vector<double>& runs : runs_s) true_s.push_back(median_of(runs));
  const double base_true_s = base_runs_s.empty() ? 1.0 : median_of(base_runs_s);
  std::mt19937_64 random(kNoiseFloorSeed);
  std::vector<double> medians, maxima, taus;
  for (int draw = 0; draw < draws; ++draw) {
    const double calibration_scale = base_runs_s.empty() ? 1.0 : resampled_median(base_runs_s, random) / base_true_s;
    std::vector<double> predicted_s, measured_s, errors;
    for (std::size_t k = 0; k < runs_s.size(); ++k) {
      predicted_s.push_back(true_s[k] * calibration_scale);
      measured_s.push_back(resampled_median(runs_s[k], random));
      errors.push_back(std::fabs(predicted_s.back() / measured_s.back() - 1.0));
    }
    medians.push_back(median_of(errors));
    maxima.push_back(*std::max_element(errors.begin(), errors.end()));
    taus.push_back(kendall_tau(predicted_s, measured_s));
  }
  floor.draws = draws;
  floor.median_abs_error = median_of(medians);
  floor.max_abs_error = median_of(maxima);
  floor.kendall_tau = median_of(taus);
  floor.max_abs_error_low = quantile(maxima, 0.1);
  floor.max_abs_error_high = quantile(maxima, 0.9);
  floor.kendall_tau_low = quantile(taus, 0.1);
  floor.kendall_tau_high = quantile(taus, 0.9);
  return floor;
}

}  // namespace pipetwin
