// compare and calibrate on synthetic traces whose offsets, scales and link figures are known.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "planner/error.h"
#include "planner/schedule_evaluator.h"
#include "traces/calibration.h"
#include "traces/calibration_report.h"
#include "traces/receive_wait_fit.h"
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
        trace.events.push_back({w, w, ActionKind::FORWARD, b, iteration, shift + scale * t, shift + scale * (t + 1.0), 0, -1});
        t += 1.0;
      }
      for (int w = 1; w >= 0; --w) {
        trace.events.push_back({w, w, ActionKind::BACKWARD, b, iteration, shift + scale * t, shift + scale * (t + 2.0), 0, -1});
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
  // Every measured event of stage 1 starts 0.5 s later than predicted, with the same durations; the
  // iterations still end when stage 0's last backward does, so only stage 1 drifts (by -0.5 s:
  // predicted minus measured).
  const Trace predicted = synthetic(1.0, 0.0);
  Trace measured = synthetic(1.0, 0.0);
  for (TraceEvent& e : measured.events) {
    if (e.stage != 1) continue;
    e.start_s += 0.5;
    e.end_s += 0.5;
  }
  const Comparison c = compare_traces(predicted, measured);
  EXPECT_NEAR(c.iteration_error, 0.0, 1e-12);
  EXPECT_THAT(c.verdict, HasSubstr("good"));
  EXPECT_EQ(c.aligned, static_cast<int>(measured.events.size()));
  ASSERT_EQ(c.stage_drift_s.size(), 2u);
  EXPECT_NEAR(c.stage_drift_s[0], 0.0, 1e-12);
  EXPECT_NEAR(c.stage_drift_s[1], -0.5, 1e-12);
  ASSERT_FALSE(c.kinds.empty());
  for (const KindError& k : c.kinds) EXPECT_NEAR(k.median_error, 0.0, 1e-12) << k.kind;
  Trace other = synthetic(1.0, 0.0);
  other.header.workers = 3;
  EXPECT_THROW(compare_traces(predicted, other), Error);
}

Plan load_plan_text_round_trip(const Plan& plan) { return plan_from_json(plan_to_json(plan), "p.json"); }

// Two stages, four microbatches of 1e5, 1e6, 4e6 and 2e6 bytes, compute `scale` times the plan's, each
// message overhead + bytes / bandwidth after its send posted (`posting`), the receiver waiting.
constexpr double kSizes[] = {1e5, 1e6, 4e6, 2e6};
const Plan& two_stage_plan() {
  static const Plan plan = testing::hand_plan({{{0}, 0.01, 0.02, 1e6, 0}, {{1}, 0.005, 0.01, 0, 0}}, 2);
  return plan;
}
Trace measured_transfers(double scale, double overhead, double bandwidth, double posting) {
  Trace measured;
  measured.header = {"measured", "hand", "c", "1f1b", 2, 2, 4, 8, 1, 0, nlohmann::json::object()};
  double t = 0.0;
  for (int b = 0; b < 4; ++b) {
    measured.events.push_back({0, 0, ActionKind::FORWARD, b, 0, t, t + scale * 0.01, 0, -1});
    measured.events.push_back({1, 1, ActionKind::BACKWARD, b, 0, t, t + scale * 0.01, 0, -1});
    measured.events.push_back({1, 1, ActionKind::FORWARD, b, 0, t, t + scale * 0.005, 0, -1});
    const double transfer = overhead + kSizes[b] / bandwidth;
    measured.events.push_back({0, 0, ActionKind::SEND_ACT, b, 0, t + 1, t + 1 + posting, kSizes[b], 1, b});
    measured.events.push_back({1, 1, ActionKind::RECV_ACT, b, 0, t + 0.999, t + 1 + posting + transfer, kSizes[b], 0, b});
    t += 2.0;
  }
  return measured;
}

TEST(Calibrate, RecoversComputeScaleOverheadAndBandwidth) {
  const Plan& plan = two_stage_plan();
  const double scale = 1.7, overhead = 2e-4, bandwidth = 3e9, posting = 5e-5;
  Trace measured = measured_transfers(scale, overhead, bandwidth, posting);
  const Cluster cluster = testing::link_cluster({{2, 1e9, 1e-3}});
  const Calibration c = calibrate(measured, plan, cluster);
  EXPECT_NEAR(c.compute_scale, scale, 0.01 * scale);
  EXPECT_NEAR(c.message_overhead_s, overhead, 0.01 * overhead);
  EXPECT_NEAR(c.bandwidth_bytes_per_s, bandwidth, 0.01 * bandwidth);
  EXPECT_NEAR(c.send_overhead_s, posting, 0.01 * posting);
  EXPECT_EQ(c.send_samples, 4);
  EXPECT_EQ(c.recv_samples, 0);  // every receiver was waiting
  EXPECT_EQ(c.compute_samples, 12);
  EXPECT_EQ(c.transfer_samples, 4);
  const Cluster calibrated = calibrated_cluster(cluster, c);
  EXPECT_NEAR(calibrated.device().speed, 1 / scale, 1e-9);
  EXPECT_NEAR(calibrated.levels()[0].latency_s, overhead, 0.01 * overhead);
  EXPECT_NEAR(calibrated.levels()[0].bandwidth_bytes_per_s, bandwidth, 0.01 * bandwidth);
  EXPECT_NEAR(calibrated.device().action_overhead_s, c.action_overhead_s, 1e-15);
  EXPECT_NEAR(calibrated.device().send_overhead_s, posting, 0.01 * posting);
  measured.events.clear();
  EXPECT_THROW(calibrate(measured, plan, cluster), Error);
}

