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

// Times of 2 and 3 processes made of the ring on a 30 us, 4e9 B/s link plus 0.5 ms + 2.5e-10 s per
// byte: the overhead is recovered exactly; the same times with the runtime as fast as the ring give
// zero; a residual that falls with the size (no line) gives its median as the overhead alone.
TEST(AllReduceOverhead, RecoversTheRuntimesCostBeyondTheRing) {
  const LinkFit link{30e-6, 4e9, 0.0};
  auto ring = [&](double bytes, int g) { return 2.0 * (g - 1) / g * bytes / 4e9 + 2.0 * (g - 1) * 30e-6; };
  std::vector<AllReduceTimes> groups, as_fast, flat;
  for (int g = 2; g <= 3; ++g) {
    AllReduceTimes times{g, {4096, 65536, 1 << 20, 16 << 20}, {}};
    AllReduceTimes ring_only = times, constant = times;
    for (double bytes : times.bytes) {
      times.seconds.push_back(ring(bytes, g) + 0.5e-3 + 2.5e-10 * bytes);
      ring_only.seconds.push_back(ring(bytes, g));
      constant.seconds.push_back(ring(bytes, g) + 3e-3 - 5e-11 * bytes);
    }
    groups.push_back(times), as_fast.push_back(ring_only), flat.push_back(constant);
  }
  const AllReduceOverhead fitted = fit_all_reduce_overhead(groups, link);
  EXPECT_NEAR(fitted.overhead_s, 0.5e-3, 1e-12);
  EXPECT_NEAR(fitted.s_per_byte, 2.5e-10, 1e-20);
  const AllReduceOverhead none = fit_all_reduce_overhead(as_fast, link);
  EXPECT_EQ(none.overhead_s, 0.0);
  EXPECT_EQ(none.s_per_byte, 0.0);
  const AllReduceOverhead fixed = fit_all_reduce_overhead(flat, link);
  // Eight residuals, two per size: the median lies between those of 64 KB and 1 MB.
  EXPECT_NEAR(fixed.overhead_s, 3e-3 - 5e-11 * (65536 + (1 << 20)) / 2, 1e-12);
  EXPECT_EQ(fixed.s_per_byte, 0.0);
}

TEST(AllReduceOverhead, IsReadFromAProbeFileOrAbsent) {
  nlohmann::json probe = {{"format", "pipetwin.probe/1"}};
  EXPECT_FALSE(probed_all_reduce_overhead(probe, "p.json").has_value());
  probe["all_reduce"] = {{"bytes", {4096, 65536}}, {"overhead_s", 4e-4}, {"s_per_byte", 1e-9}};
  const auto overhead = probed_all_reduce_overhead(probe, "p.json");
  ASSERT_TRUE(overhead.has_value());
  EXPECT_EQ(overhead->overhead_s, 4e-4);
  EXPECT_EQ(overhead->s_per_byte, 1e-9);
  probe["all_reduce"]["overhead_s"] = -1.0;
  try {
    probed_all_reduce_overhead(probe, "p.json");
    ADD_FAILURE() << "a negative overhead was taken";
  } catch (const Error& error) {
    EXPECT_EQ(error.context().file, "p.json");
    EXPECT_EQ(error.context().field, "all_reduce.overhead_s");
  }
}

}  // namespace
}  // namespace pipetwin
