#include "planner/cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "planner/error.h"
#include "test_support.h"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;

// "field: message" of the Error a cluster spec raises, or "accepted".
std::string field_of(const nlohmann::json& spec) {
  try {
    cluster_from_json(spec, "c.json");
  } catch (const Error& error) {
    return error.context().field + ": " + error.what();
  }
  return "accepted";
}

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
  // Llama 3's RoCE cluster: 8 pods of 192 racks of 2 servers of 8; racks' uplinks at full bisection
  // (2 servers x 400 GB/s), pods' at 1:7 (192 racks x 800 GB/s / 7).
  const Cluster llama = load_cluster(testing::platform("llama3-24k-roce"));
  EXPECT_EQ(llama.worker_count(), 24576);
  ASSERT_EQ(llama.levels().size(), 4u);
  EXPECT_DOUBLE_EQ(llama.levels()[2].bandwidth_bytes_per_s, 2 * 400e9);
  EXPECT_DOUBLE_EQ(llama.levels()[3].bandwidth_bytes_per_s, 192 * 800e9 / 7);
  EXPECT_EQ(llama.first_workers(3 * 3072).levels().back().count, 3);
  EXPECT_THROW(llama.first_workers(16384), Error);  // 5 1/3 pods: no whole units
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

// A level given by its oversubscription r: the link of each unit below into its switch carries the
// unit's own members' links together / r. DGX H100: 8 GPUs x 450 GB/s over a 400 GB/s NIC is r = 9;
// pods of 32 servers whose uplink is oversubscribed 7:1 carry 32 x 400 GB/s / 7.
TEST(Cluster, OversubscriptionGivesTheUplinkBandwidth) {
  nlohmann::json spec = cluster_to_json(load_cluster(testing::platform("dgx-h100")));
  spec["levels"][1].erase("bandwidth_bytes_per_s");
  spec["levels"][1]["oversubscription"] = 9;
  spec["levels"].push_back({{"name", "cluster"}, {"count", 4}, {"oversubscription", 7}});
  const Cluster cluster = cluster_from_json(spec, "c.json");
  ASSERT_EQ(cluster.levels().size(), 3u);
  EXPECT_DOUBLE_EQ(cluster.levels()[1].bandwidth_bytes_per_s, 400e9);
  EXPECT_DOUBLE_EQ(cluster.levels()[2].bandwidth_bytes_per_s, 32 * 400e9 / 7);
  EXPECT_EQ(cluster.worker_count(), 8 * 32 * 4);
  nlohmann::json below_one = spec;
  below_one["levels"][1]["oversubscription"] = 0.5;
  EXPECT_THAT(field_of(below_one), HasSubstr("levels[1].oversubscription"));
  EXPECT_THAT(field_of(below_one), HasSubstr("below 1"));
  nlohmann::json both = spec;
  both["levels"][1]["bandwidth_bytes_per_s"] = 1e9;
  EXPECT_THAT(field_of(both), HasSubstr("both oversubscription and bandwidth_bytes_per_s"));
  nlohmann::json innermost = spec;
  innermost["levels"][0]["oversubscription"] = 2;
  innermost["levels"][0].erase("bandwidth_bytes_per_s");
  EXPECT_THAT(field_of(innermost), HasSubstr("levels[0].oversubscription"));
}

