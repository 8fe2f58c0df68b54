// Noise floor — what a twin exact to the machine's mean would score against the runs a matrix
// measured: how much of a prediction's error and disorder the machine's own run-to-run noise makes.
// Such a twin predicts each configuration's true time (taken as the median of its runs), scaled by
// the noise of its calibration (the median of a draw of the base's runs over the median of them all);
// it is compared with the median of a draw of each configuration's runs. Draws are bootstrap
// resamples (as many runs as there are, with replacement) from a fixed seed: the same runs give the
// same figures. An error or tau within the floor's range cannot be told from the machine's noise.
#pragma once

#include <vector>

namespace pipetwin {

constexpr int kNoiseFloorDraws = 1000;

struct NoiseFloor {
  int draws = 0;  // 0: nothing to draw from (no configuration out of sample)
  // Over the draws, the median of each figure and, for the largest |error| and tau, the 10th and 90th
  // percentiles: the figures' medians are what such a twin typically scores here.
  double median_abs_error = 0.0, max_abs_error = 0.0, kendall_tau = 0.0;
  double max_abs_error_low = 0.0, max_abs_error_high = 0.0;
  double kendall_tau_low = 0.0, kendall_tau_high = 0.0;
};

// base_runs_s: the calibration's configuration's runs (empty: the calibration carries no noise);
// runs_s: each out-of-sample configuration's runs (time per iteration, each non-empty).
NoiseFloor noise_floor(const std::vector<double>& base_runs_s, const std::vector<std::vector<double>>& runs_s,
                       int draws = kNoiseFloorDraws);

}  // namespace pipetwin