// A probed link (probe --messages: 30 us, 4e9 B/s) sets the bandwidth; the trace, whose transfers
// went at 3e9 B/s after 2e-4 s, fits only the overhead against 4e9: the mean transfer less the mean
// size over 4e9, 2e-4 + 1.775e6 (1/3e9 - 1/4e9) s. The probed latency loses the device's overheads.
TEST(Calibrate, AProbedLinkKeepsItsBandwidthAndTheTraceFitsTheOverhead) {
  const LinkFit probed{30e-6, 4e9, 0.0};
  const Cluster probed_cluster = with_probed_link(testing::link_cluster({{2, 1e9, 1e-3}}), probed);
  EXPECT_EQ(probed_cluster.levels()[0].bandwidth_bytes_per_s, 4e9);
  EXPECT_EQ(probed_cluster.levels()[0].latency_s, 30e-6);
  const Calibration c = calibrate(measured_transfers(1.0, 2e-4, 3e9, 5e-5), two_stage_plan(), probed_cluster,
                                  LinkTerms::kOverheadOnly);
  const double mean_bytes = (1e5 + 1e6 + 4e6 + 2e6) / 4;
  EXPECT_NEAR(c.message_overhead_s, 2e-4 + mean_bytes * (1 / 3e9 - 1 / 4e9), 1e-12);
  EXPECT_EQ(c.bandwidth_bytes_per_s, 0.0);  // not fitted
  const Cluster calibrated = calibrated_cluster(probed_cluster, c);
  EXPECT_EQ(calibrated.levels()[0].bandwidth_bytes_per_s, 4e9);
  EXPECT_NEAR(calibrated.levels()[0].latency_s, c.message_overhead_s, 1e-15);
  // The one-way latency of a ping-pong includes posting the message (the receiver waits: no taking
  // overhead): with the device's 5 us of posting, 25 us is left.
  DeviceSpec device = calibrated.device();
  device.send_overhead_s = 5e-6;
  device.recv_overhead_s = 7e-6;
  const Cluster with_overheads("c", "", device, calibrated.levels());
  EXPECT_NEAR(with_probed_link(with_overheads, probed).levels()[0].latency_s, 25e-6, 1e-15);
  EXPECT_EQ(with_probed_link(with_overheads, {1e-6, 4e9, 0.0}).levels()[0].latency_s, 0.0);
  // A probe that timed posting (4 us) and taking (9 us) sets the device's overheads: 26 us left.
  const Cluster timed = with_probed_link(with_overheads, {30e-6, 4e9, 0.0, 4e-6, 9e-6});
  EXPECT_EQ(timed.device().send_overhead_s, 4e-6);
  EXPECT_EQ(timed.device().recv_overhead_s, 9e-6);
  EXPECT_NEAR(timed.levels()[0].latency_s, 26e-6, 1e-15);
  EXPECT_EQ(timed.device().message_cpu_s, 0.0);  // not measured: none
  // A probe that counted each message's CPU (80 us + 0.4 ns a byte) sets the device's.
  LinkFit counted{30e-6, 4e9, 0.0, 4e-6, 9e-6};
  counted.message_cpu_s = 80e-6;
  counted.message_cpu_s_per_byte = 4e-10;
  const Cluster costed = with_probed_link(with_overheads, counted);
  EXPECT_EQ(costed.device().message_cpu_s, 80e-6);
  EXPECT_EQ(costed.device().message_cpu_s_per_byte, 4e-10);
  // A trace without sends keeps them (nothing to fit them from); one with sends refits.
  Calibration no_messages;
  EXPECT_EQ(calibrated_network(timed, no_messages).device().send_overhead_s, 4e-6);
  EXPECT_EQ(calibrated_network(timed, no_messages).device().recv_overhead_s, 9e-6);
  EXPECT_EQ(calibrated_network(timed, c).device().send_overhead_s, c.send_overhead_s);
}

TEST(Calibrate, AProbeWithoutMessagesOrWithABadLinkIsRefusedNamingTheField) {
  nlohmann::json probe = {{"format", "pipetwin.probe/1"}};
  try {
    probed_link(probe, "probe.json");
    ADD_FAILURE() << "a probe without messages was taken";
  } catch (const Error& error) {
    EXPECT_EQ(error.context().file, "probe.json");
    EXPECT_EQ(error.context().field, "messages");
    EXPECT_THAT(error.fix(), HasSubstr("--messages"));
  }
  probe["messages"] = {{"latency_s", 3e-5}, {"bandwidth_bytes_per_s", 0}};
  try {
    probed_link(probe, "probe.json");
    ADD_FAILURE() << "a zero bandwidth was taken";
  } catch (const Error& error) {
    EXPECT_EQ(error.context().field, "messages.bandwidth_bytes_per_s");
  }
  probe["messages"]["bandwidth_bytes_per_s"] = 5.5e9;
  const LinkFit link = probed_link(probe, "probe.json");
  EXPECT_EQ(link.latency_s, 3e-5);
  EXPECT_EQ(link.bandwidth_bytes_per_s, 5.5e9);
  EXPECT_EQ(link.message_cpu_s, 0.0);  // a probe from before the CPU was counted
  probe["messages"]["message_cpu_s"] = 7e-5;
  probe["messages"]["message_cpu_s_per_byte"] = 3e-10;
  EXPECT_EQ(probed_link(probe, "probe.json").message_cpu_s, 7e-5);
  EXPECT_EQ(probed_link(probe, "probe.json").message_cpu_s_per_byte, 3e-10);
  probe["messages"]["message_cpu_s_per_byte"] = -3e-10;
  try {
    probed_link(probe, "probe.json");
    ADD_FAILURE() << "a negative CPU per byte was taken";
  } catch (const Error& error) {
    EXPECT_EQ(error.context().field, "messages.message_cpu_s");
    EXPECT_THAT(error.fix(), HasSubstr("probe again"));
  }
}

