#include "sim/sweep.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "planner/balanced_plan.h"
#include "planner/error.h"
#include "planner/partition_optimizer.h"
#include "planner/profile_io.h"
#include "planner/schedule_evaluator.h"
#include "sim/sweep_merge.h"
#include "test_support.h"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;

TEST(BalancedPlan, CutsTheChainToMinimiseTheSlowestStage) {
  // Layers of 4, 1, 1, 1, 1 ms (fwd+bwd): two stages -> {4} and {1,1,1,1}.
  const Profile profile = testing::chain_profile({4, 1, 1, 1, 1}, {10, 10, 10, 10, 10}, {100, 200, 300, 400, 500});
  const Cluster cluster = testing::simple_cluster({{4, 1e9}});
  const Plan plan = balanced_plan(profile, cluster, 2, "1f1b", 8);
  ASSERT_EQ(plan.stages.size(), 2u);
  EXPECT_EQ(plan.stages[0].layer_ids, (std::vector<std::string>{"l0"}));
  EXPECT_EQ(plan.stages[1].layer_ids.size(), 4u);
  EXPECT_EQ(plan.stages[0].devices, (std::vector<int>{0, 1}));
  EXPECT_EQ(plan.stages[1].devices, (std::vector<int>{2, 3}));
  EXPECT_DOUBLE_EQ(plan.stages[0].output_activation_bytes, 100.0);
  EXPECT_NEAR(plan.stages[1].compute_s, 0.004, 1e-15);
  EXPECT_THROW(balanced_plan(profile, cluster, 3, "1f1b", 8), Error);  // 3 does not divide 4 workers
  EXPECT_THROW(balanced_plan(profile, testing::simple_cluster({{8, 1e9}}), 8, "1f1b", 8), Error);  // 5 layers
}

// Four layers of fwd 1 ms, bwd 2 ms of which 0.5 ms for the input: a stage of n layers has
// I = 0.5 n ms and W = 1.5 n ms, in the optimizer's plan and in the balanced plan alike (both take
// their stages from stage_figures); two stages of two layers give I/W = 0.001/0.003 s.
TEST(BalancedPlan, KeepsTheProfiledInputWeightSplitOfTheBackwardAsTheOptimizersPlanDoes) {
  Profile chain = testing::chain_profile({3, 3, 3, 3}, {10, 10, 10, 10}, {100, 100, 100, 100});
  std::vector<Layer> layers;
  std::vector<Profile::Edge> edges;
  for (std::size_t l = 0; l < chain.layer_count(); ++l) {
    Layer layer = chain.layer(l);
    layer.fwd_ms = 1.0;
    layer.bwd_ms = 2.0;
    layer.bwd_input_ms = 0.5;
    layer.bwd_weight_ms = 1.5;
    layers.push_back(layer);
    if (l > 0) edges.emplace_back(l - 1, l);
  }
  const Profile profile("split", 32, layers, edges, "split.json");
  const Cluster cluster = testing::simple_cluster({{2, 1e12}});
  OptimizerOptions options;
  options.straight = true;
  const Plan optimizer = make_plan(profile, cluster, options, optimize_partition(profile, cluster, options), "zb-h1", 4);
  const Plan balanced = balanced_plan(profile, cluster, 2, "zb-h1", 4);
  ASSERT_EQ(balanced.stages.size(), 2u);
  for (const Plan* plan : {&optimizer, &balanced}) {
    const std::vector<StageTimes> times = stage_times_from_plan(*plan);
    for (std::size_t s = 0; s < plan->stages.size(); ++s) {
      const double n = static_cast<double>(plan->stages[s].layer_ids.size());
      EXPECT_NEAR(times[s].backward_input_s, 0.0005 * n, 1e-15) << plan->cost_model << " stage " << s;
      EXPECT_NEAR(times[s].backward_weight_s, 0.0015 * n, 1e-15) << plan->cost_model << " stage " << s;
    }
  }
  EXPECT_NEAR(stage_times_from_plan(balanced)[0].backward_input_s, 0.001, 1e-15);
  EXPECT_NEAR(stage_times_from_plan(balanced)[0].backward_weight_s, 0.003, 1e-15);
}

// VGG-16 (PipeDream's profile) on one server of Cluster-A, with the optimizer's plan at 4 microbatches.
struct Vgg16OnFourWorkers {
  Profile profile;
  Cluster cluster;
  Plan optimizer_plan;
};

