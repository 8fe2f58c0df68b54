// Merging parallel branches: small graphs by hand, and PipeDream's raw Inception-v3 (221,564
// antichain states as it is) planned after merging.
#include "planner/branch_merging.h"

#include <gtest/gtest.h>

#include "planner/antichain_states.h"
#include "planner/profile_io.h"
#include "test_support.h"

namespace pipetwin {
namespace {

Layer layer(const std::string& id, double fwd_ms, double activation_bytes, double param_bytes, bool input = false) {
  Layer result;
  result.id = id;
  result.description = input ? "Input0" : "op";
  result.fwd_ms = fwd_ms;
  result.bwd_ms = 2 * fwd_ms;
  result.activation_bytes = activation_bytes;
  result.param_bytes = param_bytes;
  result.is_input = input;
  return result;
}

// in -> a -> {b, c -> c2} -> d -> e: the two branches between the cut points a and d become one layer.
TEST(BranchMerging, ABlockOfBranchesBecomesOneLayerWithSummedFigures) {
  const Profile profile("diamond", 8,
                        {layer("in", 9, 1, 0, true), layer("a", 1, 10, 100), layer("b", 2, 20, 200), layer("c", 3, 30, 300),
                         layer("c2", 4, 40, 400), layer("d", 5, 50, 500), layer("e", 6, 60, 600)},
                        {{0, 1}, {1, 2}, {1, 3}, {3, 4}, {2, 5}, {4, 5}, {5, 6}});
  const MergedProfile merged = merge_parallel_branches(profile);
  EXPECT_EQ(merged.merged_blocks, 1);
  EXPECT_EQ(merged.merged_layers, 3);
  ASSERT_EQ(merged.profile.layer_count(), 5u);
  const Layer& block = merged.profile.layer(merged.profile.index_of("b..c2"));
  EXPECT_DOUBLE_EQ(block.fwd_ms, 2 + 3 + 4);
  EXPECT_DOUBLE_EQ(block.bwd_ms, 2 * (2 + 3 + 4));
  EXPECT_DOUBLE_EQ(block.activation_bytes, 20 + 30 + 40);
  EXPECT_DOUBLE_EQ(block.param_bytes, 200 + 300 + 400);
  EXPECT_EQ(block.description, "merged block of 3 layers: b c c2");
  EXPECT_TRUE(merged.profile.layer(merged.profile.index_of("in")).is_input);
  // A chain now: one state per compute layer (the input removed), totals unchanged.
  const AntichainStates states = build_antichain_states(merged.profile);
  EXPECT_TRUE(states.is_chain);
  EXPECT_EQ(states.states.size(), 4u);
  EXPECT_DOUBLE_EQ(merged.profile.total_fwd_ms(), profile.total_fwd_ms());
  EXPECT_DOUBLE_EQ(merged.profile.total_param_bytes(), profile.total_param_bytes());
}

// A residual shortcut a -> c beside a -> b -> c: b alone between the cut points a and c stays as it is.
TEST(BranchMerging, AOneLayerBranchIsLeftAlone) {
  const Profile profile("residual", 8, {layer("a", 1, 1, 1), layer("b", 2, 2, 2), layer("c", 3, 3, 3)},
                        {{0, 1}, {1, 2}, {0, 2}});
  const MergedProfile merged = merge_parallel_branches(profile);
  EXPECT_EQ(merged.merged_blocks, 0);
  EXPECT_EQ(merged.profile.layer_count(), 3u);
  EXPECT_EQ(merged.profile.edges(), profile.edges());
}

TEST(BranchMerging, InceptionV3PlansAfterMergingItsElevenModules) {
  const Profile inception = load_profile(testing::pipedream_profile("inception_v3"));
  EXPECT_FALSE(build_antichain_states_within_limit(inception).has_value());
  const MergedProfile merged = merge_parallel_branches(inception);
  EXPECT_EQ(merged.merged_blocks, 11);  // Inception-v3: 3 A, 1 B, 4 C, 1 D and 2 E modules
  const AntichainStates states = build_antichain_states(merged.profile);
  EXPECT_LE(states.states.size(), merged.profile.layer_count());
  EXPECT_NEAR(merged.profile.total_fwd_ms(), inception.total_fwd_ms(), 1e-9 * inception.total_fwd_ms());
  EXPECT_NEAR(merged.profile.total_bwd_ms(), inception.total_bwd_ms(), 1e-9 * inception.total_bwd_ms());
  EXPECT_NEAR(merged.profile.total_param_bytes(), inception.total_param_bytes(), 1e-9 * inception.total_param_bytes());
}

TEST(BranchMerging, ThePlanCommandMergesAWideGraphAndSaysSo) {
  testing::TempDir dir;
  const auto result = testing::run_pipetwin("plan -p " + testing::pipedream_profile("inception_v3") + " -c " +
                                            testing::platform("pipedream-cluster-a") + " -o " + dir.file("plan.json"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("note: the graph has more than 5000 antichain states; merged 292 layers in 11 blocks"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("Plan written to"), std::string::npos);
}

}  // namespace
}  // namespace pipetwin
