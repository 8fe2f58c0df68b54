// Layer calibration and prediction accuracy against hand-built traces with known alone times,
// contended rates and optimizer costs: every term must come back exactly, and a cut the calibration
// never ran must get its stage times from the layers' own corrections.
#include "traces/layer_calibration.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "planner/balanced_plan.h"
#include "planner/error.h"
#include "planner/stage_figures.h"
#include "traces/prediction_accuracy.h"
#include "test_support.h"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Four layers of 1 ms forward and 2 ms backward each; two stages of two layers on two workers.
Profile four_layers() { return testing::chain_profile({3, 3, 3, 3}, {1e6, 1e6, 2e6, 2e6}, {1e3, 1e3, 1e3, 1e3}); }
Plan two_stages(const Profile& profile) {
  return balanced_plan(profile, testing::simple_cluster({{2, 1e9}}), 2, "1f1b", 4);
}

TraceEvent event(int worker, ActionKind kind, double start_ms, double end_ms) {
  return {worker, worker, kind, 0, 0, start_ms / 1000, end_ms / 1000, 0.0, -1, -1};
}

Trace trace_of(const Plan& plan, std::vector<TraceEvent> events) {
  Trace trace;
  trace.header.source = "measured";
  trace.header.profile = plan.profile_name;
  trace.header.workers = 2;
  trace.header.stages = 2;
  trace.header.iterations = 1;
  trace.header.warmup_iterations = 0;
  trace.events = std::move(events);
  return trace;
}

// Stage 0 (worker 0): forward alone 4 ms, contended rate 1/2; stage 1 (worker 1): forward alone 3.2 ms,
// contended rate 0.8. Worker 0: three forwards alone; one wholly overlapped (4 / (1/2) = 8 ms, 30-38);
// one overlapped for its first 2 ms (1 ms of work) then alone 3 ms (40-45); an optimizer step of 1 ms
// alone. Worker 1: two forwards alone, one wholly overlapped (3.2 / 0.8 = 4 ms, 30-34), and three
// optimizer steps of 2 ms, each wholly overlapped (alone 1.6 ms).
Trace contended_trace(const Plan& plan) {
  return trace_of(plan, {event(0, ActionKind::FORWARD, 0, 4), event(0, ActionKind::FORWARD, 10, 14),
                         event(0, ActionKind::FORWARD, 20, 24), event(0, ActionKind::FORWARD, 30, 38),
                         event(1, ActionKind::FORWARD, 30, 34), event(1, ActionKind::OPTIMIZER_STEP, 34, 36),
                         event(1, ActionKind::OPTIMIZER_STEP, 36, 38), event(0, ActionKind::FORWARD, 40, 45),
                         event(1, ActionKind::OPTIMIZER_STEP, 40, 42), event(1, ActionKind::FORWARD, 50, 53.2),
                         event(1, ActionKind::FORWARD, 60, 63.2), event(0, ActionKind::OPTIMIZER_STEP, 70, 71)});
}

TEST(ComputeOverlap, FractionOfEachComputeEventWithAnotherWorkerComputing) {
  const Profile profile = four_layers();
  const Plan plan = two_stages(profile);
  const Trace trace = trace_of(plan, {event(0, ActionKind::FORWARD, 0, 10), event(1, ActionKind::FORWARD, 2, 4),
                                      event(1, ActionKind::SEND_ACT, 4, 9), event(1, ActionKind::BACKWARD, 8, 20)});
  const std::vector<double> overlap = compute_overlap(trace);
  EXPECT_NEAR(overlap[0], 0.4, 1e-12);  // 2-4 and 8-10 of 0-10 (a send is not compute)
  EXPECT_NEAR(overlap[1], 1.0, 1e-12);
  EXPECT_EQ(overlap[2], 0.0);
  EXPECT_NEAR(overlap[3], 2.0 / 12.0, 1e-12);
}

