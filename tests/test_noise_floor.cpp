// The noise floor (traces/noise_floor.h): what a twin exact to the machine's mean scores against the
// runs, by bootstrap draws. Each case's draws take values whose probabilities are known exactly
// (the median of three draws from {x, x, y} is y with probability 7/27 = 0.26), far enough from the
// 10th, 50th and 90th percentiles that 1000 draws land each figure on one value.
#include "traces/noise_floor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "traces/prediction_accuracy.h"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;

TEST(NoiseFloor, RunsWithoutSpreadScoreExactly) {
  const NoiseFloor floor = noise_floor({1.0, 1.0, 1.0}, {{2.0, 2.0, 2.0}, {3.0, 3.0}, {1.5}});
  EXPECT_EQ(floor.draws, kNoiseFloorDraws);
  EXPECT_EQ(floor.median_abs_error, 0.0);
  EXPECT_EQ(floor.max_abs_error_high, 0.0);
  EXPECT_EQ(floor.kendall_tau_low, 1.0);  // the true order every time
  EXPECT_EQ(noise_floor({1.0}, {}).draws, 0);
}

// The base's runs 2, 2, 3: a draw's calibration is 1.5 times too slow with probability 7/27, and
// every configuration's prediction with it (their order unchanged).
TEST(NoiseFloor, TheCalibrationsNoiseMovesEveryPrediction) {
  const NoiseFloor floor = noise_floor({2.0, 2.0, 3.0}, {{1.0, 1.0, 1.0}, {4.0, 4.0, 4.0}});
  EXPECT_EQ(floor.median_abs_error, 0.0);
  EXPECT_EQ(floor.max_abs_error, 0.0);
  EXPECT_EQ(floor.max_abs_error_low, 0.0);
  EXPECT_DOUBLE_EQ(floor.max_abs_error_high, 0.5);
  EXPECT_EQ(floor.kendall_tau_low, 1.0);
}

// b's runs 0.5, 2, 2 (true 2): its measured median is 0.5 with probability 7/27, an error of
// 2 / 0.5 - 1 = 3 and the order of a (1) and b reversed.
TEST(NoiseFloor, ARunsNoiseCanReverseTheOrder) {
  const NoiseFloor floor = noise_floor({}, {{1.0, 1.0, 1.0}, {0.5, 2.0, 2.0}});
  EXPECT_EQ(floor.median_abs_error, 0.0);
  EXPECT_EQ(floor.max_abs_error, 0.0);
  EXPECT_DOUBLE_EQ(floor.max_abs_error_high, 3.0);
  EXPECT_EQ(floor.kendall_tau, 1.0);
  EXPECT_EQ(floor.kendall_tau_low, -1.0);
  EXPECT_EQ(floor.kendall_tau_high, 1.0);
  // The same runs, the same figures (a fixed seed).
  const NoiseFloor again = noise_floor({}, {{1.0, 1.0, 1.0}, {0.5, 2.0, 2.0}});
  EXPECT_EQ(again.max_abs_error_high, floor.max_abs_error_high);
  EXPECT_EQ(again.kendall_tau_low, floor.kendall_tau_low);
}

TEST(NoiseFloor, TheMatrixSummaryCarriesAndTellsIt) {
  std::vector<ConfigurationAccuracy> rows(3);
  rows[0] = {"base", true, 1.0, {2.0, 2.0, 3.0}};
  rows[1] = {"a", false, 1.0, {1.0, 1.0, 1.0}};
  rows[2] = {"b", false, 4.0, {4.0, 4.0, 4.0}};
  const AccuracySummary summary = summarize_accuracy(rows);
  EXPECT_EQ(summary.noise_floor.draws, kNoiseFloorDraws);
  EXPECT_DOUBLE_EQ(summary.noise_floor.max_abs_error_high, 0.5);  // the base's noise, as above
  EXPECT_THAT(accuracy_text(summary), HasSubstr("\nNoise floor: a twin exact to this machine's mean would score median |error| "
                                                "0.0%, max |error| 0.0% (0.0-50.0%), Kendall tau 1.00 (1.00-1.00) against these "
                                                "runs (1000 bootstrap draws"));
}

}  // namespace
}  // namespace pipetwin