// What each process holds beside its stages: the median of measured - modelled over the workers of
// every run, unknown peaks (-1) left out, never below 0.
TEST(Calibrate, RuntimeMemoryIsTheMedianOfWhatTheModelLeavesOut) {
  const std::vector<double> stages = {10e6, 4e6};
  EXPECT_DOUBLE_EQ(fit_runtime_memory_bytes(stages, {{13e6, 8e6}, {12e6, -1.0}}), 3e6);  // 3, 4, 2 MB
  EXPECT_DOUBLE_EQ(fit_runtime_memory_bytes(stages, {{13e6, 8e6}}), 3.5e6);              // 3, 4 MB
  EXPECT_DOUBLE_EQ(fit_runtime_memory_bytes(stages, {{9e6, 3e6}}), 0.0);                 // the model over
  EXPECT_DOUBLE_EQ(fit_runtime_memory_bytes(stages, {{-1.0, -1.0}}), 0.0);               // nothing measured
  EXPECT_DOUBLE_EQ(fit_runtime_memory_bytes(stages, {}), 0.0);
}

// calibrate() fits it from a trace's own peaks: two stages of 1F1B m=4, stage 0 keeping 2 microbatches
// of 2 MB in flight beside 1 MB of weights and 1 MB of momentum (6 MB), stage 1 one of 1 MB beside
// 0.5 + 0.5 MB (2 MB); measured peaks of 9 and 6 MB leave 3 and 4 MB: 3.5 MB, written into the cluster.
// A trace without peaks fits nothing and leaves the cluster's figure.
TEST(Calibrate, RuntimeMemoryComesFromTheTracesPeaksAndItsSchedulesMemory) {
  Plan plan = two_stage_plan();
  plan.stages[0].activation_bytes = 2e6;
  plan.stages[0].param_bytes = 1e6;  // momentum as large (optimizer_bytes absent)
  plan.stages[1].activation_bytes = 1e6;
  plan.stages[1].param_bytes = 0.5e6;
  Trace measured = measured_transfers(1.0, 2e-4, 3e9, 5e-5);
  const Cluster cluster = testing::link_cluster({{2, 1e9, 1e-3}});
  EXPECT_EQ(calibrate(measured, plan, cluster).runtime_memory_bytes, -1.0);
  EXPECT_EQ(calibrated_cluster(cluster, calibrate(measured, plan, cluster)).device().runtime_memory_bytes,
            cluster.device().runtime_memory_bytes);
  measured.header.extra["peak_memory_bytes"] = {9e6, 6e6};
  const Calibration c = calibrate(measured, plan, cluster);
  EXPECT_DOUBLE_EQ(c.runtime_memory_bytes, 3.5e6);
  EXPECT_DOUBLE_EQ(calibrated_cluster(cluster, c).device().runtime_memory_bytes, 3.5e6);
  measured.header.extra["peak_memory_bytes"] = {9e6, 6e6, 7e6, 7e6};  // one per rank of a tensor-parallel run
  EXPECT_EQ(calibrate(measured, plan, cluster).runtime_memory_bytes, -1.0);
}

// The workers' CPU beside their compute (process 100 and 90 s, compute 30 and 20: 140 s), less the
// runtime's own time the simulator spends as CPU (20 actions' overhead, 0.69 s each in this sparse
// trace, and 4 sends' posting; no receive found its message arrived), over the 4 messages: a
// message's CPU in the run, at their mean size (1.775 MB); never below 0 (40 ms beside compute). The calibrated device takes the probe's line through it, its shape kept; without a
// probed line, the figure alone. No figures, one per tensor-parallel rank, or an unread one (-1):
// nothing fitted.
TEST(Calibrate, MessageCpuIsTheWorkersCpuBesideComputeAndTheRuntimePerMessage) {
  const Plan& plan = two_stage_plan();
  Trace measured = measured_transfers(1.0, 2e-4, 3e9, 5e-5);
  const Cluster cluster = testing::link_cluster({{2, 1e9, 1e-3}});
  EXPECT_EQ(calibrate(measured, plan, cluster).message_cpu_samples, 0);
  measured.header.extra["process_cpu_s"] = {100.0, 90.0};
  measured.header.extra["compute_cpu_s"] = {30.0, 20.0};
  const Calibration c = calibrate(measured, plan, cluster);
  ASSERT_EQ(c.message_cpu_samples, 4);
  EXPECT_EQ(c.recv_samples, 0);
  EXPECT_NEAR(c.message_cpu_s, (140.0 - 20 * c.action_overhead_s - 4 * c.send_overhead_s) / 4, 1e-12);
  EXPECT_GT(c.message_cpu_s, 30.0);
  EXPECT_DOUBLE_EQ(c.message_cpu_bytes, (1e5 + 1e6 + 4e6 + 2e6) / 4);
  DeviceSpec device = cluster.device();
  device.message_cpu_s = 1e-4;
  device.message_cpu_s_per_byte = 1e-10;
  const DeviceSpec fitted = calibrated_network(cluster.with_device(device), c).device();
  EXPECT_NEAR(fitted.message_cpu_s + c.message_cpu_bytes * fitted.message_cpu_s_per_byte, c.message_cpu_s, 1e-12);
  EXPECT_NEAR(fitted.message_cpu_s / fitted.message_cpu_s_per_byte, 1e6, 1e-6);
  const DeviceSpec alone = calibrated_network(cluster, c).device();
  EXPECT_EQ(alone.message_cpu_s, c.message_cpu_s);
  EXPECT_EQ(alone.message_cpu_s_per_byte, 0.0);
  measured.header.extra["process_cpu_s"] = {0.05, 0.04};
  measured.header.extra["compute_cpu_s"] = {0.03, 0.02};
  EXPECT_EQ(calibrate(measured, plan, cluster).message_cpu_s, 0.0);
  EXPECT_EQ(calibrate(measured, plan, cluster).message_cpu_samples, 4);
  measured.header.extra["process_cpu_s"] = {0.05, 0.04, 0.05, 0.04};
  measured.header.extra["compute_cpu_s"] = {0.03, 0.02, 0.03, 0.02};
  EXPECT_EQ(calibrate(measured, plan, cluster).message_cpu_samples, 0);
  measured.header.extra["process_cpu_s"] = {0.05, -1.0};
  measured.header.extra["compute_cpu_s"] = {0.03, -1.0};
  EXPECT_EQ(calibrate(measured, plan, cluster).message_cpu_samples, 0);
}