TEST(LayerCalibration, AloneTimesAndContendedRatesAreRecoveredExactly) {
  const Profile profile = four_layers();
  const Plan plan = two_stages(profile);
  const LayerCalibration c = calibrate_layers(contended_trace(plan), plan, true);
  ASSERT_EQ(c.stage_contended_rate.size(), 2u);
  EXPECT_NEAR(c.stage_contended_rate[0], 0.5, 1e-9);
  EXPECT_NEAR(c.stage_contended_rate[1], 0.8, 1e-9);
  EXPECT_NEAR(c.shared_compute, 1.3, 1e-9);
  // Alone forward 4 ms against 2 profiled (two layers of 1 ms); 3.2 against 2.
  EXPECT_NEAR(c.layers.at("l0").forward, 2.0, 1e-9);
  EXPECT_NEAR(c.layers.at("l3").forward, 1.6, 1e-9);
  EXPECT_NEAR(c.layers.at("l1").compute_share, 0.5, 1e-9);
  // Optimizer: worker 0 1 ms alone for 2 MB; worker 1 steps of 2 ms overlapped, 1.6 ms alone, for
  // 4 MB: the line through both, 0.6 ms per 2 MB and 1 - 0.6 = 0.4 ms fixed.
  EXPECT_NEAR(c.optimizer_s_per_param_byte, 0.6e-3 / 2e6, 1e-15);
  EXPECT_NEAR(c.optimizer_fixed_s, 0.4e-3, 1e-12);
}

TEST(LayerCalibration, WithoutASharedMachineScalesAreMeanRatios) {
  const Profile profile = four_layers();
  const Plan plan = two_stages(profile);
  const LayerCalibration c = calibrate_layers(contended_trace(plan), plan, false);
  // Worker 0's forwards: 4, 4, 4, 8, 5 ms: mean 5 against 2.
  EXPECT_NEAR(c.layers.at("l0").forward, 2.5, 1e-9);
  EXPECT_EQ(c.shared_compute, 0.0);
  EXPECT_EQ(c.layers.at("l0").compute_share, 1.0);
}

TEST(LayerCalibration, ACutTheRunNeverHadGetsItsLayersCorrections) {
  const Profile profile = four_layers();
  const Plan plan = two_stages(profile);
  Trace trace = contended_trace(plan);
  // Backwards: stage 0 6 ms alone (profiled 4), stage 1 8 ms alone (profiled 4).
  trace.events.push_back(event(0, ActionKind::BACKWARD, 100, 106));
  trace.events.push_back(event(1, ActionKind::BACKWARD, 110, 118));
  const LayerCalibration c = calibrate_layers(trace, plan, true);
  const Profile calibrated = calibrated_profile(profile, c);
  // A cut the run never had, {l0} {l1, l2} {l3}: forward 2, 2 + 1.6, 1.6 ms; backward 3, 3 + 4, 4 ms.
  const StageFigures middle = stage_figures(calibrated, {1, 2});
  EXPECT_NEAR(stage_figures(calibrated, {0}).forward_s, 2e-3, 1e-12);
  EXPECT_NEAR(middle.forward_s, 3.6e-3, 1e-12);
  EXPECT_NEAR(stage_figures(calibrated, {3}).forward_s, 1.6e-3, 1e-12);
  EXPECT_NEAR(middle.backward_s, 7e-3, 1e-12);
  // The middle stage's share: time-weighted mean of 0.5 (l1: 2 + 3 ms) and 0.8 (l2: 1.6 + 4 ms).
  EXPECT_NEAR(middle.compute_share, (0.5 * 5 + 0.8 * 5.6) / 10.6, 1e-12);
  // And a plan of three stages carries them (the balanced cut of the calibrated times).
  const Plan three = balanced_plan(calibrated, testing::simple_cluster({{3, 1e9}}), std::vector<int>{1, 1, 1}, "1f1b", 4);
  ASSERT_EQ(three.stages.size(), 3u);
  const StageFigures last = stage_figures(calibrated, three.stages[2].layer_indices);
  EXPECT_NEAR(three.stages[2].compute_share, last.compute_share, 1e-12);
  EXPECT_NEAR(three.stages[2].forward_s, last.forward_s, 1e-12);
  const Plan stepped = with_optimizer_steps(three, c);
  EXPECT_NEAR(stepped.stages[2].optimizer_s, 0.4e-3 + three.stages[2].param_bytes * 0.3e-9, 1e-15);
  EXPECT_GT(three.stages[2].param_bytes, 0.0);
}

