// fit_link recovers a link's latency and bandwidth from message times, exactly on synthetic times,
// and weighs every size alike: a 1% error at the largest size does not move the small sizes' latency.
#include "traces/link_fit.h"

#include <gtest/gtest.h>

#include "planner/error.h"

namespace pipetwin {
namespace {

TEST(LinkFit, RecoversLatencyAndBandwidthExactly) {
  const double latency_s = 25e-6, bandwidth = 3.2e9;
  std::vector<double> bytes, seconds;
  for (double size = 1024; size <= 64 << 20; size *= 4) bytes.push_back(size), seconds.push_back(latency_s + size / bandwidth);
  const LinkFit fit = fit_link(bytes, seconds);
  EXPECT_NEAR(fit.latency_s, latency_s, 1e-12);
  EXPECT_NEAR(fit.bandwidth_bytes_per_s, bandwidth, 1e-3);
  EXPECT_NEAR(fit.rms_relative_error, 0.0, 1e-9);
}

// Two sizes: the line through both points, whose latency 1e-9 - 1e3 (1e-3 - 1e-9) / (1e6 - 1e3) is
// negative: clamped to 0, the slope refitted through the origin, sum(b / t) / sum(b^2 / t^2).
TEST(LinkFit, ANegativeInterceptIsClampedAndTheSlopeRefitted) {
  const LinkFit fit = fit_link({1e3, 1e6}, {1e-9, 1e-3});
  EXPECT_EQ(fit.latency_s, 0.0);
  const double slope = (1e3 / 1e-9 + 1e6 / 1e-3) / (1e6 / 1e-18 + 1e12 / 1e-6);
  EXPECT_NEAR(fit.bandwidth_bytes_per_s, 1.0 / slope, 1e-6 / slope);
}

TEST(LinkFit, EverySizeCountsAlike) {
  const double latency_s = 50e-6, bandwidth = 4e9;
  std::vector<double> bytes, seconds;
  for (double size = 1024; size <= 64 << 20; size *= 4) bytes.push_back(size), seconds.push_back(latency_s + size / bandwidth);
  seconds.back() *= 1.01;  // the 64 MB time 1% slow
  const LinkFit fit = fit_link(bytes, seconds);
  EXPECT_NEAR(fit.latency_s, latency_s, 0.01 * latency_s);
  EXPECT_LT(fit.rms_relative_error, 0.01);
}

TEST(LinkFit, TooFewSizesOrFlatTimesAreRefused) {
  EXPECT_THROW(fit_link({1e3, 1e3}, {1e-3, 2e-3}), Error);
  EXPECT_THROW(fit_link({1e3, 1e6}, {1e-3, 1e-3}), Error);
  EXPECT_THROW(fit_link({1e3}, {1e-3, 2e-3}), Error);
}

}  // namespace
}  // namespace pipetwin