// Two workers, one stage each (forward 10 / 30 ms, backward 20 / 40 ms, optimizer step 5 / 7 ms), two
// microbatches, two iterations, the first a warm-up: the measured iteration charges worker 0
// 2 x (10 + 20) + 5 = 65 ms and worker 1 2 x (30 + 40) + 7 = 147 ms, 212 ms; sends and receives
// charge nothing. Compute CPU of 0.1 and 0.154 s: 254 / 212. No figure for every worker, one per
// tensor-parallel rank, an unread one (-1) or no work: -1.
TEST(Calibrate, ComputeCpuPerWorkIsTheRunsComputeCpuOverTheWorkItsActionsAreCharged) {
  std::vector<StageTimes> times(2);
  times[0].forward_s = 0.010, times[0].backward_s = 0.020, times[0].optimizer_s = 0.005;
  times[1].forward_s = 0.030, times[1].backward_s = 0.040, times[1].optimizer_s = 0.007;
  Trace measured;
  measured.header = {"measured", "hand", "c", "gpipe", 2, 2, 2, 8, 2, 1, nlohmann::json::object()};
  for (int iteration = 0; iteration < 2; ++iteration) {
    for (int w = 0; w < 2; ++w) {
      for (int b = 0; b < 2; ++b) {
        measured.events.push_back({w, w, ActionKind::FORWARD, b, iteration, 0.0, 1.0, 0, -1});
        measured.events.push_back({w, w, ActionKind::BACKWARD, b, iteration, 0.0, 1.0, 0, -1});
      }
      measured.events.push_back({w, w, w == 0 ? ActionKind::SEND_ACT : ActionKind::RECV_ACT, 0, iteration, 0.0, 1.0, 1e6, 1 - w});
      measured.events.push_back({w, w, ActionKind::OPTIMIZER_STEP, -1, iteration, 0.0, 1.0, 0, -1});
    }
  }
  EXPECT_EQ(compute_cpu_per_work(measured, times), -1.0);
  measured.header.extra["compute_cpu_s"] = {0.1, 0.154};
  EXPECT_NEAR(compute_cpu_per_work(measured, times), 0.254 / 0.212, 1e-12);
  measured.header.warmup_iterations = 0;  // both iterations measured: twice the work
  EXPECT_NEAR(compute_cpu_per_work(measured, times), 0.254 / 0.424, 1e-12);
  measured.header.extra["compute_cpu_s"] = {0.1, 0.154, 0.1, 0.154};
  EXPECT_EQ(compute_cpu_per_work(measured, times), -1.0);
  measured.header.extra["compute_cpu_s"] = {0.1, -1.0};
  EXPECT_EQ(compute_cpu_per_work(measured, times), -1.0);
  measured.header.extra["compute_cpu_s"] = {0.1, 0.154};
  EXPECT_EQ(compute_cpu_per_work(measured, std::vector<StageTimes>(2)), -1.0);
}