// A line that would go negative (the larger stage's step quicker), or stages of equal bytes, keep the
// ratio through zero: the steps' sum over the bytes' sum, no fixed part.
TEST(LayerCalibration, OptimizerStepFallsBackToARatioThroughZero) {
  const Profile profile = four_layers();
  const Plan plan = two_stages(profile);  // stage 0 2 MB of parameters, stage 1 4 MB
  const Trace quicker_large = trace_of(plan, {event(0, ActionKind::FORWARD, 0, 2), event(1, ActionKind::FORWARD, 10, 12),
                                              event(0, ActionKind::OPTIMIZER_STEP, 20, 23),
                                              event(1, ActionKind::OPTIMIZER_STEP, 30, 32)});
  const LayerCalibration c = calibrate_layers(quicker_large, plan, false);
  EXPECT_EQ(c.optimizer_fixed_s, 0.0);
  EXPECT_NEAR(c.optimizer_s_per_param_byte, 5e-3 / 6e6, 1e-15);
  // Stage 0 1 ms for 2 MB, stage 1 6 ms for 4 MB: the line 2.5 ms per MB from -4 ms: negative at zero.
  const Trace steep = trace_of(plan, {event(0, ActionKind::FORWARD, 0, 2), event(1, ActionKind::FORWARD, 10, 12),
                                      event(0, ActionKind::OPTIMIZER_STEP, 20, 21), event(1, ActionKind::OPTIMIZER_STEP, 30, 36)});
  const LayerCalibration d = calibrate_layers(steep, plan, false);
  EXPECT_EQ(d.optimizer_fixed_s, 0.0);
  EXPECT_NEAR(d.optimizer_s_per_param_byte, 7e-3 / 6e6, 1e-15);
}

// Each stage's step is the median over every iteration after the warm-up, not the mean over the
// typical ones: six iterations, the first a warm-up whose steps take 9 ms; stage 0 steps 1 ms and once
// 4 ms, stage 1 2 ms and once 7 ms (a hiccup in an iteration of typical length): 1 and 2 ms, so 1 ms
// for 2 MB and 2 ms for 4 MB, the line through both 0.5 ms per MB with no fixed part.
TEST(LayerCalibration, OneSlowOptimizerStepDoesNotSetTheCostOfEveryStep) {
  const Profile profile = four_layers();
  const Plan plan = two_stages(profile);
  std::vector<TraceEvent> events;
  for (int iteration = 0; iteration < 6; ++iteration) {
    const double t = 100.0 * iteration;
    const double step0 = iteration == 0 ? 9 : iteration == 3 ? 4 : 1, step1 = iteration == 0 ? 9 : iteration == 3 ? 7 : 2;
    for (TraceEvent e : {event(0, ActionKind::FORWARD, t, t + 2), event(1, ActionKind::FORWARD, t + 10, t + 12),
                         event(0, ActionKind::OPTIMIZER_STEP, t + 20, t + 20 + step0),
                         event(1, ActionKind::OPTIMIZER_STEP, t + 30, t + 30 + step1), event(0, ActionKind::FORWARD, t + 40, t + 42)}) {
      e.iteration = iteration;
      events.push_back(e);
    }
  }
  Trace trace = trace_of(plan, events);
  trace.header.iterations = 6;
  trace.header.warmup_iterations = 1;
  const LayerCalibration c = calibrate_layers(trace, plan, false);
  EXPECT_NEAR(c.optimizer_s_per_param_byte, 1e-3 / 2e6, 1e-15);
  EXPECT_NEAR(c.optimizer_fixed_s, 0.0, 1e-12);
}

