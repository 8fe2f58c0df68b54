// The optimizer against PipeDream's own optimizer on PipeDream's profiles, and against hand-worked
// small cases (every number below is computed in the comments from the recurrence).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "planner/error.h"
#include "planner/partition_optimizer.h"
#include "planner/profile_io.h"
#include "test_support.h"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;

void expect_relative(double actual, double expected, double tolerance = 1e-6) {
  EXPECT_NEAR(actual, expected, tolerance * expected) << "actual " << actual << " expected " << expected;
}

TEST(OptimizerReference, GnmtOnOneServerOfClusterB) {
  const Profile profile = load_profile(testing::pipedream_profile("gnmt"));
  const Cluster cluster = load_cluster(testing::platform("pipedream-cluster-b")).first_workers(8);
  const PartitionResult result = optimize_partition(profile, cluster, {});
  expect_relative(result.pipeline_time_s, 0.017125);
  expect_relative(result.speedup_over_data_parallel(), 1.444707541);
  ASSERT_EQ(result.stages.size(), 6u);
  EXPECT_EQ(result.stages.back().replicas, 3);
  EXPECT_EQ(result.configuration, "1-1-1-1-1-3");
}

TEST(OptimizerReference, Vgg16OnClusterA) {
  const Profile profile = load_profile(testing::pipedream_profile("vgg16"));
  const PartitionResult result =
      optimize_partition(profile, load_cluster(testing::platform("pipedream-cluster-a")), {});
  expect_relative(result.pipeline_time_s, 0.0668887521);
  expect_relative(result.speedup_over_data_parallel(), 1.998771186);
  int replicas = 0;
  for (const PipelineStage& stage : result.stages) replicas += stage.replicas;
  EXPECT_EQ(replicas, 16);
}

TEST(OptimizerReference, ResNet50OnClusterA) {
  const Profile profile = load_profile(testing::pipedream_profile("resnet50"));
  const PartitionResult result =
      optimize_partition(profile, load_cluster(testing::platform("pipedream-cluster-a")), {});
  expect_relative(result.pipeline_time_s, 0.0432084692);
  expect_relative(result.speedup_over_data_parallel(), 1.033251629);
}

TEST(OptimizerReference, EveryLayerLandsInExactlyOneStageAndEveryWorkerIsUsedOnce) {
  for (const char* model : {"vgg16", "resnet50", "gnmt"}) {
    const Profile profile = load_profile(testing::pipedream_profile(model));
    const PartitionResult result =
        optimize_partition(profile, load_cluster(testing::platform("pipedream-cluster-a")), {});
    std::vector<int> layer_seen(profile.layer_count(), 0), worker_seen(16, 0);
    for (const PipelineStage& stage : result.stages) {
      for (std::size_t layer : stage.layers) ++layer_seen[layer];
      for (int device : stage.devices) ++worker_seen[device];
      EXPECT_EQ(static_cast<int>(stage.devices.size()), stage.replicas);
    }
    EXPECT_EQ(layer_seen, std::vector<int>(profile.layer_count(), 1)) << model;
    EXPECT_EQ(worker_seen, std::vector<int>(16, 1)) << model;
  }
}

// Two layers: x (8 ms fwd+bwd, 1e8 parameter bytes, 2e7 activation bytes), y (4 ms, no parameters).
Profile two_layers() { return testing::chain_profile({8.0, 4.0}, {1e8, 0.0}, {2e7, 1e6}); }

TEST(OptimizerHandWorked, OneLevelOfTwoWorkers) {
  // B = 1e10: one stage on 2 replicas = (0.012 + 4*1*1e8/(1e10*2)) / 2 = 0.016;
  // split after x: max(0.008, 0.004 / 1, input 2*2e7/1e10 = 0.004) = 0.008. Data parallel = 0.016.
  PartitionResult result = optimize_partition(two_layers(), testing::simple_cluster({{2, 1e10}}), {});
  EXPECT_DOUBLE_EQ(result.pipeline_time_s, 0.008);
  EXPECT_DOUBLE_EQ(result.data_parallel_time_s, 0.016);
  EXPECT_EQ(result.configuration, "1-1");
  // B = 1e9: one stage = (0.012 + 0.2) / 2 = 0.106; split = max(0.008, 0.004, 2*2e7/1e9 = 0.04) = 0.04.
  result = optimize_partition(two_layers(), testing::simple_cluster({{2, 1e9}}), {});
  EXPECT_DOUBLE_EQ(result.pipeline_time_s, 0.04);
  EXPECT_NEAR(result.speedup_over_data_parallel(), 0.106 / 0.04, 1e-12);
  // Without activation transfer the split costs max(0.008, 0.004) = 0.008.
  OptimizerOptions no_transfer;
  no_transfer.activation_transfer = false;
  result = optimize_partition(two_layers(), testing::simple_cluster({{2, 1e9}}), no_transfer);
  EXPECT_DOUBLE_EQ(result.pipeline_time_s, 0.008);
}