Vgg16OnFourWorkers vgg16_on_four_workers() {
  Profile profile = load_profile(testing::pipedream_profile("vgg16"));
  Cluster cluster = load_cluster(testing::platform("pipedream-cluster-a")).first_workers(4);
  const OptimizerOptions options;
  Plan plan = make_plan(profile, cluster, options, optimize_partition(profile, cluster, options), "1f1b", 4);
  return {std::move(profile), std::move(cluster), std::move(plan)};
}

// A child that replies with something that is not a result (a truncated reply, or not JSON at all)
// fails its own row, with the reason; the other rows keep their results.
TEST(Sweep, AMalformedChildReplyFailsOnlyItsRow) {
  const Vgg16OnFourWorkers vgg16 = vgg16_on_four_workers();
  const Profile& profile = vgg16.profile;
  const Cluster& cluster = vgg16.cluster;
  sim::SweepSpace space;
  space.optimizer_plan = vgg16.optimizer_plan;
  space.schedules = {"1f1b"};
  space.microbatches = {4, 8, 12};
  space.simulate_infeasible = true;
  space.child_reply = [](const sim::SweepRow& row) -> std::string {
    if (row.microbatches == 4) return "{\"iteration_s\": 0.5, \"samp";  // cut short
    if (row.microbatches == 8) return "not json";
    return "{\"iteration_s\": 0.25, \"samples_per_s\": 1024}";
  };
  const auto rows = sim::run_sweep(profile, cluster, space, 2, nullptr);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(sim::failed_rows(rows), 2);
  for (const sim::SweepRow& row : rows) {
    if (row.microbatches == 12) {
      EXPECT_FALSE(row.failed);
      EXPECT_TRUE(row.simulated);
      EXPECT_DOUBLE_EQ(row.iteration_s, 0.25);
    } else {
      EXPECT_TRUE(row.failed) << row.microbatches;
      EXPECT_FALSE(row.simulated);
      EXPECT_THAT(row.note, HasSubstr("simulation failed: its process replied with something that is not a result"));
    }
  }
  EXPECT_THAT(sim::sweep_csv(rows), HasSubstr("simulation failed"));
}