TEST(LayerCalibration, AnotherModelsTraceOrProfileIsRefusedNamingBoth) {
  const Profile profile = four_layers();
  const Plan plan = two_stages(profile);
  Trace trace = contended_trace(plan);
  trace.header.profile = "resnet";
  try {
    calibrate_layers(trace, plan, true);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("resnet"));
    EXPECT_THAT(e.what(), HasSubstr("chain"));
  }
  LayerCalibration other;
  other.profile_name = "vgg16";
  other.layers["node1"] = {};
  try {
    calibrated_profile(profile, other);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("l0"));
    EXPECT_THAT(e.what(), HasSubstr("vgg16"));
  }
}

TEST(PredictionAccuracy, KendallTauCountsConcordantAndDiscordantPairs) {
  EXPECT_NEAR(kendall_tau({1, 2, 3, 4}, {1, 3, 2, 4}), 4.0 / 6.0, 1e-12);  // one swap of six pairs
  EXPECT_NEAR(kendall_tau({1, 2, 3}, {3, 2, 1}), -1.0, 1e-12);
  EXPECT_NEAR(kendall_tau({1, 2, 3}, {1, 1, 2}), 2.0 / 3.0, 1e-12);  // a tie counts as neither
  EXPECT_EQ(kendall_tau({1}, {1}), 0.0);
}