// Each worker's compute CPU over its compute actions' wall time in the measured iterations (forward,
// backward and the optimizer step count; sends and receives do not): the same trace's worker 0
// computes 2 x 10 + 2 x 20 + 5 = 65 ms in iteration 1 and worker 1 147 ms, 52 and 73.5 ms of CPU: 0.8
// and 0.5. No figure for every worker: none; an unread one: -1 for that worker.
TEST(Calibrate, ComputeCoreShareIsEachWorkersComputeCpuOverItsComputingTime) {
  const double forward_s[] = {0.010, 0.030}, backward_s[] = {0.020, 0.040}, step_s[] = {0.005, 0.007};
  Trace measured;
  measured.header = {"measured", "hand", "c", "gpipe", 2, 2, 2, 8, 2, 1, nlohmann::json::object()};
  for (int iteration = 0; iteration < 2; ++iteration) {
    for (int w = 0; w < 2; ++w) {
      double t = iteration;
      for (int b = 0; b < 2; ++b) {
        measured.events.push_back({w, w, ActionKind::FORWARD, b, iteration, t, t + forward_s[w], 0, -1});
        t += forward_s[w] + 0.1;  // waits between actions do not count
        measured.events.push_back({w, w, ActionKind::BACKWARD, b, iteration, t, t + backward_s[w], 0, -1});
        t += backward_s[w] + 0.1;
      }
      measured.events.push_back({w, w, w == 0 ? ActionKind::SEND_ACT : ActionKind::RECV_ACT, 0, iteration, t, t + 0.3, 1e6, 1 - w});
      t += 0.3;
      measured.events.push_back({w, w, ActionKind::OPTIMIZER_STEP, -1, iteration, t, t + step_s[w], 0, -1});
    }
  }
  EXPECT_TRUE(compute_core_share(measured).empty());
  measured.header.extra["compute_cpu_s"] = {0.052, 0.0735};
  const std::vector<double> share = compute_core_share(measured);
  ASSERT_EQ(share.size(), 2u);
  EXPECT_NEAR(share[0], 0.8, 1e-12);
  EXPECT_NEAR(share[1], 0.5, 1e-12);
  measured.header.extra["compute_cpu_s"] = {0.052, -1.0};
  EXPECT_EQ(compute_core_share(measured), (std::vector<double>{compute_core_share(measured)[0], -1.0}));
  EXPECT_NEAR(compute_core_share(measured)[0], 0.8, 1e-12);
  measured.header.extra["compute_cpu_s"] = {0.052, 0.0735, 0.052, 0.0735};  // one per tensor-parallel rank
  EXPECT_TRUE(compute_core_share(measured).empty());
}

TEST(Calibrate, TimeBetweenActionsIsTheRuntimesOverhead) {
  const Plan plan = testing::hand_plan({{{0}, 0.01, 0.02, 0, 0}}, 1);
  Trace measured;
  measured.header = {"measured", "hand", "c", "gpipe", 1, 1, 4, 8, 1, 0, nlohmann::json::object()};
  double t = 0.0;
  for (int b = 0; b < 4; ++b) {  // F and B back to back with 3e-4 s between every two actions
    measured.events.push_back({0, 0, ActionKind::FORWARD, b, 0, t, t + 0.01, 0, -1});
    t += 0.01 + 3e-4;
    measured.events.push_back({0, 0, ActionKind::BACKWARD, b, 0, t, t + 0.02, 0, -1});
    t += 0.02 + 3e-4;
  }
  const Calibration c = calibrate(measured, plan, testing::link_cluster({{1, 1e9, 0.0}}));
  EXPECT_NEAR(c.action_overhead_s, 3e-4 * 7 / 8, 1e-12);  // 7 gaps over 8 actions
  EXPECT_NEAR(c.compute_scale, 1.0, 1e-12);
}

// Transfers are a send and the receive with its message id: two messages of 1 MB and 3 MB, the
// receiver already waiting, each taking 1e-4 s + bytes / 1e9 B/s after its send ends. Paired by id, the
// fit recovers both figures exactly; receives without an id are not paired with anything.
TEST(Calibrate, MatchesEachReceiveToItsSendByMessageId) {
  const Plan plan = testing::hand_plan({{{0}, 0.01, 0.02, 1e6, 0}, {{1}, 0.01, 0.02, 0, 0}}, 2);
  Trace measured;
  measured.header = {"measured", "hand", "c", "gpipe", 2, 2, 2, 8, 1, 0, nlohmann::json::object()};
  const double sizes[] = {1e6, 3e6};
  for (int b = 0; b < 2; ++b) {
    const double t = 1.0 + b;
    measured.events.push_back({0, 0, ActionKind::FORWARD, b, 0, t - 0.01, t, 0, -1});
    measured.events.push_back({0, 0, ActionKind::SEND_ACT, b, 0, t, t, sizes[b], 1, 10 + 7 * b});
    measured.events.push_back({1, 1, ActionKind::RECV_ACT, b, 0, t - 0.5, t + 1e-4 + sizes[b] / 1e9, sizes[b], 0, 10 + 7 * b});
  }
  const Cluster cluster = testing::link_cluster({{2, 1e8, 0.0}});
  const Calibration c = calibrate(measured, plan, cluster);
  EXPECT_EQ(c.transfer_samples, 2);
  EXPECT_NEAR(c.bandwidth_bytes_per_s, 1e9, 1e-3);
  EXPECT_NEAR(c.message_overhead_s, 1e-4, 1e-12);
  for (TraceEvent& e : measured.events) {
    if (is_receive(e.kind)) e.message = -1;  // a trace without ids: nothing to pair
  }
  EXPECT_EQ(calibrate(measured, plan, cluster).transfer_samples, 0);
}