// A fabric is read, checked against the servers and written back; it covers the whole cluster.
TEST(Cluster, FatTreeFabricIsCheckedAgainstTheServers) {
  nlohmann::json spec = cluster_to_json(load_cluster(testing::platform("dgx-h100")));  // 32 servers of 8
  spec["fabric"] = {{"kind", "fat-tree"}, {"down", {8, 4}}, {"up", {1, 8}}, {"link_count", {1, 1}}, {"bandwidth_bytes_per_s", 50e9}};
  const Cluster cluster = cluster_from_json(spec, "c.json");
  EXPECT_EQ(cluster.fabric().down, (std::vector<int>{8, 4}));
  EXPECT_EQ(cluster_to_json(cluster_from_json(cluster_to_json(cluster), "c.json")), cluster_to_json(cluster));
  EXPECT_EQ(cluster.first_workers(256).fabric().kind, "fat-tree");
  EXPECT_THROW(cluster.first_workers(8), Error);  // the fabric describes all 32 servers
  nlohmann::json leaves = spec;
  leaves["fabric"]["down"] = {8, 3};
  EXPECT_THAT(field_of(leaves), HasSubstr("fabric.down"));
  EXPECT_THAT(field_of(leaves), HasSubstr("24) are not the cluster's 32 servers"));
  nlohmann::json uneven = spec;
  uneven["fabric"]["up"] = {1};
  EXPECT_THAT(field_of(uneven), HasSubstr("fabric.up"));
  nlohmann::json kind = spec;
  kind["fabric"]["kind"] = "mesh";
  EXPECT_THAT(field_of(kind), HasSubstr("fabric.kind"));
  nlohmann::json no_kind = spec;
  no_kind["fabric"].erase("kind");
  EXPECT_THAT(field_of(no_kind), HasSubstr("fabric.kind"));
  // Rail-optimized: no tree lists; read back the same; its NIC bandwidth checked.
  nlohmann::json rails = cluster_to_json(load_cluster(testing::platform("dgx-h100")));
  rails["fabric"] = {{"kind", "rail-optimized"}, {"bandwidth_bytes_per_s", 50e9}};
  const Cluster railed = cluster_from_json(rails, "c.json");
  EXPECT_EQ(railed.fabric().kind, "rail-optimized");
  EXPECT_EQ(cluster_to_json(cluster_from_json(cluster_to_json(railed), "c.json")), cluster_to_json(railed));
  rails["fabric"]["bandwidth_bytes_per_s"] = 0;
  EXPECT_THAT(field_of(rails), HasSubstr("fabric.bandwidth_bytes_per_s"));
}

// Torus and dragonfly: read and written back; their node counts (the product of the dimensions;
// groups x chassis x routers x nodes) must be the 32 servers, and each is named when it is not.
TEST(Cluster, TorusAndDragonflyFabricsAreCheckedAgainstTheServers) {
  nlohmann::json torus = cluster_to_json(load_cluster(testing::platform("dgx-h100")));  // 32 servers of 8
  torus["fabric"] = {{"kind", "torus"}, {"dimensions", {4, 4, 2}}, {"bandwidth_bytes_per_s", 50e9}};
  const Cluster tori = cluster_from_json(torus, "c.json");
  EXPECT_EQ(tori.fabric().dimensions, (std::vector<int>{4, 4, 2}));
  EXPECT_EQ(cluster_to_json(cluster_from_json(cluster_to_json(tori), "c.json")), cluster_to_json(tori));
  torus["fabric"]["dimensions"] = {4, 4};
  EXPECT_THAT(field_of(torus), HasSubstr("fabric.dimensions"));
  EXPECT_THAT(field_of(torus), HasSubstr("(16) are not the cluster's 32 servers"));
  torus["fabric"].erase("dimensions");
  EXPECT_THAT(field_of(torus), HasSubstr("fabric.dimensions"));

  nlohmann::json dragonfly = cluster_to_json(load_cluster(testing::platform("dgx-h100")));
  dragonfly["fabric"] = {{"kind", "dragonfly"}, {"groups", {4, 2}}, {"chassis", {2, 1}}, {"routers", {2, 1}}, {"nodes", 2},
                         {"bandwidth_bytes_per_s", 50e9}};
  const Cluster flies = cluster_from_json(dragonfly, "c.json");
  EXPECT_EQ(flies.fabric().nodes, 2);
  EXPECT_EQ(cluster_to_json(cluster_from_json(cluster_to_json(flies), "c.json")), cluster_to_json(flies));
  nlohmann::json short_of = dragonfly;
  short_of["fabric"]["nodes"] = 1;
  EXPECT_THAT(field_of(short_of), HasSubstr("fabric.nodes"));
  EXPECT_THAT(field_of(short_of), HasSubstr("(16) are not the cluster's 32 servers"));
  nlohmann::json one_number = dragonfly;
  one_number["fabric"]["chassis"] = {2};
  EXPECT_THAT(field_of(one_number), HasSubstr("fabric.chassis"));
  nlohmann::json no_nodes = dragonfly;
  no_nodes["fabric"].erase("nodes");
  EXPECT_THAT(field_of(no_nodes), HasSubstr("nodes"));
}