TEST(PredictionAccuracy, ErrorsSpreadAndSummaryByHand) {
  std::vector<ConfigurationAccuracy> rows(3);
  rows[0] = {"base", true, 1.0, {1.0, 1.09, 0.91}};
  rows[1] = {"a", false, 2.2, {2.0, 1.9, 2.1}};   // +10%, outside 1.9-2.1
  rows[2] = {"b", false, 2.95, {3.0, 2.9, 3.2}};  // -1.67%, inside
  const AccuracySummary summary = summarize_accuracy(rows);
  EXPECT_EQ(summary.configurations, 2);
  EXPECT_NEAR(rows[1].error, 0.1, 1e-12);
  EXPECT_TRUE(rows[1].outside_spread);
  EXPECT_FALSE(rows[2].outside_spread);
  EXPECT_NEAR(summary.median_abs_error, (0.1 + 0.05 / 3.0) / 2, 1e-12);
  EXPECT_NEAR(summary.max_abs_error, 0.1, 1e-12);
  EXPECT_NEAR(summary.kendall_tau, 1.0, 1e-12);
  EXPECT_EQ(summary.outside_spread, 1);
  EXPECT_NEAR(summary.repeat_tau, 1.0, 1e-12);  // a's runs all faster than b's
  EXPECT_NEAR(summary.per_run_tau, 1.0, 1e-12);  // predicted a < b, as in every run
  EXPECT_NEAR(summary.base_spread, 0.18, 1e-12);  // (1.09 - 0.91) / 1.0
  EXPECT_THAT(accuracy_text(summary), Not(HasSubstr("Warning")));
  EXPECT_THAT(accuracy_csv(rows), HasSubstr("a,0,2.200000,2.000000,1.900000,2.100000,3,0.1000,1,"));
  // Predicted by three calibrations (2.2 their median): the CSV's last columns are their min and max.
  rows[1].predicted_by_calibration_s = {2.35, 2.2, 2.05};
  EXPECT_THAT(accuracy_csv(rows), HasSubstr(",2.050000,2.350000\n"));
  EXPECT_THAT(accuracy_csv(rows), HasSubstr("runs_in_slow_spell,predicted_min_s,predicted_max_s\n"));
  rows[2].name = "b, \"2+1\"";
  EXPECT_THAT(accuracy_csv(rows), HasSubstr("\n\"b, \"\"2+1\"\"\",0,"));
  EXPECT_EQ(summary.base_runs, 3);
  EXPECT_EQ(summary.base_runs_near_median, 3);
  // A base whose runs disagree (1.0, 1.15, 1.3: the two others 13% from the median run) is said to
  // be unsteady; one whose runs mostly agree is not, however far one or two others fell.
  rows[0].measured_s = {1.0, 1.3, 1.15};
  const AccuracySummary unsteady = summarize_accuracy(rows);
  EXPECT_NEAR(unsteady.base_spread, 0.3 / 1.15, 1e-12);
  EXPECT_EQ(unsteady.base_runs_near_median, 1);
  EXPECT_THAT(accuracy_text(unsteady), HasSubstr("Warning: only 1 of the base configuration's 3 runs lie within 10% of their median (they spread 26%"));
  rows[0].measured_s = {1.0, 1.7, 1.02, 0.99, 1.6, 1.05, 0.98};  // a slow spell over two of seven runs
  const AccuracySummary mostly_steady = summarize_accuracy(rows);
  EXPECT_NEAR(mostly_steady.base_spread, 0.72 / 1.02, 1e-12);
  EXPECT_EQ(mostly_steady.base_runs_near_median, 5);
  EXPECT_THAT(accuracy_text(mostly_steady), Not(HasSubstr("Warning")));
  rows[0].measured_s = {1.0, 1.3, 1.0, 1.3};  // two against two: no majority near the median 1.15
  EXPECT_THAT(accuracy_text(summarize_accuracy(rows)), HasSubstr("Warning: only 0 of the base configuration's 4 runs"));
  // Rounds that disagree: a fourth configuration c, fastest in rounds 1 and 3, slowest in round 2.
  rows.push_back({"c", false, 2.5, {1.95, 3.0, 2.0}});
  // Round 1: a 2.0, b 3.0, c 1.95; round 2: a 1.9, b 2.9, c 3.0; round 3: a 2.1, b 3.2, c 2.0.
  // (1,2): ab +, ac - (2.0>1.95, 1.9<3.0), bc - (3.0>1.95, 2.9<3.0): tau (1 - 2) / 3 = -1/3.
  // (1,3): ab +, ac + (2.0>1.95, 2.1>2.0), bc +: tau 1. (2,3): ab +, ac -, bc -: -1/3. Median -1/3.
  EXPECT_NEAR(summarize_accuracy(rows).repeat_tau, -1.0 / 3.0, 1e-12);
  // Predicted a 2.2 < c 2.5 < b 2.95: round 1 (c < a < b) has ac -, ab +, cb +: 1/3; round 2 (a < b < c)
  // ac +, ab +, cb -: 1/3; round 3 (c < a < b) 1/3. Median 1/3.
  EXPECT_NEAR(summarize_accuracy(rows).per_run_tau, 1.0 / 3.0, 1e-12);
  EXPECT_THAT(accuracy_text(summarize_accuracy(rows)), HasSubstr("the prediction against each run tau 0.33, run against run -0.33"));
  rows.pop_back();
  EXPECT_THAT(accuracy_text(summarize_accuracy(rows)), Not(HasSubstr("Note:")));
  rows.push_back({"never run", false, 1.0, {}});
  EXPECT_THROW(summarize_accuracy(rows), Error);
}

// Configurations whose runs had more worker processes than cores are named in the summary, out of
// sample only, in their order; none flagged, no note.
TEST(PredictionAccuracy, OversubscribedConfigurationsAreNamed) {
  std::vector<ConfigurationAccuracy> rows(4);
  rows[0] = {"base", true, 1.0, {1.0}};
  rows[1] = {"3 workers", false, 2.0, {2.0}};
  rows[2] = {"2 workers", false, 2.0, {2.0}};
  rows[3] = {"2+1", false, 2.0, {2.0}};
  rows[0].oversubscribed = rows[1].oversubscribed = rows[3].oversubscribed = true;
  const AccuracySummary summary = summarize_accuracy(rows);
  EXPECT_EQ(summary.oversubscribed, (std::vector<std::string>{"3 workers", "2+1"}));
  EXPECT_THAT(accuracy_text(summary), HasSubstr("\nNote: 2 configurations ran more worker processes than the machine has "
                                                "cores (3 workers, 2+1): the processes took turns on the cores"));
  rows[3].oversubscribed = false;
  EXPECT_THAT(accuracy_text(summarize_accuracy(rows)), HasSubstr("Note: 1 configuration ran more worker processes than "
                                                                 "the machine has cores (3 workers)"));
  rows[1].oversubscribed = false;
  EXPECT_TRUE(summarize_accuracy(rows).oversubscribed.empty());  // the base's own flag does not count
  EXPECT_THAT(accuracy_text(summarize_accuracy(rows)), Not(HasSubstr("Note:")));
}