TEST(Calibrate, ATraceOfAnotherModelOrCutIsRefusedNamingBoth) {
  const Plan plan = testing::hand_plan({{{0}, 0.01, 0.02, 1e6, 0}, {{1}, 0.01, 0.02, 0, 0}}, 2);
  Trace measured;
  measured.header = {"measured", "hand", "c", "gpipe", 2, 2, 2, 8, 1, 0, nlohmann::json::object()};
  measured.events.push_back({0, 0, ActionKind::FORWARD, 0, 0, 0.0, 0.01, 0, -1});
  const Cluster cluster = testing::link_cluster({{2, 1e9, 0.0}});
  EXPECT_NO_THROW(calibrate(measured, plan, cluster));
  for (const auto& [profile, stages] : std::vector<std::pair<std::string, int>>{{"vgg16", 2}, {"hand", 3}}) {
    Trace other = measured;
    other.header.profile = profile;
    other.header.stages = stages;
    try {
      calibrate(other, plan, cluster);
      ADD_FAILURE() << profile << " " << stages;
    } catch (const Error& error) {
      EXPECT_THAT(error.what(), HasSubstr("the trace is of a run of '" + profile + "' on " + std::to_string(stages) +
                                          " stages, the plan is of 'hand' on 2 stages"));
    }
  }
}

// Sends that cross one the other way (their postings overlap: Gloo stalls both) are told apart from
// the others: worker 0's sends post in 2e-4 and 4e-4 s and worker 1's first in 3e-4 s, crossing none
// (worker 0's two overlap each other, the same way; a receive overlapping a send is no send); the pair
// at t = 3 overlaps (3e-3 and 2.5e-3 s). Send overhead 3e-4 s, the crossing's 2.75e-3 - 3e-4 s more.
// The message CPU (199 s beside compute) takes out the posting of a send that crossed none: the
// stalls are CPU of the messages'. With every send crossing there is nothing to tell them apart by: the mean of all.
TEST(Calibrate, SendsThatCrossOneTheOtherWayAreToldApart) {
  const Plan plan = testing::hand_plan({{{0}, 0.01, 0.02, 1e6, 0}, {{1}, 0.01, 0.02, 0, 0}}, 2);
  Trace measured;
  measured.header = {"measured", "hand", "c", "1f1b", 2, 2, 4, 8, 1, 0, nlohmann::json::object()};
  measured.events = {
      {0, 0, ActionKind::FORWARD, 0, 0, 0.0, 0.01, 0, -1},
      {0, 0, ActionKind::SEND_ACT, 0, 0, 1.0, 1.0 + 2e-4, 1e6, 1, 0},
      {0, 0, ActionKind::SEND_ACT, 1, 0, 1.0 + 1e-4, 1.0 + 5e-4, 1e6, 1, 1},
      {1, 1, ActionKind::RECV_ACT, 0, 0, 0.9, 1.0 + 3e-4, 1e6, 0, 0},
      {1, 1, ActionKind::SEND_GRAD, 0, 0, 2.0, 2.0 + 3e-4, 1e6, 0, 2},
      {0, 0, ActionKind::SEND_ACT, 2, 0, 3.0, 3.0 + 3e-3, 1e6, 1, 3},
      {1, 1, ActionKind::SEND_GRAD, 1, 0, 3.0 + 1e-3, 3.0 + 3.5e-3, 1e6, 0, 4},
  };
  measured.header.extra["process_cpu_s"] = {100.0, 100.0};
  measured.header.extra["compute_cpu_s"] = {0.5, 0.5};
  const Cluster cluster = testing::link_cluster({{2, 1e9, 0.0}});
  const Calibration c = calibrate(measured, plan, cluster);
  EXPECT_EQ(c.send_samples, 5);
  EXPECT_EQ(c.send_crossing_samples, 2);
  EXPECT_NEAR(c.send_overhead_s, 3e-4, 1e-12);
  EXPECT_NEAR(c.send_crossing_s, 2.75e-3 - 3e-4, 1e-12);
  EXPECT_NEAR(calibrated_network(cluster, c).device().send_overhead_s, 3e-4, 1e-12);
  ASSERT_EQ(c.message_cpu_samples, 5);
  EXPECT_NEAR(c.message_cpu_s, (199.0 - 7 * c.action_overhead_s - 5 * 3e-4 - c.recv_samples * c.recv_overhead_s) / 5, 1e-12);
  EXPECT_THAT(calibration_text(c), HasSubstr("(5 sends; 2 crossed one the other way, 0.002450 s more)"));
  for (TraceEvent& e : measured.events) {  // every send crossing: 2e-4 .. 3.5e-3 s, all one way or the other at once
    if (!is_send(e.kind)) continue;
    const double posting_s = e.end_s - e.start_s;
    e.start_s = 5.0;
    e.end_s = 5.0 + posting_s;
  }
  const Calibration all = calibrate(measured, plan, cluster);
  EXPECT_EQ(all.send_crossing_samples, 0);
  EXPECT_EQ(all.send_crossing_s, 0.0);
  EXPECT_NEAR(all.send_overhead_s, (2e-4 + 4e-4 + 3e-4 + 3e-3 + 2.5e-3) / 5, 1e-12);
}