TEST(Cluster, RoundTripsThroughJson) {
  const Cluster a = load_cluster(testing::platform("dgx-h100"));
  EXPECT_EQ(cluster_to_json(cluster_from_json(cluster_to_json(a), "x.json")), cluster_to_json(a));
  EXPECT_EQ(a.device().runtime_memory_bytes, 0.0);  // absent: nothing beside the stages
  nlohmann::json spec = cluster_to_json(a);
  spec["device"]["runtime_memory_bytes"] = 5e8;
  EXPECT_EQ(cluster_from_json(spec, "x.json").device().runtime_memory_bytes, 5e8);
  spec["device"]["runtime_memory_bytes"] = -1;
  try {
    cluster_from_json(spec, "x.json");
    FAIL();
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), ::testing::HasSubstr("runtime_memory_bytes"));
  }
}

// A machine's cores, what a wake-up costs it on busy cores and what a waiting receive loses: absent is
// none (0, 0, 0); written and read back; a negative count or cost refused naming the file and the field.
TEST(Cluster, CoresBusyWakeAndReceiveWaitAreReadWrittenAndChecked) {
  nlohmann::json spec = cluster_to_json(load_cluster(testing::platform("dgx-h100")));
  spec["device"].erase("cores");
  spec["device"].erase("busy_wake_s");
  spec["device"].erase("receive_wait_s");
  EXPECT_EQ(cluster_from_json(spec, "x.json").device().cores, 0);
  EXPECT_EQ(cluster_from_json(spec, "x.json").device().busy_wake_s, 0.0);
  EXPECT_EQ(cluster_from_json(spec, "x.json").device().receive_wait_s, 0.0);
  spec["device"]["cores"] = 2;
  spec["device"]["busy_wake_s"] = 1.5e-3;
  spec["device"]["receive_wait_s"] = 0.4e-3;
  const Cluster costed = cluster_from_json(spec, "x.json");
  EXPECT_EQ(costed.device().cores, 2);
  EXPECT_EQ(costed.device().busy_wake_s, 1.5e-3);
  EXPECT_EQ(costed.device().receive_wait_s, 0.4e-3);
  EXPECT_EQ(cluster_to_json(costed)["device"]["cores"], 2);
  EXPECT_EQ(cluster_to_json(costed)["device"]["busy_wake_s"], 1.5e-3);
  EXPECT_EQ(cluster_to_json(costed)["device"]["receive_wait_s"], 0.4e-3);
  for (const auto& [field, value] :
       {std::pair<const char*, double>{"cores", -1.0}, {"busy_wake_s", -1e-3}, {"receive_wait_s", -1e-3}}) {
    nlohmann::json bad = spec;
    bad["device"][field] = value;
    try {
      cluster_from_json(bad, "x.json");
      ADD_FAILURE() << field << " " << value << " was accepted";
    } catch (const Error& error) {
      EXPECT_EQ(error.context().file, "x.json");
      EXPECT_EQ(error.context().field, std::string("device.") + field);
    }
  }
}

// The CPU a message costs its machine: absent is none; written and read back; negative refused.
TEST(Cluster, MessageCpuIsReadWrittenAndChecked) {
  nlohmann::json spec = cluster_to_json(load_cluster(testing::platform("dgx-h100")));
  EXPECT_EQ(cluster_from_json(spec, "x.json").device().message_cpu_s, 0.0);
  spec["device"]["message_cpu_s"] = 8e-5;
  spec["device"]["message_cpu_s_per_byte"] = 4e-10;
  const Cluster costed = cluster_from_json(spec, "x.json");
  EXPECT_EQ(costed.device().message_cpu_s, 8e-5);
  EXPECT_EQ(costed.device().message_cpu_s_per_byte, 4e-10);
  EXPECT_EQ(cluster_to_json(costed)["device"]["message_cpu_s_per_byte"], 4e-10);
  spec["device"]["message_cpu_s"] = -1e-5;
  try {
    cluster_from_json(spec, "x.json");
    FAIL();
  } catch (const Error& error) {
    EXPECT_EQ(error.context().file, "x.json");
    EXPECT_THAT(error.what(), ::testing::HasSubstr("message_cpu_s"));
  }
}

}  // namespace
}  // namespace pipetwin