// Configurations whose compute cost more CPU per unit of work than the base's (medians over their
// runs' known figures, relative to the base's) by more than kCostlierComputeBand are named with the
// excess, out of sample, in order; the figures reach the CSV; an unknown base names none.
TEST(PredictionAccuracy, ConfigurationsWhoseComputeCostMoreCpuAreNamed) {
  std::vector<ConfigurationAccuracy> rows(4);
  rows[0] = {"base", true, 1.0, {1.0, 1.0, 1.0}};
  rows[1] = {"slow spell", false, 2.0, {2.0, 2.0, 2.0}};
  rows[2] = {"as calibrated", false, 2.0, {2.0, 2.0}};
  rows[3] = {"3 workers", false, 2.0, {2.0}};
  rows[0].cpu_per_work = {1.0, 0.98, 1.02};  // median 1.0
  rows[1].cpu_per_work = {1.3, 1.34, -1.0};  // the unknown left out: median 1.32, +32%
  rows[2].cpu_per_work = {1.05, 1.04};       // median 1.045: within 5%
  rows[3].cpu_per_work = {1.08};             // +8%
  AccuracySummary summary = summarize_accuracy(rows);
  EXPECT_NEAR(rows[1].median_cpu_per_work, 1.32, 1e-12);
  ASSERT_EQ(summary.costlier_compute.size(), 2u);
  EXPECT_EQ(summary.costlier_compute[0].first, "slow spell");
  EXPECT_NEAR(summary.costlier_compute[0].second, 0.32, 1e-12);
  EXPECT_EQ(summary.costlier_compute[1].first, "3 workers");
  EXPECT_NEAR(summary.costlier_compute[1].second, 0.08, 1e-12);
  EXPECT_THAT(accuracy_text(summary), HasSubstr("\nNote: in 2 configurations the compute cost more CPU per unit of work than "
                                                "in the base's runs (slow spell +32%, 3 workers +8%; column CPU/work)"));
  EXPECT_THAT(accuracy_csv(rows), HasSubstr("\nslow spell,0,2.000000,2.000000,2.000000,2.000000,3,0.0000,0,,,1.3200,0,0,2.000000,2.000000\n"));
  rows[0].cpu_per_work = {1.1};  // a base that cost 10% more itself: only the slow spell lies 5% above it
  summary = summarize_accuracy(rows);
  ASSERT_EQ(summary.costlier_compute.size(), 1u);
  EXPECT_THAT(accuracy_text(summary), HasSubstr("Note: in 1 configuration the compute cost more CPU per unit of work than in the base's runs (slow spell +20%"));
  rows[0].cpu_per_work = {-1.0};  // traces from before compute CPU was recorded
  summary = summarize_accuracy(rows);
  EXPECT_EQ(rows[0].median_cpu_per_work, -1.0);
  EXPECT_TRUE(summary.costlier_compute.empty());
  EXPECT_THAT(accuracy_text(summary), Not(HasSubstr("Note:")));
  EXPECT_THAT(accuracy_csv(rows), HasSubstr("\nbase,1,1.000000,1.000000,1.000000,1.000000,3,0.0000,0,,,-1.0000,0,0,1.000000,1.000000\n"));
}