TEST(Calibrate, ReceivesOfArrivedMessagesGiveTheReceiveOverhead) {
  // Two transfers fit overhead 1e-4 s at the cluster's 1e9 B/s (same size: only the overhead is
  // fitted); two receives start long after their message arrived and take 3e-4 and 5e-4 s.
  const Plan plan = testing::hand_plan({{{0}, 0.01, 0.02, 1e6, 0}, {{1}, 0.01, 0.02, 0, 0}}, 2);
  Trace measured;
  measured.header = {"measured", "hand", "c", "gpipe", 2, 2, 4, 8, 1, 0, nlohmann::json::object()};
  const double transfer = 1e-4 + 1e6 / 1e9;
  const double late[] = {0, 0, 3e-4, 5e-4};
  for (int b = 0; b < 4; ++b) {
    const double t = 1.0 * b;
    measured.events.push_back({0, 0, ActionKind::FORWARD, b, 0, t, t + 0.01, 0, -1});
    measured.events.push_back({0, 0, ActionKind::SEND_ACT, b, 0, t + 0.01, t + 0.01, 1e6, 1, b});
    if (late[b] == 0) {
      measured.events.push_back({1, 1, ActionKind::RECV_ACT, b, 0, t, t + 0.01 + transfer, 1e6, 0, b});
    } else {
      measured.events.push_back({1, 1, ActionKind::RECV_ACT, b, 0, t + 0.5, t + 0.5 + late[b], 1e6, 0, b});
    }
  }
  const Calibration c = calibrate(measured, plan, testing::link_cluster({{2, 1e9, 0.0}}));
  EXPECT_EQ(c.transfer_samples, 2);
  EXPECT_NEAR(c.message_overhead_s, 1e-4, 1e-9);
  EXPECT_EQ(c.recv_samples, 2);
  EXPECT_NEAR(c.recv_overhead_s, 4e-4, 1e-12);
  EXPECT_NEAR(calibrated_cluster(testing::link_cluster({{2, 1e9, 0.0}}), c).device().recv_overhead_s, 4e-4, 1e-12);
}

TEST(Calibrate, EachWorkerGetsItsOwnComputeScale) {
  // Worker 0 runs its stage 0.5x the profiled time, worker 1 runs its stage 3x: per-worker scales
  // 0.5 and 3; the calibrated cluster runs each worker at 1 / its scale.
  const Plan plan = testing::hand_plan({{{0}, 0.01, 0.02, 0, 0}, {{1}, 0.01, 0.02, 0, 0}}, 2);
  Trace measured;
  measured.header = {"measured", "hand", "c", "gpipe", 2, 2, 4, 8, 1, 0, nlohmann::json::object()};
  for (int b = 0; b < 4; ++b) {
    measured.events.push_back({0, 0, ActionKind::FORWARD, b, 0, 1.0 * b, b + 0.5 * 0.01, 0, -1});
    measured.events.push_back({0, 0, ActionKind::BACKWARD, b, 0, b + 0.1, b + 0.1 + 0.5 * 0.02, 0, -1});
    measured.events.push_back({1, 1, ActionKind::FORWARD, b, 0, 1.0 * b, b + 3 * 0.01, 0, -1});
    measured.events.push_back({1, 1, ActionKind::BACKWARD, b, 0, b + 0.1, b + 0.1 + 3 * 0.02, 0, -1});
  }
  const Cluster cluster = testing::link_cluster({{2, 1e9, 0.0}});
  const Calibration c = calibrate(measured, plan, cluster);
  ASSERT_EQ(c.worker_compute_scale.size(), 2u);
  EXPECT_NEAR(c.worker_compute_scale[0], 0.5, 1e-12);
  EXPECT_NEAR(c.worker_compute_scale[1], 3.0, 1e-12);
  EXPECT_NEAR(c.compute_scale, 1.75, 1e-12);  // all events together: (0.5 + 3) / 2 with equal profiles
  EXPECT_NEAR(c.compute_rms_relative_error, 0.0, 1e-12);
  const Cluster calibrated = calibrated_cluster(cluster, c);
  EXPECT_NEAR(calibrated.device().worker_speed(0), 2.0, 1e-12);
  EXPECT_NEAR(calibrated.device().worker_speed(1), 1.0 / 3.0, 1e-12);
}

TEST(Calibrate, TheForwardBackwardSplitFollowsTheMeasurement) {
  // Profiled 0.01 + 0.02 s; measured 0.02 + 0.02 s: forward share 0.5, the plan re-split to 0.015 +
  // 0.015 s (total kept), and against it the worker's scale is 0.04 / 0.03 for both kinds.
  const Plan plan = testing::hand_plan({{{0}, 0.01, 0.02, 0, 0}}, 1);
  Trace measured;
  measured.header = {"measured", "hand", "c", "gpipe", 1, 1, 4, 8, 1, 0, nlohmann::json::object()};
  for (int b = 0; b < 4; ++b) {
    measured.events.push_back({0, 0, ActionKind::FORWARD, b, 0, 1.0 * b, b + 0.02, 0, -1});
    measured.events.push_back({0, 0, ActionKind::BACKWARD, b, 0, b + 0.5, b + 0.52, 0, -1});
  }
  const Calibration c = calibrate(measured, plan, testing::link_cluster({{1, 1e9, 0.0}}));
  ASSERT_EQ(c.stage_forward_fraction.size(), 1u);
  EXPECT_NEAR(c.stage_forward_fraction[0], 0.5, 1e-12);
  EXPECT_NEAR(c.worker_compute_scale[0], 0.04 / 0.03, 1e-12);
  EXPECT_NEAR(c.compute_rms_relative_error, 0.0, 1e-12);
  const Plan split = calibrated_plan(plan, c);
  EXPECT_EQ(split.stages[0].optimizer_s, 0.0);  // no optimizer step in the trace: none in the plan
  EXPECT_NEAR(split.stages[0].forward_s, 0.015, 1e-15);
  EXPECT_NEAR(split.stages[0].backward_s, 0.015, 1e-15);
  EXPECT_NEAR(split.stages[0].compute_s, plan.stages[0].compute_s, 1e-15);
}

