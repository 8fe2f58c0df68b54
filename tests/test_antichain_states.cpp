#include "planner/antichain_states.h"

#include <gtest/gtest.h>

#include "planner/error.h"
#include "planner/profile_io.h"
#include "test_support.h"

namespace pipetwin {
namespace {

Layer make_layer(const std::string& id, double time_ms, double activation_bytes, const std::string& description = "op") {
  Layer layer;
  layer.id = id;
  layer.description = description;
  layer.fwd_ms = time_ms / 2;
  layer.bwd_ms = time_ms / 2;
  layer.activation_bytes = activation_bytes;
  layer.param_bytes = time_ms * 10;
  layer.is_input = description.rfind("Input", 0) == 0;
  return layer;
}

TEST(AntichainStates, AChainStaysAChainWithoutItsInput) {
  const Profile profile("chain", 1,
                        {make_layer("in", 5, 1, "Input0"), make_layer("a", 2, 10), make_layer("b", 4, 20),
                         make_layer("c", 6, 30)},
                        {{0, 1}, {1, 2}, {2, 3}});
  const AntichainStates states = build_antichain_states(profile);
  ASSERT_EQ(states.states.size(), 3u);
  EXPECT_TRUE(states.is_chain);
  EXPECT_EQ(states.removed_inputs, (std::vector<std::size_t>{0}));
  // Cumulative compute in seconds: 2, 6, 12 ms; the input's 5 ms is data loading and left out.
  EXPECT_DOUBLE_EQ(states.states[0].compute_s, 0.002);
  EXPECT_DOUBLE_EQ(states.states[1].compute_s, 0.006);
  EXPECT_DOUBLE_EQ(states.states[2].compute_s, 0.012);
  EXPECT_DOUBLE_EQ(states.states[2].param_bytes, 120.0);
  EXPECT_DOUBLE_EQ(states.states[1].output_activation_bytes, 20.0);
  EXPECT_EQ(states.predecessors[2], (std::vector<std::size_t>{0, 1}));
}

// a -> b, a -> c, b -> d, c -> d, worked by hand with PipeDream's rules: from {a} one can move to {b}
// or {c}; from {b} (augmented with a, whose edge to c is still open) to {b, c} or straight to {d};
// likewise from {c}; from {b, c} to {d}. Depth-first from {a}, children in discovery order, gives
// the order {a}, {c}, {b}, {b, c}, {d}.
TEST(AntichainStates, DiamondFollowsPipeDreamsAntichainDag) {
  const Profile profile("diamond", 1,
                        {make_layer("a", 1, 1), make_layer("b", 2, 10), make_layer("c", 4, 100), make_layer("d", 8, 1000)},
                        {{0, 1}, {0, 2}, {1, 3}, {2, 3}});
  const AntichainStates states = build_antichain_states(profile);
  ASSERT_EQ(states.states.size(), 5u);
  EXPECT_FALSE(states.is_chain);
  using Indices = std::vector<std::size_t>;
  EXPECT_EQ(states.states[0].antichain, (Indices{0}));
  EXPECT_EQ(states.states[1].antichain, (Indices{0, 2}));  // {c} augmented with a
  EXPECT_EQ(states.states[2].antichain, (Indices{0, 1}));  // {b} augmented with a
  EXPECT_EQ(states.states[3].antichain, (Indices{0, 1, 2}));
  EXPECT_EQ(states.states[4].antichain, (Indices{3}));
  EXPECT_DOUBLE_EQ(states.states[1].compute_s, 0.005);
  EXPECT_DOUBLE_EQ(states.states[3].compute_s, 0.007);
  EXPECT_DOUBLE_EQ(states.states[4].compute_s, 0.015);
  EXPECT_DOUBLE_EQ(states.states[1].output_activation_bytes, 101.0);
  EXPECT_DOUBLE_EQ(states.states[3].output_activation_bytes, 111.0);
  EXPECT_EQ(states.predecessors[3], (Indices{0, 1, 2}));
  EXPECT_EQ(states.predecessors[4], (Indices{0, 1, 2, 3}));
  EXPECT_EQ(states.predecessors[2], (Indices{0}));
}

TEST(AntichainStates, RealProfilesCoverEveryComputeLayer) {
  for (const char* model : {"vgg16", "resnet50", "gnmt"}) {
    const Profile profile = load_profile(testing::pipedream_profile(model));
    const AntichainStates states = build_antichain_states(profile);
    double compute_ms = 0.0;
    for (const Layer& layer : profile.layers()) compute_ms += layer.is_input ? 0.0 : layer.fwd_ms + layer.bwd_ms;
    double dropped_ms = 0.0;
    for (std::size_t sink : states.removed_sinks) dropped_ms += profile.layer(sink).fwd_ms + profile.layer(sink).bwd_ms;
    EXPECT_NEAR(states.states.back().compute_s * 1000.0 + dropped_ms, compute_ms, 1e-9) << model;
    EXPECT_EQ(states.is_chain, std::string(model) == "vgg16") << model;
  }
}

// A source, `branches` parallel chains of `length` layers, a join: the antichains are the source, the
// join, and every choice of how far each branch has run (not started, or up to one of its `length`
// layers) but the all-unstarted one (that is the source): (length + 1)^branches - 1 + 2 states.
Profile fan_out(int branches, int length) {
  std::vector<Layer> layers{make_layer("source", 1, 1)};
  std::vector<Profile::Edge> edges;
  for (int b = 0; b < branches; ++b) {
    for (int i = 0; i < length; ++i) {
      layers.push_back(make_layer("b" + std::to_string(b) + "_" + std::to_string(i), 1, 1));
      const std::size_t me = layers.size() - 1;
      edges.emplace_back(i == 0 ? 0 : me - 1, me);
    }
  }
  layers.push_back(make_layer("join", 1, 1));
  for (int b = 0; b < branches; ++b) edges.emplace_back(static_cast<std::size_t>(1 + b * length + length - 1), layers.size() - 1);
  return Profile("fan-out", 1, layers, edges, "fan-out.json");
}

TEST(AntichainStates, AGraphTooWideToPlanIsRefusedBeforeItsStatesAreBuilt) {
  EXPECT_EQ(build_antichain_states(fan_out(3, 3)).states.size(), 65u);  // 4^3 + 1
  // 8 branches of 4 layers: 5^8 + 1 = 390,626 states, over the cap.
  try {
    build_antichain_states(fan_out(8, 4));
    FAIL() << "a graph of 390,626 antichain states was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.context().file, "fan-out.json");
    EXPECT_NE(std::string(error.what()).find("more than 5000 antichain states"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("--merge-branches"), std::string::npos);
  }
  // PipeDream's raw Inception-v3 (221,564 states) is refused the same way instead of exhausting memory.
  const Profile inception = load_profile(testing::pipedream_profile("inception_v3"));
  EXPECT_THROW(build_antichain_states(inception), Error);
}

}  // namespace
}  // namespace pipetwin