// `--shard K/N` runs the configurations whose id mod N is K-1, with the ids of the whole sweep; the
// merged shards are the unsharded sweep's CSV byte for byte. A missing shard, one given twice and one
// of another sweep are refused, naming it.
TEST(Sweep, ShardsMergeIntoTheWholeSweepByteForByte) {
  const Vgg16OnFourWorkers vgg16 = vgg16_on_four_workers();
  const Profile& profile = vgg16.profile;
  const Cluster& cluster = vgg16.cluster;
  sim::SweepSpace space;
  space.optimizer_plan = vgg16.optimizer_plan;
  space.stage_counts = {1, 2};
  space.schedules = {"1f1b"};
  space.microbatches = {4, 8};
  space.iterations = 2;
  space.simulate_infeasible = true;
  const std::string whole = sim::sweep_csv(sim::run_sweep(profile, cluster, space, 2, nullptr));
  const sim::SweepIdentity identity = sim::sweep_identity(profile, cluster, space);
  ASSERT_EQ(identity.configurations, 6);  // (dp + 2 balanced) x 1 schedule x 2 microbatch counts
  std::vector<sim::ShardFile> shards;
  space.shards = 4;
  for (int k = 0; k < 4; ++k) {
    space.shard = k;
    const auto rows = sim::run_sweep(profile, cluster, space, 2, nullptr);
    ASSERT_EQ(rows.size(), k < 2 ? 2u : 1u) << k;  // ids 0,4 | 1,5 | 2 | 3
    for (const sim::SweepRow& row : rows) EXPECT_EQ(row.id % 4, k);
    shards.push_back({"shard" + std::to_string(k + 1) + ".csv", sim::sweep_shard_csv(rows, identity, k, 4)});
  }
  std::vector<sim::ShardFile> shuffled{shards[2], shards[0], shards[3], shards[1]};
  const sim::MergedSweep merged = sim::merge_sweep_shards(shuffled);
  EXPECT_EQ(merged.csv, whole);
  ASSERT_EQ(merged.rows.size(), 6u);
  EXPECT_EQ(merged.rows[5].id, 5);

  auto refusal = [](const std::vector<sim::ShardFile>& files) {
    try {
      sim::merge_sweep_shards(files);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  EXPECT_THAT(refusal({shards[0], shards[1], shards[3]}), HasSubstr("shard 3/4 of sweep " + identity.fingerprint + " is missing"));
  EXPECT_THAT(refusal({shards[0], shards[1], shards[2], shards[3], shards[1]}), HasSubstr("shard 2/4 is also shard2.csv"));
  sim::SweepSpace other_space = space;
  other_space.microbatches = {4, 16};
  sim::ShardFile foreign{"foreign.csv", shards[3].text};
  const std::string other_fingerprint = sim::sweep_identity(profile, cluster, other_space).fingerprint;
  ASSERT_NE(other_fingerprint, identity.fingerprint);
  foreign.text.replace(foreign.text.find(identity.fingerprint), identity.fingerprint.size(), other_fingerprint);
  const std::string refused = refusal({shards[0], shards[1], shards[2], foreign});
  EXPECT_THAT(refused, HasSubstr("foreign.csv"));
  EXPECT_THAT(refused, HasSubstr("a shard of another sweep"));
  EXPECT_THAT(refusal({{"plain.csv", whole}}), HasSubstr("plain.csv:1"));  // not a shard
}

TEST(Sweep, CoversTheSpaceIncludesTheOptimizersPlanAndNamesTheBest) {
  const Profile profile = load_profile(testing::pipedream_profile("vgg16"));
  const Cluster cluster = load_cluster(testing::platform("pipedream-cluster-a")).first_workers(4);
  OptimizerOptions options;
  const PartitionResult result = optimize_partition(profile, cluster, options);
  sim::SweepSpace space;
  space.optimizer_plan = make_plan(profile, cluster, options, result, "1f1b", 4);
  space.stage_counts = {1, 2, 4};
  space.schedules = {"1f1b", "gpipe", "zb-h1"};
  space.microbatches = {4, 8};
  space.bandwidth_scales = {1.0, 2.0};
  space.iterations = 2;
  int calls = 0, last_total = 0;
  const auto rows = sim::run_sweep(profile, cluster, space, 2, [&](int done, int total, const sim::SweepRow&) {
    ++calls;
    EXPECT_EQ(done, calls);
    last_total = total;
  });
  ASSERT_EQ(rows.size(), 4u * 3 * 2 * 2);  // (dp + 3 balanced) x schedules x microbatches x scales
  EXPECT_EQ(last_total, 48);
  int dp_rows = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].id, static_cast<int>(i));
    dp_rows += rows[i].plan == "dp";
    if (rows[i].schedule == "zb-h1" && rows[i].replicas != "1-1-1-1") {
      EXPECT_FALSE(rows[i].feasible);
      EXPECT_THAT(rows[i].note, HasSubstr("one worker per stage"));
    }
    if (rows[i].feasible) {
      EXPECT_GT(rows[i].samples_per_s, 0.0);
    }
  }
  EXPECT_EQ(dp_rows, 12);
  const sim::SweepRow* best = sim::best_row(rows);
  ASSERT_NE(best, nullptr);
  for (const auto& row : rows) {
    if (row.feasible) {
      EXPECT_LE(row.samples_per_s, best->samples_per_s);
    }
  }
  // Doubling every bandwidth never slows a configuration down.
  for (std::size_t i = 0; i + 1 < rows.size(); i += 2) {
    if (rows[i].feasible && rows[i + 1].feasible) {
      EXPECT_LE(rows[i + 1].iteration_s, rows[i].iteration_s * (1 + 1e-9));
    }
  }
  const std::string csv = sim::sweep_csv(rows);
  EXPECT_THAT(csv, HasSubstr("id,plan,stages,replicas,schedule,microbatches,bandwidth_scale,predicted_iteration_s"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 49);
}

