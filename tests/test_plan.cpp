#include "planner/plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "planner/error.h"
#include "planner/profile_io.h"
#include "test_support.h"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;

struct Vgg16Plan {
  Profile profile = load_profile(testing::pipedream_profile("vgg16"));
  Cluster cluster = load_cluster(testing::platform("pipedream-cluster-a"));
  OptimizerOptions options;
  PartitionResult result = optimize_partition(profile, cluster, options);
  Plan plan = make_plan(profile, cluster, options, result, "pipedream", 16);
};

TEST(Plan, CarriesThePredictionsAndStages) {
  const Vgg16Plan made;
  const Plan& plan = made.plan;
  EXPECT_EQ(plan.workers, 16);
  EXPECT_EQ(plan.microbatch_size, 64);
  EXPECT_DOUBLE_EQ(plan.slowest_stage_s, made.result.pipeline_time_s);
  EXPECT_DOUBLE_EQ(plan.time_per_iteration_s, 16 * made.result.pipeline_time_s);
  EXPECT_DOUBLE_EQ(plan.samples_per_s, 64 / made.result.pipeline_time_s);
  ASSERT_EQ(plan.stages.size(), made.result.stages.size());
  // In-flight minibatches: warm-up = floor((workers - 1 - workers before) / replicas), plus one.
  int before = 0;
  for (const PlanStage& stage : plan.stages) {
    const int warm_up = static_cast<int>(std::floor(double(16 - 1 - before) / stage.replicas));
    EXPECT_EQ(stage.in_flight, warm_up + 1);
    EXPECT_DOUBLE_EQ(stage.memory_bytes,
                     stage.in_flight * (stage.param_bytes + stage.activation_bytes) + stage.param_bytes);
    // What a split backward's I leaves for its W: the gradients of the stage's layer outputs (the input
    // node's data excluded).
    double outputs = 0.0;
    for (std::size_t l : stage.layer_indices) {
      if (!made.profile.layer(l).is_input) outputs += made.profile.layer(l).activation_bytes;
    }
    EXPECT_DOUBLE_EQ(stage.output_gradient_bytes, outputs);
    EXPECT_GT(stage.output_gradient_bytes, 0.0);
    before += stage.replicas;
  }
  EXPECT_EQ(plan.stages.back().in_flight, 1);
}

TEST(Plan, RoundTripsThroughJsonFile) {
  const Vgg16Plan made;
  testing::TempDir dir;
  write_plan(made.plan, dir.file("plan.json"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("plan.json.tmp")));
  const Plan loaded = load_plan(dir.file("plan.json"));
  EXPECT_EQ(plan_to_json(loaded), plan_to_json(made.plan));
}

TEST(Plan, SummaryShowsLevelsStagesAndSpeedup) {
  const Vgg16Plan made;
  const std::string summary = plan_summary(made.plan, made.profile, made.result);
  EXPECT_THAT(summary, HasSubstr("Level 2 'cluster'"));
  EXPECT_THAT(summary, HasSubstr("Level 1 'server'"));
  EXPECT_THAT(summary, HasSubstr("configuration " + made.plan.configuration));
  EXPECT_THAT(summary, HasSubstr("1.998771186x"));
  EXPECT_THAT(summary, HasSubstr("0.06688875213 s"));
}

TEST(Plan, BadPlansNameTheField) {
  const Vgg16Plan made;
  nlohmann::json document = plan_to_json(made.plan);
  document["stages"][0]["devices"][0] = 99;
  try {
    plan_from_json(document, "plan.json");
    FAIL();
  } catch (const Error& error) {
    EXPECT_EQ(error.context().field, "stages[0].devices");
    EXPECT_THAT(error.what(), HasSubstr("outside"));
  }
  document = plan_to_json(made.plan);
  document["stages"][1]["devices"] = document["stages"][0]["devices"];
  EXPECT_THROW(plan_from_json(document, "plan.json"), Error);
  document = plan_to_json(made.plan);
  document["stages"][0]["replicas"] = 1000;
  EXPECT_THROW(plan_from_json(document, "plan.json"), Error);
  document = plan_to_json(made.plan);
  document.erase("stages");
  EXPECT_THROW(plan_from_json(document, "plan.json"), Error);
  document = plan_to_json(made.plan);
  document["microbatches"] = 0;
  EXPECT_THROW(plan_from_json(document, "plan.json"), Error);
}

}  // namespace
}  // namespace pipetwin
