#include "planner/profile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "planner/error.h"
#include "planner/json_fields.h"
#include "planner/profile_io.h"
#include "test_support.h"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;

Layer layer(const std::string& id, double fwd_ms = 1.0, double bwd_ms = 2.0) {
  Layer result;
  result.id = id;
  result.fwd_ms = fwd_ms;
  result.bwd_ms = bwd_ms;
  result.activation_bytes = 100;
  result.param_bytes = 10;
  return result;
}

TEST(Profile, OrdersLayersTopologicallyKeepingGivenOrderAmongReadyLayers) {
  // Given order d, b, a, c with edges a->b, a->c, b->d, c->d.
  const Profile profile("diamond", 8, {layer("d"), layer("b"), layer("a"), layer("c")},
                        {{2, 1}, {2, 3}, {1, 0}, {3, 0}});
  std::vector<std::string> ids;
  for (const Layer& l : profile.layers()) ids.push_back(l.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(profile.predecessors(3), (std::vector<std::size_t>{1, 2}));
  EXPECT_EQ(profile.successors(0), (std::vector<std::size_t>{1, 2}));
  EXPECT_EQ(profile.edges().size(), 4u);
  EXPECT_DOUBLE_EQ(profile.total_fwd_ms(), 4.0);
  EXPECT_DOUBLE_EQ(profile.total_bwd_ms(), 8.0);
  EXPECT_DOUBLE_EQ(profile.total_param_bytes(), 40.0);
  EXPECT_EQ(profile.index_of("c"), 2u);
}

TEST(Profile, RejectsACycleNamingItsLayersAndLine) {
  ProfileSourceLines lines{{1, 2, 3}, {4, 5, 6}};
  try {
    Profile("loop", 1, {layer("a"), layer("b"), layer("c")}, {{0, 1}, {1, 2}, {2, 0}}, "loop.txt", lines);
    FAIL() << "a cycle was accepted";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("cycle"));
    EXPECT_THAT(error.what(), HasSubstr("a -> b -> c -> a"));
    EXPECT_THAT(error.what(), HasSubstr("loop.txt:"));
    EXPECT_EQ(error.context().line, 4);  // the edge a -> b
  }
}

TEST(Profile, RejectsNegativeTimesDuplicateIdsAndBadEdges) {
  EXPECT_THROW(Profile("p", 1, {layer("a", -1.0)}, {}), Error);
  EXPECT_THROW(Profile("p", 1, {layer("a"), layer("a")}, {}), Error);
  EXPECT_THROW(Profile("p", 1, {layer("a")}, {{0, 3}}), Error);
  EXPECT_THROW(Profile("p", 1, {layer("a")}, {{0, 0}}), Error);
  EXPECT_THROW(Profile("p", 0, {layer("a")}, {}), Error);
  EXPECT_THROW(Profile("p", 1, {}, {}), Error);
  try {
    Profile("p", 1, {layer("a", 1.0, std::nan(""))}, {}, "p.json");
    FAIL();
  } catch (const Error& error) {
    EXPECT_EQ(error.context().field, "bwd_ms");
  }
}

TEST(ProfileJson, RoundTripsEveryField) {
  Layer with_extras = layer("b", 0.5, 0.75);
  with_extras.bwd_input_ms = 0.25;
  with_extras.bwd_weight_ms = 0.5;
  with_extras.flops = 1e9;
  with_extras.output_bytes = {60, 40};
  Layer input = layer("in", 3.0, 0.0);
  input.is_input = true;
  const Profile original("net", 16, {input, layer("a"), with_extras}, {{0, 1}, {1, 2}}, "net.json");
  const Profile copy = profile_from_json(profile_to_json(original), "copy.json");
  ASSERT_EQ(copy.layer_count(), 3u);
  EXPECT_EQ(copy.batch_size(), 16);
  EXPECT_EQ(copy.name(), "net");
  EXPECT_TRUE(copy.layer(0).is_input);
  const Layer& b = copy.layer(2);
  EXPECT_EQ(b.id, "b");
  EXPECT_DOUBLE_EQ(*b.bwd_input_ms, 0.25);
  EXPECT_DOUBLE_EQ(*b.bwd_weight_ms, 0.5);
  EXPECT_DOUBLE_EQ(*b.flops, 1e9);
  EXPECT_EQ(b.output_bytes, (std::vector<double>{60, 40}));
  EXPECT_EQ(copy.edges(), original.edges());
  EXPECT_EQ(profile_to_json(copy), profile_to_json(original));
}

TEST(ProfileJson, ErrorsNameTheField) {
  nlohmann::json document = profile_to_json(Profile("p", 4, {layer("a"), layer("b")}, {{0, 1}}));
  document["layers"][1].erase("fwd_ms");
  try {
    profile_from_json(document, "p.json");
    FAIL();
  } catch (const Error& error) {
    EXPECT_EQ(error.context().field, "layers[1].fwd_ms");
    EXPECT_THAT(error.what(), HasSubstr("p.json"));
  }
  document = profile_to_json(Profile("p", 4, {layer("a"), layer("b")}, {{0, 1}}));
  document["edges"][0][1] = "zzz";
  EXPECT_THROW(profile_from_json(document, "p.json"), Error);
  document["format"] = "pipetwin.cluster/1";
  EXPECT_THROW(profile_from_json(document, "p.json"), Error);
  try {
    json_fields::parse("{\n \"format\": \n}", "broken.json");
    FAIL();
  } catch (const Error& error) {
    EXPECT_EQ(error.context().line, 3);
  }
}

TEST(ProfileJson, WritesAtomicallyAndLoadsBack) {
  testing::TempDir dir;
  const Profile original("p", 4, {layer("a"), layer("b")}, {{0, 1}});
  write_profile_json(original, dir.file("p.json"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("p.json.tmp")));
  const Profile loaded = load_profile(dir.file("p.json"));
  EXPECT_EQ(profile_to_json(loaded), profile_to_json(original));
}

}  // namespace
}  // namespace pipetwin
