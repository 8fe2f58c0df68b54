#include "planner/cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "planner/error.h"
#include "test_support.h"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;

TEST(Cluster, ShippedPlatformsLoadWithTheirShapes) {
  const Cluster a = load_cluster(testing::platform("pipedream-cluster-a"));
  ASSERT_EQ(a.levels().size(), 2u);
  EXPECT_EQ(a.worker_count(), 16);
  EXPECT_DOUBLE_EQ(a.levels()[0].bandwidth_bytes_per_s, 12e9);
  EXPECT_DOUBLE_EQ(a.levels()[1].bandwidth_bytes_per_s, 1.25e9);
  const Cluster b = load_cluster(testing::platform("pipedream-cluster-b"));
  EXPECT_EQ(b.worker_count(), 16);
  EXPECT_EQ(b.levels()[0].count, 8);
  EXPECT_DOUBLE_EQ(b.levels()[0].bandwidth_bytes_per_s, 25e9);
  EXPECT_DOUBLE_EQ(b.levels()[1].bandwidth_bytes_per_s, 3.125e9);
  const Cluster dgx = load_cluster(testing::platform("dgx-h100"));
  EXPECT_EQ(dgx.levels()[0].count, 8);
  EXPECT_DOUBLE_EQ(dgx.levels()[1].bandwidth_bytes_per_s, 8 * 400e9 / 8);  // 8 x 400 Gb/s in bytes/s
  const Cluster local = load_cluster(testing::platform("localhost-cpu"));
  EXPECT_EQ(local.worker_count(), 2);
}

TEST(Cluster, FirstWorkersTakesWholeInnerUnits) {
  const Cluster b = load_cluster(testing::platform("pipedream-cluster-b"));
  const Cluster one_server = b.first_workers(8);
  ASSERT_EQ(one_server.levels().size(), 1u);
  EXPECT_EQ(one_server.levels()[0].count, 8);
  EXPECT_DOUBLE_EQ(one_server.levels()[0].bandwidth_bytes_per_s, 25e9);
  EXPECT_EQ(b.first_workers(16).levels().size(), 2u);
  EXPECT_EQ(b.first_workers(3).worker_count(), 3);

  const Cluster a = load_cluster(testing::platform("pipedream-cluster-a"));
  const Cluster twelve = a.first_workers(12);
  ASSERT_EQ(twelve.levels().size(), 2u);
  EXPECT_EQ(twelve.levels()[1].count, 3);
  EXPECT_EQ(a.first_workers(1).worker_count(), 1);
  try {
    a.first_workers(6);
    FAIL();
  } catch (const Error& error) {
    EXPECT_EQ(error.context().field, "--workers");
    EXPECT_THAT(error.what(), HasSubstr("whole units of 4"));
  }
  EXPECT_THROW(a.first_workers(17), Error);
  EXPECT_THROW(a.first_workers(0), Error);
}

TEST(Cluster, WorkerSpeedFactorsAreReadCheckedAndFollowFirstWorkers) {
  nlohmann::json spec = cluster_to_json(load_cluster(testing::platform("localhost-cpu")));
  spec["device"]["speed"] = 2.0;
  spec["device"]["worker_speed_factors"] = {0.5, 1.5};
  const Cluster cluster = cluster_from_json(spec, "c.json");
  EXPECT_DOUBLE_EQ(cluster.device().worker_speed(0), 1.0);
  EXPECT_DOUBLE_EQ(cluster.device().worker_speed(1), 3.0);
  EXPECT_EQ(cluster.first_workers(1).device().worker_speed_factors, std::vector<double>{0.5});
  EXPECT_EQ(cluster_from_json(cluster_to_json(cluster), "c.json").device().worker_speed_factors,
            (std::vector<double>{0.5, 1.5}));
  spec["device"]["worker_speed_factors"] = {0.5};
  EXPECT_THROW(cluster_from_json(spec, "c.json"), Error);  // one factor for two workers
  spec["device"]["worker_speed_factors"] = {0.5, 0.0};
  try {
    cluster_from_json(spec, "c.json");
    FAIL();
  } catch (const Error& error) {
    EXPECT_EQ(error.context().field, "device.worker_speed_factors");
  }
  spec["device"]["worker_speed_factors"] = "fast";
  EXPECT_THROW(cluster_from_json(spec, "c.json"), Error);
}

TEST(Cluster, BadSpecsNameTheField) {
  nlohmann::json spec = cluster_to_json(load_cluster(testing::platform("pipedream-cluster-a")));
  spec["levels"][1]["bandwidth_bytes_per_s"] = 0;
  try {
    cluster_from_json(spec, "c.json");
    FAIL();
  } catch (const Error& error) {
    EXPECT_EQ(error.context().field, "levels[1].bandwidth_bytes_per_s");
    EXPECT_EQ(error.context().file, "c.json");
  }
  spec["levels"][1]["bandwidth_bytes_per_s"] = 1e9;
  spec["levels"][0].erase("count");
  try {
    cluster_from_json(spec, "c.json");
    FAIL();
  } catch (const Error& error) {
    EXPECT_EQ(error.context().field, "levels[0].count");
  }
  spec["levels"][0]["count"] = -2;
  EXPECT_THROW(cluster_from_json(spec, "c.json"), Error);
  spec["levels"] = nlohmann::json::array();
  EXPECT_THROW(cluster_from_json(spec, "c.json"), Error);
}

TEST(Cluster, RoundTripsThroughJson) {
  const Cluster a = load_cluster(testing::platform("dgx-h100"));
  EXPECT_EQ(cluster_to_json(cluster_from_json(cluster_to_json(a), "x.json")), cluster_to_json(a));
}

}  // namespace
}  // namespace pipetwin