TEST(Calibrate, OnlyTypicalIterationsCount) {
  // Iteration 0 is the warm-up (forward 10x the profile), iteration 3 stalls (5x); iterations 1, 2, 4
  // and 5 run at 2x, and the middle half by length of the five past the warm-up are all at 2x.
  const Plan plan = testing::hand_plan({{{0}, 0.01, 0.02, 0, 0}}, 1);
  Trace measured;
  measured.header = {"measured", "hand", "c", "gpipe", 1, 1, 1, 8, 6, 1, nlohmann::json::object()};
  const double scale[] = {10, 2, 2, 5, 2, 2};
  for (int i = 0; i < 6; ++i) {
    const double t = 1.0 * i;
    measured.events.push_back({0, 0, ActionKind::FORWARD, 0, i, t, t + scale[i] * 0.01, 0, -1});
    measured.events.push_back({0, 0, ActionKind::BACKWARD, 0, i, t + 0.5, t + 0.5 + scale[i] * 0.02, 0, -1});
  }
  const Trace typical = typical_iterations(measured);
  std::set<int> iterations;
  for (const TraceEvent& e : typical.events) iterations.insert(e.iteration);
  EXPECT_EQ(iterations.size(), 3u);  // 5 past the warm-up: drop the shortest and the longest
  EXPECT_FALSE(iterations.count(0));
  EXPECT_FALSE(iterations.count(3));
  const Calibration c = calibrate(measured, plan, testing::link_cluster({{1, 1e9, 0.0}}));
  EXPECT_NEAR(c.compute_scale, 2.0, 1e-12);
  // Between F and B of one iteration: 0.5 - 0.02 s; the gaps between the kept iterations do not count.
  EXPECT_NEAR(c.action_overhead_s, 3 * (0.5 - 0.02) / 6, 1e-12);
}

TEST(Calibrate, OptimizerStepsGoIntoThePlanAtSpeedOne) {
  // Worker 0 runs at 2x the profile and takes 0.004 s per optimizer step: 0.002 s at speed 1.
  const Plan plan = testing::hand_plan({{{0}, 0.01, 0.02, 0, 0}}, 1);
  Trace measured;
  measured.header = {"measured", "hand", "c", "gpipe", 1, 1, 1, 8, 1, 0, nlohmann::json::object()};
  measured.events.push_back({0, 0, ActionKind::FORWARD, 0, 0, 0.0, 0.02, 0, -1});
  measured.events.push_back({0, 0, ActionKind::BACKWARD, 0, 0, 0.02, 0.06, 0, -1});
  measured.events.push_back({0, 0, ActionKind::OPTIMIZER_STEP, -1, 0, 0.06, 0.064, 0, -1});
  const Calibration c = calibrate(measured, plan, testing::link_cluster({{1, 1e9, 0.0}}));
  EXPECT_NEAR(c.worker_compute_scale[0], 2.0, 1e-12);
  ASSERT_EQ(c.stage_optimizer_s.size(), 1u);
  EXPECT_NEAR(c.stage_optimizer_s[0], 0.002, 1e-12);
  const Plan calibrated = calibrated_plan(plan, c);
  EXPECT_NEAR(calibrated.stages[0].optimizer_s, 0.002, 1e-12);
  EXPECT_NEAR(stage_times_from_plan(calibrated)[0].optimizer_s, 0.002, 1e-12);
  EXPECT_NEAR(load_plan_text_round_trip(calibrated).stages[0].optimizer_s, 0.002, 1e-15);
}

TEST(Calibrate, ComputeScaleFollowsTheMeanSoSlowOutliersCount) {
  // Profiled forward 0.01 s; measured 0.01, 0.01, 0.01 and one 0.05: the mean, 0.02, is what four
  // forwards in a row take on average, so k = 2 (a median would say 1).
  const Plan plan = testing::hand_plan({{{0}, 0.01, 0.02, 0, 0}}, 1);
  Trace measured;
  measured.header = {"measured", "hand", "c", "gpipe", 1, 1, 4, 8, 1, 0, nlohmann::json::object()};
  double t = 0.0;
  for (int b = 0; b < 4; ++b) {
    const double duration = b == 2 ? 0.05 : 0.01;
    measured.events.push_back({0, 0, ActionKind::FORWARD, b, 0, t, t + duration, 0, -1});
    t += duration;
  }
  EXPECT_NEAR(calibrate(measured, plan, testing::link_cluster({{1, 1e9, 0.0}})).compute_scale, 2.0, 1e-12);
}

// The receive-wait fit on predictions known in closed form: 4 waiting receives an iteration
// (0.1 + 4 w) reach a 0.12 s run at w = 5 ms; one already as long as the run, or one that no wait moves
// (no receive waits), gives 0; one that even 8 x the gap leaves short (0.1 + w / 16) gives that bound.
TEST(ReceiveWaitFit, RecoversTheWaitOfAKnownLineAndStopsWhereNoneFits) {
  EXPECT_NEAR(fit_receive_wait_s([](double w) { return 0.1 + 4.0 * w; }, 0.12), 0.005, 1e-4 * 0.12);
  EXPECT_EQ(fit_receive_wait_s([](double w) { return 0.13 + 4.0 * w; }, 0.12), 0.0);
  EXPECT_EQ(fit_receive_wait_s([](double) { return 0.1; }, 0.12), 0.0);
  EXPECT_NEAR(fit_receive_wait_s([](double w) { return 0.1 + w / 16.0; }, 0.12), 8.0 * 0.02, 1e-12);
}

}  // namespace
}  // namespace pipetwin