TEST(OptimizerHandWorked, TwoLevelsOfTwo) {
  // Level 1 (2 workers, 1e10): A1[x] = (0.008 + 4*1e8/(1e10*2))/2 = 0.014, A1[y] = 0.004/2 = 0.002,
  // A1[x..y] = 0.008 (as above). Level 2 (2 units, 1e9, g = 2): one stage = (0.008 + 4*1e8/(1e9*2)/2)/2
  // = 0.054; split = max(A1[x] = 0.014, A1[y] = 0.002, 2*2e7/1e9 = 0.04) = 0.04.
  // Data parallel: (0.012 + 0.02)/2 = 0.016 inside, then (0.016 + 0.2/2)/2 = 0.058.
  const PartitionResult result =
      optimize_partition(two_layers(), testing::simple_cluster({{2, 1e10}, {2, 1e9}}), {});
  EXPECT_NEAR(result.pipeline_time_s, 0.04, 1e-15);
  EXPECT_NEAR(result.data_parallel_time_s, 0.058, 1e-15);
  ASSERT_EQ(result.stages.size(), 2u);
  EXPECT_EQ(result.stages[0].devices, (std::vector<int>{0, 1}));
  EXPECT_EQ(result.stages[1].devices, (std::vector<int>{2, 3}));
  EXPECT_EQ(result.configuration, "2-2");
  ASSERT_EQ(result.levels.size(), 2u);
  EXPECT_EQ(result.levels[1].segments.size(), 1u);
  EXPECT_EQ(result.levels[0].segments.size(), 2u);
}

TEST(OptimizerHandWorked, StraightUsesOneWorkerPerStage) {
  OptimizerOptions straight;
  straight.straight = true;
  const PartitionResult result = optimize_partition(two_layers(), testing::simple_cluster({{2, 1e10}}), straight);
  EXPECT_DOUBLE_EQ(result.pipeline_time_s, 0.008);
  EXPECT_EQ(result.configuration, "1-1");
  // Three workers cannot each get a stage of a two-layer model.
  EXPECT_THROW(optimize_partition(two_layers(), testing::simple_cluster({{3, 1e10}}), straight), Error);
}

TEST(OptimizerHandWorked, MemoryLimitShapesThePlanAndNamesTheFixWhenNothingFits) {
  // Two workers, 4 layers of 1 ms and 1e9 parameter bytes each. On 2 replicas one stage holds
  // 4e9 bytes; a 3.5e9 limit forbids it, leaving a 2+2 split.
  const Profile profile = testing::chain_profile({1, 1, 1, 1}, {1e9, 1e9, 1e9, 1e9}, {0, 0, 0, 0});
  OptimizerOptions limited;
  limited.memory_limit_bytes = 3.5e9;
  limited.activation_transfer = false;
  const PartitionResult result = optimize_partition(profile, testing::simple_cluster({{2, 1e12}}), limited);
  EXPECT_EQ(result.configuration, "1-1");
  EXPECT_EQ(result.stages[0].layers.size(), 2u);
  limited.memory_limit_bytes = 1.0;
  try {
    optimize_partition(profile, testing::simple_cluster({{2, 1e12}}), limited);
    FAIL();
  } catch (const Error& error) {
    EXPECT_EQ(error.context().field, "--memory-limit");
    EXPECT_THAT(error.what(), HasSubstr("raise --memory-limit"));
  }
}

TEST(OptimizerHandWorked, OverlapCostModelIsNamedAndDiffers) {
  OptimizerOptions overlap;
  overlap.cost_model = "overlap";
  // One stage on 2 replicas: max(0.012, 2*(1/2)*1e8/1e9 = 0.1)/2 = 0.05; split as before 0.04.
  const PartitionResult result = optimize_partition(two_layers(), testing::simple_cluster({{2, 1e9}}), overlap);
  EXPECT_DOUBLE_EQ(result.pipeline_time_s, 0.04);
  EXPECT_DOUBLE_EQ(result.data_parallel_time_s, 0.05);
  overlap.cost_model = "nonsense";
  EXPECT_THROW(optimize_partition(two_layers(), testing::simple_cluster({{2, 1e9}}), overlap), Error);
}

}  // namespace
}  // namespace pipetwin
