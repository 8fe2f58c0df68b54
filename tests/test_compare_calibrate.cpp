// compare and calibrate on synthetic traces whose offsets, scales and link figures are known.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "planner/error.h"
#include "traces/calibration.h"
#include "traces/trace_compare.h"
#include "traces/trace_metrics.h"
#include "sim_support.h"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;

// Two workers, two stages, three iterations of F then B on each, back to back.
Trace synthetic(double scale, double shift) {
  Trace trace;
  trace.header = {"simulated", "m", "c", "1f1b", 2, 2, 2, 8, 3, 1, nlohmann::json::object()};
  double t = 0.0;
  for (int iteration = 0; iteration < 3; ++iteration) {
    for (int b = 0; b < 2; ++b) {
      for (int w = 0; w < 2; ++w) {
        trace.events.push_back({w, w, "FORWARD", b, iteration, shift + scale * t, shift + scale * (t + 1.0), 0, -1});
        t += 1.0;
      }
      for (int w = 1; w >= 0; --w) {
        trace.events.push_back({w, w, "BACKWARD", b, iteration, shift + scale * t, shift + scale * (t + 2.0), 0, -1});
        t += 2.0;
      }
    }
  }
  sort_events(trace);
  return trace;
}

TEST(Compare, AScaledMeasurementGivesThatErrorEverywhere) {
  const Trace predicted = synthetic(1.0, 0.0);
  Trace measured = synthetic(1.25, 0.0);
  measured.header.source = "measured";
  const Comparison c = compare_traces(predicted, measured);
  EXPECT_NEAR(c.iteration_error, 1 / 1.25 - 1, 1e-12);
  EXPECT_EQ(c.aligned, static_cast<int>(predicted.events.size()));
  EXPECT_EQ(c.predicted_only + c.measured_only, 0);
  ASSERT_EQ(c.kinds.size(), 2u);
  for (const KindError& k : c.kinds) {
    EXPECT_NEAR(k.median_error, -0.2, 1e-12) << k.kind;
    EXPECT_NEAR(k.p90_abs_error, 0.2, 1e-12);
  }
  EXPECT_THAT(c.verdict, HasSubstr("poor"));
  EXPECT_THAT(comparison_text(c), HasSubstr("iteration time error: -20.0%"));
  EXPECT_EQ(comparison_to_json(c).at("aligned"), c.aligned);
}

TEST(Compare, AShiftedMeasurementDriftsButKeepsDurations) {
  const Trace predicted = synthetic(1.0, 0.0);
  const Comparison c = compare_traces(predicted, synthetic(1.0, 0.0));
  EXPECT_NEAR(c.iteration_error, 0.0, 1e-12);
  EXPECT_THAT(c.verdict, HasSubstr("good"));
  for (double drift : c.stage_drift_s) EXPECT_NEAR(drift, 0.0, 1e-12);
  Trace other = synthetic(1.0, 0.0);
  other.header.workers = 3;
  EXPECT_THROW(compare_traces(predicted, other), Error);
}

TEST(Calibrate, RecoversComputeScaleOverheadAndBandwidth) {
  const Plan plan = testing::hand_plan({{{0}, 0.01, 0.02, 1e6, 0}, {{1}, 0.005, 0.01, 0, 0}}, 2);
  Trace measured;
  measured.header = {"measured", "m", "c", "1f1b", 2, 2, 4, 8, 1, 0, nlohmann::json::object()};
  const double scale = 1.7, overhead = 2e-4, bandwidth = 3e9;
  double t = 0.0;
  const double sizes[] = {1e5, 1e6, 4e6, 2e6};
  for (int b = 0; b < 4; ++b) {
    measured.events.push_back({0, 0, "FORWARD", b, 0, t, t + scale * 0.01, 0, -1});
    measured.events.push_back({1, 1, "BACKWARD", b, 0, t, t + scale * 0.01, 0, -1});
    measured.events.push_back({1, 1, "FORWARD", b, 0, t, t + scale * 0.005, 0, -1});
    const double transfer = overhead + sizes[b] / bandwidth;
    measured.events.push_back({0, 0, "SEND_ACT", b, 0, t + 1, t + 1, sizes[b], 1});
    measured.events.push_back({1, 1, "RECV_ACT", b, 0, t + 0.999, t + 1 + transfer, sizes[b], 0});
    t += 2.0;
  }
  const Cluster cluster = testing::link_cluster({{2, 1e9, 1e-3}});
  const Calibration c = calibrate(measured, plan, cluster);
  EXPECT_NEAR(c.compute_scale, scale, 0.01 * scale);
  EXPECT_NEAR(c.message_overhead_s, overhead, 0.01 * overhead);
  EXPECT_NEAR(c.bandwidth_bytes_per_s, bandwidth, 0.01 * bandwidth);
  EXPECT_EQ(c.compute_samples, 12);
  EXPECT_EQ(c.transfer_samples, 4);
  const Cluster calibrated = calibrated_cluster(cluster, c);
  EXPECT_NEAR(calibrated.device().speed, 1 / scale, 1e-9);
  EXPECT_NEAR(calibrated.levels()[0].latency_s, overhead, 0.01 * overhead);
  EXPECT_NEAR(calibrated.levels()[0].bandwidth_bytes_per_s, bandwidth, 0.01 * bandwidth);
  EXPECT_NEAR(calibrated.device().action_overhead_s, c.action_overhead_s, 1e-15);
  measured.events.clear();
  EXPECT_THROW(calibrate(measured, plan, cluster), Error);
}

TEST(Calibrate, TimeBetweenActionsIsTheRuntimesOverhead) {
  const Plan plan = testing::hand_plan({{{0}, 0.01, 0.02, 0, 0}}, 1);
  Trace measured;
  measured.header = {"measured", "m", "c", "gpipe", 1, 1, 4, 8, 1, 0, nlohmann::json::object()};
  double t = 0.0;
  for (int b = 0; b < 4; ++b) {  // F and B back to back with 3e-4 s between every two actions
    measured.events.push_back({0, 0, "FORWARD", b, 0, t, t + 0.01, 0, -1});
    t += 0.01 + 3e-4;
    measured.events.push_back({0, 0, "BACKWARD", b, 0, t, t + 0.02, 0, -1});
    t += 0.02 + 3e-4;
  }
  const Calibration c = calibrate(measured, plan, testing::link_cluster({{1, 1e9, 0.0}}));
  EXPECT_NEAR(c.action_overhead_s, 3e-4 * 7 / 8, 1e-12);  // 7 gaps over 8 actions
  EXPECT_NEAR(c.compute_scale, 1.0, 1e-12);
}

}  // namespace
}  // namespace pipetwin