// Takes set aside (in a slow spell, or computing costlier than the base's runs) and runs kept in a
// spell are summed over every configuration, the base's included, reach the CSV per configuration and
// are told in a note, split by why; none, no note.
TEST(PredictionAccuracy, TakesSetAsideInSlowSpellsAreCountedAndTold) {
  std::vector<ConfigurationAccuracy> rows(3);
  rows[0] = {"base", true, 1.0, {1.0, 1.0, 1.0}};
  rows[1] = {"a", false, 2.0, {2.0, 2.0, 2.0}};
  rows[2] = {"b", false, 2.0, {2.0, 2.0, 2.0}};
  EXPECT_THAT(accuracy_text(summarize_accuracy(rows)), Not(HasSubstr("Note:")));
  rows[0].set_aside_runs = 2;
  rows[2].set_aside_runs = 3;
  rows[2].runs_in_slow_spell = 1;
  rows[2].costlier_set_aside = 2;
  rows[1].set_aside_runs = rows[1].costlier_set_aside = 1;
  const AccuracySummary summary = summarize_accuracy(rows);
  EXPECT_EQ(summary.set_aside_runs, 6);
  EXPECT_EQ(summary.costlier_set_aside, 3);
  EXPECT_EQ(summary.runs_in_slow_spell, 1);
  EXPECT_THAT(accuracy_text(summary), HasSubstr("\nNote: 6 takes of runs were set aside and taken again (set-aside-R-K.jsonl; "
                                                "column set_aside_runs): 3 ended in a slow spell of the machine (a core slower "
                                                "than usual), 3 computed costlier per unit of work than the machine's usual "
                                                "state (the base's quicker runs)"));
  EXPECT_THAT(accuracy_text(summary), HasSubstr("; 1 run kept although still in a slow spell after the last take"));
  EXPECT_THAT(accuracy_csv(rows), HasSubstr("\nb,0,2.000000,2.000000,2.000000,2.000000,3,0.0000,0,,,-1.0000,3,1,2.000000,2.000000\n"));
  rows[0].set_aside_runs = 1;
  rows[1].set_aside_runs = rows[1].costlier_set_aside = 0;
  rows[2].set_aside_runs = rows[2].runs_in_slow_spell = rows[2].costlier_set_aside = 0;
  EXPECT_THAT(accuracy_text(summarize_accuracy(rows)), HasSubstr("\nNote: 1 take of runs was set aside and taken again (set-aside-R-K.jsonl; column set_aside_runs): 1 ended in a slow spell of the machine (a core slower than usual)."));
  rows[0].set_aside_runs = rows[0].costlier_set_aside = 2;  // only costlier ones: no spell named
  EXPECT_THAT(accuracy_text(summarize_accuracy(rows)), HasSubstr("\nNote: 2 takes of runs were set aside and taken again "
                                                               "(set-aside-R-K.jsonl; column set_aside_runs): 2 computed costlier"));
  EXPECT_THAT(accuracy_text(summarize_accuracy(rows)), Not(HasSubstr("slow spell of the machine")));
  EXPECT_THAT(accuracy_text(summarize_accuracy(rows)), Not(HasSubstr("kept although")));
  // Runs kept although computing costlier than the tolerance: counted, and named by configuration.
  rows[0].runs_still_costlier = 2;
  rows[2].runs_still_costlier = 1;
  const AccuracySummary still = summarize_accuracy(rows);
  EXPECT_EQ(still.still_costlier, (std::vector<std::pair<std::string, int>>{{"base", 2}, {"b", 1}}));
  EXPECT_THAT(accuracy_text(still), HasSubstr("\nNote: 3 runs were kept although computing costlier per unit of work than the "
                                              "machine's usual state by more than the matrix's tolerance (base: 2, b: 1; "
                                              "runs_still_costlier in matrix.json;"));
  rows[0].runs_still_costlier = 0;
  EXPECT_THAT(accuracy_text(summarize_accuracy(rows)), HasSubstr("\nNote: 1 run was kept although computing costlier"));
}

}  // namespace
}  // namespace pipetwin