TEST(Sweep, ConfigurationsOverTheDevicesMemoryAreReportedNotSimulated) {
  // Four layers of 8 GB activations (no parameters) on 16 GB devices. GPipe keeps every microbatch a
  // replica runs in flight: a plan of `stages` equal stages with 4 / stages replicas each needs
  // ceil(m / replicas) x (4 / stages) x 8 GB on worker 0, and fits only when that is <= 16 GB.
  const Profile profile = testing::chain_profile({1, 1, 1, 1}, {0, 0, 0, 0}, {8e9, 8e9, 8e9, 8e9});
  const Cluster cluster = testing::simple_cluster({{4, 1e12}});
  OptimizerOptions options;
  options.straight = true;
  const PartitionResult result = optimize_partition(profile, cluster, options);
  sim::SweepSpace space;
  space.optimizer_plan = make_plan(profile, cluster, options, result, "1f1b", 4);
  space.stage_counts = {1};
  space.schedules = {"gpipe"};
  space.microbatches = {1, 2, 4};
  space.iterations = 1;
  space.warmup_iterations = 0;
  for (bool simulate_infeasible : {false, true}) {
    space.simulate_infeasible = simulate_infeasible;
    const auto rows = sim::run_sweep(profile, cluster, space, 1, nullptr);
    ASSERT_EQ(rows.size(), 6u);  // (dp + 1 stage) x 3 microbatch counts
    for (const sim::SweepRow& row : rows) {
      const int replicas = 4 / row.stages;
      const double needed = (row.microbatches + replicas - 1) / replicas * (4 / row.stages) * 8e9;
      EXPECT_DOUBLE_EQ(row.peak_memory_bytes, needed) << row.id;
      EXPECT_EQ(row.feasible, needed <= 16e9) << row.id;
      EXPECT_EQ(row.simulated, row.feasible || simulate_infeasible) << row.id;
      if (!row.feasible) {
        EXPECT_THAT(row.note, HasSubstr("worker 0 (stage"));
        EXPECT_THAT(row.note, HasSubstr("the limit is 16.000 GB"));
      }
      if (row.simulated) {
        EXPECT_GT(row.samples_per_s, 0.0);
      } else {
        EXPECT_EQ(row.samples_per_s, 0.0);
      }
    }
    const std::string csv = sim::sweep_csv(rows);
    EXPECT_EQ(csv.find("balanced,1,4,gpipe,1,1,,,") != std::string::npos, !simulate_infeasible);  // no times
  }
}

// Recomputation as a swept dimension, on the same four 8 GB layers (GPipe): every plan once as it is
// and once recomputing every stage ("+recompute"). Recomputing, the first stage keeps nothing per
// microbatch in flight (its input is the data) but rebuilds its whole activations once: the 1-stage
// plan needs 4 x 8 GB whatever m; a later stage keeps its input, as big as its output here, m x 8 GB,
// plus one rebuilt 8 GB: recomputation costs memory there, and the sweep says so.
TEST(Sweep, RecomputationIsSweptOverEveryPlan) {
  const Profile profile = testing::chain_profile({1, 1, 1, 1}, {0, 0, 0, 0}, {8e9, 8e9, 8e9, 8e9});
  const Cluster cluster = testing::simple_cluster({{4, 1e12}});
  OptimizerOptions options;
  options.straight = true;
  sim::SweepSpace space;
  space.optimizer_plan = make_plan(profile, cluster, options, optimize_partition(profile, cluster, options), "1f1b", 4);
  space.stage_counts = {1};
  space.schedules = {"gpipe"};
  space.microbatches = {1, 4};
  space.recomputation = {"none", "full"};
  space.iterations = 1;
  space.warmup_iterations = 0;
  const auto rows = sim::run_sweep(profile, cluster, space, 1, nullptr);
  ASSERT_EQ(rows.size(), 8u);  // (dp, balanced) x (none, full) x 2 microbatch counts
  int recomputed = 0;
  for (const sim::SweepRow& row : rows) {
    const bool recomputes = row.plan.find("+recompute") != std::string::npos;
    recomputed += recomputes;
    const double m = row.microbatches;
    double needed = 0;
    if (row.stages == 1) needed = recomputes ? 4 * 8e9 : std::ceil(m / 4) * 4 * 8e9;
    if (row.stages == 4) needed = recomputes ? m * 8e9 + 8e9 : m * 8e9;
    EXPECT_DOUBLE_EQ(row.peak_memory_bytes, needed) << row.plan << " " << row.stages << " stages, m " << m;
  }
  EXPECT_EQ(recomputed, 4);
  space.recomputation = {"some"};
  EXPECT_THROW(sim::run_sweep(profile, cluster, space, 1, nullptr), Error);
}

}  // namespace
}  // namespace pipetwin
