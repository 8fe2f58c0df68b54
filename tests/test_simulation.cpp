// The SimGrid back end against closed forms and hand-computed link times. Each simulation runs in a
// child process (SimGrid's engine runs once per process).
#include "sim/simulation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "planner/parallel_search.h"
#include "planner/error.h"
#include "planner/schedule_evaluator.h"
#include "planner/schedule_generators.h"
#include "sim/platform.h"
#include "traces/receive_wait_fit.h"
#include "traces/trace_metrics.h"
#include "sim_support.h"
#include "test_support.h"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;

// Links so fast and with no latency that communication costs nothing measurable.
Cluster free_links(int workers) { return testing::link_cluster({{workers, 1e30, 0.0}}); }

sim::SimulationResult run(const Plan& plan, const Cluster& cluster, const std::string& schedule, int microbatches,
                          int iterations = 1, int chunks = 1, int warmup = 0) {
  sim::SimulationConfig config{plan, cluster};
  config.schedule_name = schedule;
  config.microbatches = microbatches;
  config.iterations = iterations;
  config.warmup_iterations = warmup;
  config.chunks = chunks;
  return sim::simulate_in_subprocess(config);
}

std::vector<const TraceEvent*> events(const Trace& trace, ActionKind kind) {
  std::vector<const TraceEvent*> found;
  for (const TraceEvent& e : trace.events) {
    if (e.kind == kind) found.push_back(&e);
  }
  return found;
}

TEST(Simulation, FreeLinksReproduceFillDrainClosedForms) {
  for (const std::string schedule : {"gpipe", "1f1b"}) {
    for (auto [p, m] : {std::pair{2, 1}, std::pair{4, 8}, std::pair{3, 5}}) {
      const auto result = run(testing::straight_plan(p, 1.0, 2.0), free_links(p), schedule, m);
      const double expected = (m + p - 1) * 3.0;
      EXPECT_NEAR(result.summary.makespan_s, expected, 1e-9 * expected) << schedule << " p=" << p << " m=" << m;
      EXPECT_NEAR(result.summary.iteration_s, expected, 1e-9 * expected);
      EXPECT_NEAR(result.summary.bubble_fraction[0], double(p - 1) / (m + p - 1), 1e-9);
    }
  }
}

// Every stage recomputes (r = f = 1 s, as recompute_every_stage sets it): each backward is preceded by
// its R, so fill-drain takes (m + p - 1)(f + b + r), and every R lasts r.
TEST(Simulation, RecomputationAddsItsForwardToEveryBackward) {
  Plan plan = testing::straight_plan(3, 1.0, 2.0);
  recompute_every_stage(plan);
  const int m = 5;
  const auto result = run(plan, free_links(3), "1f1b", m);
  EXPECT_NEAR(result.summary.makespan_s, (m + 3 - 1) * 4.0, 1e-9 * 28);
  const auto recomputes = events(result.trace, ActionKind::RECOMPUTE);
  ASSERT_EQ(recomputes.size(), 3u * m);
  for (const TraceEvent* e : recomputes) EXPECT_NEAR(e->end_s - e->start_s, 1.0, 1e-9);
}

TEST(Simulation, FreeLinksReproduceInterleavedAndZeroBubble) {
  // Interleaved: 4 workers x 2 chunks, each chunk half a stage: bubble (p-1)(tf+tb)/v.
  const auto interleaved = run(testing::straight_plan(8, 0.5, 1.0), free_links(8), "interleaved", 8, 1, 2);
  EXPECT_NEAR(interleaved.summary.makespan_s - 8 * 3.0, 3 * 3.0 / 2, 1e-9 * interleaved.summary.makespan_s);
  // ZB-H1 with tf = tb_input = tb_weight = 1: bubble p - 1.
  const auto zero_bubble = run(testing::straight_plan(4, 1.0, 2.0), free_links(4), "zb-h1", 12);
  EXPECT_NEAR(zero_bubble.summary.makespan_s, 12 * 3.0 + 3, 1e-9 * 39);
}

TEST(Simulation, FreeLinksReproduceTodaysSchedulesClosedForms) {
  // 4 workers, 8 chunks of half a stage (F = I = W = 0.5 s): zb-v and interleaved-zb reach the flush
  // bound 3m + (p-1)/2; dualpipe-v's pairs take F + B, so DualPipe's (p-1)(F&B + B - 3W) = (p-1) s;
  // looped-bfs has interleaved's bubble (p-1)(F+B)/v.
  const Plan plan = testing::straight_plan(8, 0.5, 1.0);
  const int m = 8;
  EXPECT_NEAR(run(plan, free_links(4), "zb-v", m).summary.makespan_s, 3.0 * m + 1.5, 1e-9 * 30);
  EXPECT_NEAR(run(plan, free_links(4), "interleaved-zb", m, 1, 2).summary.makespan_s, 3.0 * m + 1.5, 1e-9 * 30);
  EXPECT_NEAR(run(plan, free_links(4), "dualpipe-v", m).summary.makespan_s, 3.0 * m + 3.0, 1e-9 * 30);
  EXPECT_NEAR(run(plan, free_links(4), "looped-bfs", m, 1, 2).summary.makespan_s, 3.0 * m + 4.5, 1e-9 * 30);
}

// torch's CSV, written by hand: DualPipeV on 4 ranks (8 stages of F = I = W = 0.5 s, 8 microbatches)
// takes DualPipe's bubble (p-1)(F&B + B - 3W) = 3 s over the 24 s each rank computes; the 2-rank
// zero-bubble file (F = I = W = 1 s, 4 microbatches) ends at 3m + (p-1) = 13 s, ZB-H1's bound.
TEST(Simulation, SimulatesTorchScheduleFilesWrittenByHand) {
  sim::SimulationConfig dualpipe{testing::straight_plan(8, 0.5, 1.0), free_links(4)};
  dualpipe.schedule_csv_path = PIPETWIN_SOURCE_DIR "/tests/data/torch_dualpipe_v_4_ranks.csv";
  dualpipe.iterations = 1;
  dualpipe.warmup_iterations = 0;
  EXPECT_NEAR(sim::simulate_in_subprocess(dualpipe).summary.makespan_s, 24.0 + 3.0, 1e-9 * 27);
  sim::SimulationConfig zero_bubble{testing::straight_plan(2, 1.0, 2.0), free_links(2)};
  zero_bubble.schedule_csv_path = PIPETWIN_SOURCE_DIR "/tests/data/torch_zero_bubble_2_ranks.csv";
  zero_bubble.iterations = 1;
  zero_bubble.warmup_iterations = 0;
  EXPECT_NEAR(sim::simulate_in_subprocess(zero_bubble).summary.makespan_s, 13.0, 1e-9 * 13);
}

TEST(Simulation, AgreesWithTheEvaluatorOnEverySchedule) {
  const Plan plan = testing::hand_plan({{{0, 1}, 1.0, 2.0, 1e6, 1e6}, {{2}, 2.0, 4.0, 1e6, 1e6}, {{3}, 1.5, 2.5, 1e6, 1e6}}, 4);
  for (const std::string schedule : {"gpipe", "1f1b", "pipedream", "2bw"}) {
    sim::SimulationConfig config{plan, free_links(4)};
    config.schedule_name = schedule;
    config.microbatches = 4;
    config.iterations = 1;
    config.warmup_iterations = 0;
    const Schedule lowered = sim::prepare_schedule(config).schedule;
    const double expected = evaluate_schedule(lowered, stage_times_from_plan(plan)).makespan_s;
    const auto result = sim::simulate_in_subprocess(config);
    EXPECT_NEAR(result.summary.makespan_s, expected, 1e-9 * expected) << schedule;
  }
}

TEST(Simulation, OneTransferTakesBytesOverBandwidthPlusLatency) {
  // Two workers on one level: 1e8 bytes at 1e9 B/s with 1e-4 s latency: 0.1001 s.
  const Plan plan = testing::hand_plan({{{0}, 0.0, 0.0, 1e8, 0.0}, {{1}, 0.0, 0.0, 0.0, 0.0}}, 2);
  const auto result = run(plan, testing::link_cluster({{2, 1e9, 1e-4}}), "gpipe", 1);
  const auto sends = events(result.trace, ActionKind::SEND_ACT);
  ASSERT_EQ(sends.size(), 1u);
  EXPECT_NEAR(sends[0]->end_s - sends[0]->start_s, 0.1001, 0.01 * 0.1001);
  const auto receives = events(result.trace, ActionKind::RECV_ACT);
  EXPECT_NEAR(receives[0]->end_s, 0.1001, 0.01 * 0.1001);
  // Links are split duplex: the activation goes up worker 0's link and down worker 1's, the gradient
  // the other way, so each direction of each link carries 1e8 bytes.
  EXPECT_NEAR(result.summary.busiest_link.bytes, 1e8, 1.0);
  EXPECT_NEAR(result.summary.busiest_link.bandwidth_bytes_per_s, 1e9, 1.0);
}

TEST(Simulation, TwoFlowsSharingALinkEachGetHalf) {
  // Two servers of two workers; inside a server links are free, between servers 1e9 B/s. Stage 0 on
  // server 0 (workers 0, 1), stage 1 on server 1 (2, 3): microbatches 0 and 1 cross the same NIC at once.
  const Plan plan = testing::hand_plan({{{0, 1}, 0.0, 0.0, 1e8, 0.0}, {{2, 3}, 0.0, 0.0, 0.0, 0.0}}, 4);
  const auto result = run(plan, testing::link_cluster({{2, 1e30, 0.0}, {2, 1e9, 0.0}}), "gpipe", 2);
  const auto sends = events(result.trace, ActionKind::SEND_ACT);
  ASSERT_EQ(sends.size(), 2u);
  for (const TraceEvent* send : sends) EXPECT_NEAR(send->end_s - send->start_s, 0.2, 0.01 * 0.2);
}

// Racks of 2 servers of 2 workers, 2 racks; server NICs 1e9 B/s; the racks' uplinks given by their
// oversubscription: r = 2 makes them 2 x 1e9 / 2 = 1e9. Stage 0 on one worker of each server of rack
// 0, stage 1 in rack 1: microbatches 0 and 1 send 1e8 bytes at once through rack 0's uplink. With
// r = 2 they share it (0.2 s each, twice one alone); with r = 1 (2e9) each has its own NIC's 0.1 s.
TEST(Simulation, TwoFlowsThroughAnOversubscribedUplinkTakeTwiceAsLong) {
  const Plan plan = testing::hand_plan({{{0, 2}, 0.0, 0.0, 1e8, 0.0}, {{4, 6}, 0.0, 0.0, 0.0, 0.0}}, 8);
  for (const double oversubscription : {2.0, 1.0}) {
    const nlohmann::json spec = {
        {"format", "pipetwin.cluster/1"},
        {"name", "racks"},
        {"device", {{"memory_bytes", 80e9}}},
        {"levels",
         {{{"name", "server"}, {"count", 2}, {"bandwidth_bytes_per_s", 1e11}},
          {{"name", "rack"}, {"count", 2}, {"bandwidth_bytes_per_s", 1e9}},
          {{"name", "row"}, {"count", 2}, {"oversubscription", oversubscription}}}}};
    const auto result = run(plan, cluster_from_json(spec, "racks.json"), "gpipe", 2);
    const auto sends = events(result.trace, ActionKind::SEND_ACT);
    ASSERT_EQ(sends.size(), 2u);
    const double expected = oversubscription == 2.0 ? 0.2 : 0.1;
    for (const TraceEvent* send : sends) EXPECT_NEAR(send->end_s - send->start_s, expected, 1e-6) << oversubscription << " worker " << send->worker << " to " << send->peer;
  }
}

// A fat tree of 4 servers (2 workers each on 1e11 B/s): 2 leaf switches of 2 servers, each leaf with
// `up` links to as many top switches, every fabric link 1e9 B/s. Two 1e8-byte flows from the servers
// of leaf 0 to those of leaf 1 at once: the bisection between the leaves is up x 1e9, so with two
// top switches (destinations 2 and 3 routed through different ones) each flow has 1e9 (0.1 s), with
// one they share its link (0.2 s). Inside a server the same message crosses no fabric link.
TEST(Simulation, FatTreeBisectionIsItsUplinksBetweenLeaves) {
  const Plan plan = testing::hand_plan({{{0, 2}, 0.0, 0.0, 1e8, 0.0}, {{4, 6}, 0.0, 0.0, 0.0, 0.0}}, 8);
  for (const int up : {2, 1}) {
    nlohmann::json spec = {
        {"format", "pipetwin.cluster/1"},
        {"name", "fat"},
        {"device", {{"memory_bytes", 80e9}}},
        {"levels", {{{"name", "server"}, {"count", 2}, {"bandwidth_bytes_per_s", 1e11}}, {{"name", "fabric"}, {"count", 4}, {"bandwidth_bytes_per_s", 1e9}}}},
        {"fabric", {{"kind", "fat-tree"}, {"down", {2, 2}}, {"up", {1, up}}, {"link_count", {1, 1}}, {"bandwidth_bytes_per_s", 1e9}}}};
    const auto result = run(plan, cluster_from_json(spec, "fat.json"), "gpipe", 2);
    const auto sends = events(result.trace, ActionKind::SEND_ACT);
    ASSERT_EQ(sends.size(), 2u);
    for (const TraceEvent* send : sends) EXPECT_NEAR(send->end_s - send->start_s, up == 2 ? 0.1 : 0.2, 1e-6) << "up " << up;
  }
}

// Rail-optimized: 2 servers of 2 GPUs. Stage 0 on server 0's two GPUs, stage 1 on server 1's: the
// two microbatches' 1e8-byte activations leave at once, GPU 0 to GPU 2 on rail 0 and GPU 1 to GPU 3
// on rail 1, each on its own 1e9 B/s NIC: 0.1 s each. The levels' tree, where the server's one
// 1e9 B/s link carries both, takes 0.2 s each. Across rails (GPU 0 to GPU 3) the message crosses
// NVLink (1e11) to GPU 1 and leaves by its NIC: the path's slowest link sets the rate, 0.1 s.
TEST(Simulation, RailOptimizedGivesEveryGpuItsOwnNic) {
  const Plan plan = testing::hand_plan({{{0, 1}, 0.0, 0.0, 1e8, 0.0}, {{2, 3}, 0.0, 0.0, 0.0, 0.0}}, 4);
  nlohmann::json spec = {
      {"format", "pipetwin.cluster/1"},
      {"name", "rails"},
      {"device", {{"memory_bytes", 80e9}}},
      {"levels", {{{"name", "server"}, {"count", 2}, {"bandwidth_bytes_per_s", 1e11}}, {{"name", "pod"}, {"count", 2}, {"bandwidth_bytes_per_s", 1e9}}}}};
  const auto tree = run(plan, cluster_from_json(spec, "tree.json"), "gpipe", 2);
  spec["fabric"] = {{"kind", "rail-optimized"}, {"bandwidth_bytes_per_s", 1e9}};
  const auto rails = run(plan, cluster_from_json(spec, "rails.json"), "gpipe", 2);
  for (const auto& [name, result, expected] : {std::tuple{"tree", &tree, 0.2}, std::tuple{"rails", &rails, 0.1}}) {
    const auto sends = events(result->trace, ActionKind::SEND_ACT);
    ASSERT_EQ(sends.size(), 2u) << name;
    for (const TraceEvent* send : sends) EXPECT_NEAR(send->end_s - send->start_s, expected, 1e-6) << name;
  }
  const Plan across = testing::hand_plan({{{0}, 0.0, 0.0, 1e8, 0.0}, {{3}, 0.0, 0.0, 0.0, 0.0}}, 4);
  const auto crossed = run(across, cluster_from_json(spec, "rails.json"), "gpipe", 1);
  const auto sends = events(crossed.trace, ActionKind::SEND_ACT);
  ASSERT_EQ(sends.size(), 1u);
  EXPECT_NEAR(sends[0]->end_s - sends[0]->start_s, 0.1, 1e-6);  // max-min: the path's slowest link, 1e9
}

// A rail-optimized fabric with a spine: 4 servers of 2 GPUs, leaves of 2 servers per rail, NICs of
// 1e9 B/s. GPU 0 (server 0) sends 1e8 bytes to GPU 4 (server 2) and GPU 2 (server 1) to GPU 6
// (server 3) at once, both on rail 0 from leaf 0 to leaf 1: they share leaf 0's uplink, 2 x 1e9 / r.
// Non-blocking (r = 1): 2e9, each flow NIC-bound, 0.1 s; at r = 2: 1e9 shared, 0.2 s each. Within a
// leaf (server 0 to server 1) no uplink is crossed: 0.1 s at any r. Bad leaf sizes and r < 1 are
// refused naming the field.
TEST(Simulation, ARailSpineOversubscribedSharesItsLeafUplink) {
  nlohmann::json spec = {
      {"format", "pipetwin.cluster/1"},
      {"name", "rails"},
      {"device", {{"memory_bytes", 80e9}}},
      {"levels", {{{"name", "server"}, {"count", 2}, {"bandwidth_bytes_per_s", 1e11}}, {{"name", "pod"}, {"count", 4}, {"bandwidth_bytes_per_s", 1e9}}}},
      {"fabric", {{"kind", "rail-optimized"}, {"bandwidth_bytes_per_s", 1e9}, {"servers_per_leaf", 2}}}};
  const Plan across = testing::hand_plan({{{0, 2}, 0.0, 0.0, 1e8, 0.0}, {{4, 6}, 0.0, 0.0, 0.0, 0.0}}, 8);
  const Plan within = testing::hand_plan({{{0}, 0.0, 0.0, 1e8, 0.0}, {{2}, 0.0, 0.0, 0.0, 0.0}}, 8);
  for (double oversubscription : {1.0, 2.0}) {
    spec["fabric"]["spine_oversubscription"] = oversubscription;
    const Cluster cluster = cluster_from_json(spec, "rails.json");
    const auto result = run(across, cluster, "gpipe", 2);
    const auto sends = events(result.trace, ActionKind::SEND_ACT);
    ASSERT_EQ(sends.size(), 2u);
    for (const TraceEvent* send : sends) EXPECT_NEAR(send->end_s - send->start_s, 0.1 * oversubscription, 1e-6) << oversubscription;
    const auto within_leaf = run(within, cluster, "gpipe", 1);  // kept: events() points into its trace
    const auto inside = events(within_leaf.trace, ActionKind::SEND_ACT);
    ASSERT_EQ(inside.size(), 1u);
    EXPECT_NEAR(inside[0]->end_s - inside[0]->start_s, 0.1, 1e-6) << oversubscription;
  }
  EXPECT_EQ(cluster_to_json(cluster_from_json(spec, "rails.json"))["fabric"]["servers_per_leaf"], 2);
  for (const auto& [field, value] : {std::pair{"servers_per_leaf", 3.0}, std::pair{"spine_oversubscription", 0.5}}) {
    nlohmann::json bad = spec;
    bad["fabric"][field] = value;
    if (std::string(field) == "servers_per_leaf") bad["fabric"][field] = 3;
    try {
      cluster_from_json(bad, "bad.json");
      ADD_FAILURE() << field << " taken";
    } catch (const Error& error) {
      EXPECT_EQ(error.context().field, std::string("fabric.") + field);
    }
  }
}

// SimGrid's TORUS above 4 one-GPU servers, every torus link 1 ms and 1e12 B/s (a 1e3-byte message
// is all latency), the servers' own links free: a message to a neighbour crosses one torus link
// (1 ms), to the opposite node of the ring [4] two (2 ms, either way round), and on the 2 x 2 torus
// the node diagonally across (0 to 3) two as well, one per dimension.
TEST(Simulation, TorusMessagesCrossOneLinkPerHop) {
  for (const auto& [dimensions, destination, hops] :
       {std::tuple{std::vector<int>{4}, 1, 1}, std::tuple{std::vector<int>{4}, 2, 2}, std::tuple{std::vector<int>{2, 2}, 3, 2},
        std::tuple{std::vector<int>{2, 2}, 1, 1}}) {
    const Plan plan = testing::hand_plan({{{0}, 0.0, 0.0, 1e3, 0.0}, {{destination}, 0.0, 0.0, 0.0, 0.0}}, 4);
    nlohmann::json spec = {
        {"format", "pipetwin.cluster/1"},
        {"name", "torus"},
        {"device", {{"memory_bytes", 80e9}}},
        {"levels", {{{"name", "server"}, {"count", 1}, {"bandwidth_bytes_per_s", 1e12}}, {{"name", "fabric"}, {"count", 4}, {"bandwidth_bytes_per_s", 1e12}}}},
        {"fabric", {{"kind", "torus"}, {"dimensions", dimensions}, {"bandwidth_bytes_per_s", 1e12}, {"latency_s", 1e-3}}}};
    const auto result = run(plan, cluster_from_json(spec, "torus.json"), "gpipe", 1);
    const auto sends = events(result.trace, ActionKind::SEND_ACT);
    ASSERT_EQ(sends.size(), 1u);
    EXPECT_NEAR(sends[0]->end_s - sends[0]->start_s, hops * 1e-3, 1e-6) << "to " << destination;
  }
}

// SimGrid's DRAGONFLY of 2 groups x 1 chassis x 2 routers x 1 server, every link 1 ms: a message
// between the two routers of one group crosses three links (server to its router, router to router,
// router to server: 3 ms); one to the other group crosses a group link besides, so it takes longer.
TEST(Simulation, DragonflyMessagesBetweenGroupsCrossMoreLinks) {
  std::vector<double> seconds;
  for (int destination : {1, 2}) {
    const Plan plan = testing::hand_plan({{{0}, 0.0, 0.0, 1e3, 0.0}, {{destination}, 0.0, 0.0, 0.0, 0.0}}, 4);
    nlohmann::json spec = {
        {"format", "pipetwin.cluster/1"},
        {"name", "dragonfly"},
        {"device", {{"memory_bytes", 80e9}}},
        {"levels", {{{"name", "server"}, {"count", 1}, {"bandwidth_bytes_per_s", 1e12}}, {{"name", "fabric"}, {"count", 4}, {"bandwidth_bytes_per_s", 1e12}}}},
        {"fabric", {{"kind", "dragonfly"}, {"groups", {2, 1}}, {"chassis", {1, 1}}, {"routers", {2, 1}}, {"nodes", 1},
                    {"bandwidth_bytes_per_s", 1e12}, {"latency_s", 1e-3}}}};
    const auto result = run(plan, cluster_from_json(spec, "dragonfly.json"), "gpipe", 1);
    const auto sends = events(result.trace, ActionKind::SEND_ACT);
    ASSERT_EQ(sends.size(), 1u);
    seconds.push_back(sends[0]->end_s - sends[0]->start_s);
  }
  EXPECT_NEAR(seconds[0], 3e-3, 1e-6);
  EXPECT_GT(seconds[1], seconds[0] + 0.5e-3);
}

TEST(Simulation, RingAllReduceMatchesTheFormula) {
  for (int n : {2, 4, 8}) {
    // One stage replicated n times; 1e9 parameter bytes at 1e10 B/s: 2(n-1)/n * 0.1 s.
    std::vector<int> devices;
    for (int w = 0; w < n; ++w) devices.push_back(w);
    const Plan plan = testing::hand_plan({{devices, 0.0, 0.0, 0.0, 1e9}}, n);
    const auto result = run(plan, testing::link_cluster({{n, 1e10, 0.0}}), "gpipe", n);
    const auto all_reduces = events(result.trace, ActionKind::ALLREDUCE);
    ASSERT_EQ(static_cast<int>(all_reduces.size()), n);
    const double expected = 2.0 * (n - 1) / n * 0.1;
    for (const TraceEvent* e : all_reduces) EXPECT_NEAR(e->end_s - e->start_s, expected, 0.02 * expected) << "n=" << n;
  }
}

sim::SimulationResult run_collective(const Plan& plan, const Cluster& cluster, const std::string& model,
                                     const std::string& all_reduce = "ring", const std::string& schedule = "gpipe",
                                     int iterations = 1) {
  sim::SimulationConfig config{plan, cluster};
  config.schedule_name = schedule;
  config.microbatches = plan.microbatches;
  config.iterations = iterations;
  config.warmup_iterations = 0;
  config.all_reduce = all_reduce;
  config.collective_model = model;
  return sim::simulate_in_subprocess(config);
}

// With latency: a ring all-reduce is 2(n-1) steps of (L + S / (n B)) — a route inside one level is
// two half-latency links, so L is the level's latency. Both models give it; the bulk model with n
// transfers, the step model with 2(n-1) n. Two iterations: the ring's members meet again.
TEST(Simulation, RingAllReduceWithLatencyMatchesTheClosedFormInBothModels) {
  for (int n : {2, 4, 8}) {
    std::vector<int> devices;
    for (int w = 0; w < n; ++w) devices.push_back(w);
    const Plan plan = testing::hand_plan({{devices, 0.0, 0.0, 0.0, 1e9}}, n, n);
    const double latency_s = 1e-3, bandwidth = 1e10;
    const double expected = 2.0 * (n - 1) * (latency_s + 1e9 / n / bandwidth);
    for (const std::string model : {"bulk", "step"}) {
      const auto result = run_collective(plan, testing::link_cluster({{n, bandwidth, latency_s}}), model, "ring", "gpipe", 2);
      const auto all_reduces = events(result.trace, ActionKind::ALLREDUCE);
      ASSERT_EQ(static_cast<int>(all_reduces.size()), 2 * n) << model;
      for (const TraceEvent* e : all_reduces) {
        EXPECT_NEAR(e->end_s - e->start_s, expected, 1e-6 * expected) << model << " n=" << n;
      }
      EXPECT_EQ(result.summary.messages, model == "bulk" ? 2LL * n : 2LL * 2 * (n - 1) * n) << model << " n=" << n;
    }
  }
}

// A runtime's own all-reduce cost (device.all_reduce_overhead_s + bytes x all_reduce_s_per_byte, from
// probe --all-reduce) comes on top of the ring: 2 ms + 1e9 bytes x 1e-11 s = 12 ms more, with every
// ring (n = 2, 4) and both collective models.
TEST(Simulation, TheRuntimesAllReduceOverheadAddsToTheRing) {
  for (int n : {2, 4}) {
    std::vector<int> devices;
    for (int w = 0; w < n; ++w) devices.push_back(w);
    const Plan plan = testing::hand_plan({{devices, 0.0, 0.0, 0.0, 1e9}}, n, n);
    const double latency_s = 1e-3, bandwidth = 1e10;
    const double ring_s = 2.0 * (n - 1) * (latency_s + 1e9 / n / bandwidth);
    const Cluster links = testing::link_cluster({{n, bandwidth, latency_s}});
    DeviceSpec device = links.device();
    device.all_reduce_overhead_s = 2e-3;
    device.all_reduce_s_per_byte = 1e-11;
    const Cluster slower(links.name(), "", device, links.levels(), links.source_path());
    for (const std::string model : {"bulk", "step"}) {
      const auto result = run_collective(plan, slower, model);
      const auto all_reduces = events(result.trace, ActionKind::ALLREDUCE);
      ASSERT_EQ(static_cast<int>(all_reduces.size()), n) << model;
      for (const TraceEvent* e : all_reduces) {
        EXPECT_NEAR(e->end_s - e->start_s, ring_s + 12e-3, 1e-6 * ring_s) << model << " n=" << n;
      }
    }
  }
}

// NCCL's double binary tree on a star of n workers (link bandwidth B, latency L per route): each
// member sends at most one half of the bytes per tree and phase and receives at most two halves, so
// every flow gets at least B/2 and the two into a tree's root exactly B/2: each phase ends after
// S/B plus its depth floor(log2 n) of latencies; reduce then broadcast: 2(floor(log2 n) L + S/B).
// The ring's 2(n-1)(L + S/(nB)) pays n-1 latencies per phase: with L = 1 ms and 1e8 bytes at 1e10
// B/s the tree is faster from 8 members on. 4(n-1) flows per all-reduce (both trees, both phases).
TEST(Simulation, TreeAllReduceMatchesTheClosedForm) {
  for (int n : {4, 8, 16}) {
    std::vector<int> devices;
    for (int w = 0; w < n; ++w) devices.push_back(w);
    const double bytes = 1e8, latency_s = 1e-3, bandwidth = 1e10;
    const Plan plan = testing::hand_plan({{devices, 0.0, 0.0, 0.0, bytes}}, n, n);
    int depth = 0;
    while ((2 << depth) <= n) ++depth;
    const double expected = 2.0 * (depth * latency_s + bytes / bandwidth);
    const double ring = 2.0 * (n - 1) * (latency_s + bytes / n / bandwidth);
    for (const std::string model : {"bulk", "step"}) {
      const auto result = run_collective(plan, testing::link_cluster({{n, bandwidth, latency_s}}), model, "tree", "gpipe", 2);
      const auto all_reduces = events(result.trace, ActionKind::ALLREDUCE);
      ASSERT_EQ(static_cast<int>(all_reduces.size()), 2 * n) << model;
      for (const TraceEvent* e : all_reduces) EXPECT_NEAR(e->end_s - e->start_s, expected, 1e-6 * expected) << model << " n=" << n;
      EXPECT_EQ(result.summary.messages, 2LL * 4 * (n - 1)) << model << " n=" << n;
    }
    if (n >= 8) {
      EXPECT_LT(expected, ring) << n;
    }
  }
}

// Where the step model is affordable, the two agree on iteration time within 1%: a flat ring of 32
// over 4 servers of 8 (slow NICs), the hierarchical all-reduce of the same, and a pipeline of 2
// stages of 16 replicas (each stage on two servers, activations and gradients crossing the NICs)
// with hierarchical all-reduces. Bulk simulates n transfers per ring phase, step 2(n-1) n.
// Where they part: the same pipeline with flat rings across the two servers of each stage. The
// replicas of stage 1 reach the all-reduce at different times; the step model's eager sends let the
// first arrivals start their ring steps over the NICs while stage 0 still waits for gradients through
// them, the bulk model starts a ring when its last member arrives, as NCCL's collectives do, so its
// gradients are not slowed: 12% faster here (1.25 s against 1.42 s).
TEST(Simulation, BulkAndStepCollectivesAgreeOnIterationTime) {
  const Cluster cluster = testing::link_cluster({{8, 1e11, 2e-6}, {4, 2e9, 1e-5}});
  std::vector<int> first, second, all;
  for (int w = 0; w < 32; ++w) (w < 16 ? first : second).push_back(w), all.push_back(w);
  const Plan pipeline = testing::hand_plan({{first, 0.01, 0.02, 5e7, 4e8}, {second, 0.01, 0.02, 0.0, 4e8}}, 32, 32);
  const Plan flat = testing::hand_plan({{all, 0.01, 0.02, 0.0, 4e8}}, 32, 32);
  for (const auto& [name, plan, schedule, all_reduce] :
       {std::tuple{"flat ring", flat, "gpipe", "ring"}, std::tuple{"flat hierarchical", flat, "gpipe", "hierarchical"},
        std::tuple{"pipeline hierarchical", pipeline, "1f1b", "hierarchical"}}) {
    const auto bulk = run_collective(plan, cluster, "bulk", all_reduce, schedule);
    const auto step = run_collective(plan, cluster, "step", all_reduce, schedule);
    EXPECT_NEAR(bulk.summary.iteration_s, step.summary.iteration_s, 0.01 * step.summary.iteration_s) << name;
    EXPECT_LT(2 * bulk.summary.messages, step.summary.messages) << name;
  }
  const auto bulk = run_collective(pipeline, cluster, "bulk", "ring", "1f1b");
  const auto step = run_collective(pipeline, cluster, "step", "ring", "1f1b");
  EXPECT_LT(bulk.summary.iteration_s, 0.95 * step.summary.iteration_s);
  // Stage 0's replicas reach their all-reduce later under the step model: their gradients were slowed.
  auto first_all_reduce_s = [](const sim::SimulationResult& result) {
    double start_s = 1e30;
    for (const TraceEvent* e : events(result.trace, ActionKind::ALLREDUCE)) {
      if (e->stage == 0) start_s = std::min(start_s, e->start_s);
    }
    return start_s;
  };
  EXPECT_LT(first_all_reduce_s(bulk) + 0.1, first_all_reduce_s(step));
}

TEST(Simulation, HierarchicalAllReduceCrossesTheSlowLinkLess) {
  // 2 servers x 4 workers, one stage on all 8: fast links inside (1e11), slow between (1e9).
  std::vector<int> devices{0, 1, 2, 3, 4, 5, 6, 7};
  const Plan plan = testing::hand_plan({{devices, 0.0, 0.0, 0.0, 1e9}}, 8);
  const Cluster cluster = testing::link_cluster({{4, 1e11, 0.0}, {2, 1e9, 0.0}});
  sim::SimulationConfig config{plan, cluster};
  config.schedule_name = "gpipe";
  config.microbatches = 8;
  config.iterations = 1;
  config.warmup_iterations = 0;
  const double ring = sim::simulate_in_subprocess(config).summary.makespan_s;
  config.all_reduce = "hierarchical";
  const double hierarchical = sim::simulate_in_subprocess(config).summary.makespan_s;
  // Across servers each worker's shard (1e9 / 4) is all-reduced between 2 servers by 4 concurrent
  // flows on the NIC: 2 * (1/2) * 2.5e8 * 4 / 1e9 = 1 s; the flat ring moves 2 * 7/8 * 1e9 over it.
  EXPECT_NEAR(hierarchical, 1.0, 0.05);
  EXPECT_LT(hierarchical, ring);
}

TEST(Simulation, IdenticalInputsGiveByteIdenticalTraces) {
  const Plan plan = testing::hand_plan({{{0, 1}, 1.0, 2.0, 5e7, 1e8}, {{2}, 2.0, 3.0, 5e7, 1e8}, {{3}, 1.0, 1.0, 0, 1e8}}, 4);
  const Cluster cluster = testing::link_cluster({{2, 1e10, 1e-5}, {2, 1e9, 1e-4}});
  const auto first = run(plan, cluster, "1f1b", 6, 3, 1, 1);
  const auto second = run(plan, cluster, "1f1b", 6, 3, 1, 1);
  EXPECT_EQ(trace_to_jsonl(first.trace), trace_to_jsonl(second.trace));
  EXPECT_GT(first.trace.events.size(), 100u);
}

TEST(Simulation, WarmUpIterationsAreLeftOut) {
  // Asynchronous PipeDream on a uniform 4-stage pipeline: after the fill, one microbatch per 3 s.
  const auto result = run(testing::straight_plan(4, 1.0, 2.0), free_links(4), "pipedream", 8, 4, 1, 1);
  EXPECT_NEAR(result.summary.iteration_s, 8 * 3.0, 1e-9 * 24);
  EXPECT_NEAR(result.summary.samples_per_s, 32 * 8 / 24.0, 1e-9);
}

// The XML export (one Dijkstra zone of every host and switch) and the platform simulate builds (star
// zones nested level by level) route alike: the same trace, on two levels and on four (servers,
// racks, pods, the cluster; stages and replicas spread so messages and rings cross every level).
// Simulates `plan` (1F1B, 4 microbatches) on the platform built from `cluster` and on its XML export
// loaded back, and expects the same trace.
void expect_xml_export_gives_the_same_trace(const Plan& plan, const Cluster& cluster, const std::string& what) {
  testing::TempDir dir;
  testing::write_file(dir.file("c.xml"), sim::platform_xml(cluster));
  sim::SimulationConfig config{plan, cluster};
  config.schedule_name = "1f1b";
  config.microbatches = 4;
  const auto built = sim::simulate_in_subprocess(config);
  config.platform_xml_path = dir.file("c.xml");
  const auto loaded = sim::simulate_in_subprocess(config);
  ASSERT_EQ(built.trace.events.size(), loaded.trace.events.size()) << what;
  for (std::size_t e = 0; e < built.trace.events.size(); ++e) {
    EXPECT_NEAR(built.trace.events[e].end_s, loaded.trace.events[e].end_s, 1e-9) << what << ", event " << e;
  }
  EXPECT_DOUBLE_EQ(built.summary.makespan_s, loaded.summary.makespan_s) << what;
}

TEST(Simulation, XmlExportLoadsBackAndGivesTheSameTrace) {
  const Plan two_level_plan = testing::hand_plan({{{0, 1}, 1.0, 2.0, 5e7, 1e8}, {{2, 3}, 2.0, 3.0, 0, 1e8}}, 4);
  const Plan four_level_plan = testing::hand_plan(
      {{{0, 5, 13, 22}, 1.0, 2.0, 5e7, 1e8}, {{3, 9}, 2.0, 3.0, 5e7, 1e8}, {{16, 23}, 1.0, 1.0, 0, 1e8}}, 24);
  for (const auto& [cluster, plan] :
       {std::pair{testing::link_cluster({{2, 1e10, 1e-5}, {2, 1e9, 1e-4}}), two_level_plan},
        std::pair{testing::link_cluster({{2, 1e10, 1e-6}, {2, 1e9, 2e-6}, {3, 1.5e9, 3e-6}, {2, 1e9, 4e-6}}), four_level_plan}}) {
    expect_xml_export_gives_the_same_trace(plan, cluster, std::to_string(cluster.levels().size()) + " levels");
  }
}

// A rail-optimized fabric with a 2:1 spine exports too (one Dijkstra zone, the graph the simulator
// builds): the same trace from the XML, with messages across leaves and rails and an all-reduce
// across leaves.
TEST(Simulation, RailOptimizedXmlExportLoadsBackAndGivesTheSameTrace) {
  nlohmann::json spec = {
      {"format", "pipetwin.cluster/1"},
      {"name", "rails"},
      {"device", {{"memory_bytes", 80e9}}},
      {"levels", {{{"name", "server"}, {"count", 2}, {"bandwidth_bytes_per_s", 1e11}, {"latency_s", 1e-6}},
                  {{"name", "pod"}, {"count", 4}, {"bandwidth_bytes_per_s", 1e9}}}},
      {"fabric", {{"kind", "rail-optimized"}, {"bandwidth_bytes_per_s", 1e9}, {"latency_s", 4e-6}, {"servers_per_leaf", 2},
                  {"spine_oversubscription", 2.0}}}};
  const Cluster cluster = cluster_from_json(spec, "rails.json");
  const Plan plan = testing::hand_plan({{{0, 4}, 1.0, 2.0, 5e7, 1e8}, {{3, 7}, 2.0, 3.0, 0, 1e8}}, 8);
  EXPECT_NE(sim::platform_xml(cluster).find("spine_rail1"), std::string::npos);
  sim::SimulationConfig config{plan, cluster};
  config.schedule_name = "1f1b";
  config.microbatches = 4;
  ASSERT_FALSE(events(sim::simulate_in_subprocess(config).trace, ActionKind::ALLREDUCE).empty());
  expect_xml_export_gives_the_same_trace(plan, cluster, "rails");
}

// SimGrid's own cluster zones (fat tree, torus, dragonfly above 4 servers of 2 GPUs) export by their
// routes (a Full zone, every pair of workers routed as SimGrid routes it in the built zone): the same
// trace from the XML, with messages and an all-reduce across servers. Above kMaxRoutedWorkers the export
// is refused naming the fabric.
TEST(Simulation, SimGridClusterZonesExportByTheirRoutesAndGiveTheSameTrace) {
  nlohmann::json spec = {
      {"format", "pipetwin.cluster/1"},
      {"name", "zones"},
      {"device", {{"memory_bytes", 80e9}}},
      {"levels", {{{"name", "server"}, {"count", 2}, {"bandwidth_bytes_per_s", 1e11}, {"latency_s", 1e-6}},
                  {{"name", "pod"}, {"count", 4}, {"bandwidth_bytes_per_s", 1e9}}}}};
  const Plan plan = testing::hand_plan({{{0, 4}, 1.0, 2.0, 5e7, 1e8}, {{3, 7}, 2.0, 3.0, 0, 1e8}}, 8);
  const std::vector<nlohmann::json> fabrics = {
      {{"kind", "fat-tree"}, {"down", {2, 2}}, {"up", {1, 2}}, {"link_count", {1, 1}}, {"bandwidth_bytes_per_s", 1e9}, {"latency_s", 2e-6}},
      {{"kind", "torus"}, {"dimensions", {2, 2}}, {"bandwidth_bytes_per_s", 1e9}, {"latency_s", 3e-6}},
      {{"kind", "dragonfly"}, {"groups", {2, 1}}, {"chassis", {1, 1}}, {"routers", {2, 1}}, {"nodes", 1},
       {"bandwidth_bytes_per_s", 1e9}, {"latency_s", 1e-6}}};
  for (const nlohmann::json& fabric : fabrics) {
    spec["fabric"] = fabric;
    const Cluster cluster = cluster_from_json(spec, "zones.json");
    const std::string xml = sim::platform_xml(cluster);
    EXPECT_NE(xml.find("routing=\"Full\""), std::string::npos);
    // Every ordered pair of the 8 workers has its route.
    std::size_t routes = 0;
    for (std::size_t at = xml.find("<route "); at != std::string::npos; at = xml.find("<route ", at + 1)) ++routes;
    EXPECT_EQ(routes, 8u * 7u) << fabric.at("kind");
    sim::SimulationConfig config{plan, cluster};
    config.schedule_name = "1f1b";
    config.microbatches = 4;
    ASSERT_FALSE(events(sim::simulate_in_subprocess(config).trace, ActionKind::ALLREDUCE).empty());
    expect_xml_export_gives_the_same_trace(plan, cluster, fabric.at("kind").get<std::string>());
  }
  spec["levels"][1]["count"] = 160;  // 320 workers
  spec["fabric"] = {{"kind", "torus"}, {"dimensions", {16, 10}}, {"bandwidth_bytes_per_s", 1e9}};
  try {
    sim::platform_xml(cluster_from_json(spec, "big.json"));
    ADD_FAILURE() << "320 workers were exported route by route";
  } catch (const Error& error) {
    EXPECT_EQ(error.context().file, "big.json");
    EXPECT_EQ(error.context().field, "fabric");
    EXPECT_NE(error.problem().find("320 workers"), std::string::npos);
  }
}

TEST(Simulation, BadConfigurationsAreErrors) {
  sim::SimulationConfig config{testing::straight_plan(2, 1, 1), free_links(2)};
  config.schedule_name = "1f1b";
  config.iterations = 2;
  config.warmup_iterations = 2;
  EXPECT_THROW(sim::simulate_in_subprocess(config), Error);
  config.warmup_iterations = 0;
  config.all_reduce = "butterfly";
  EXPECT_THROW(sim::simulate_in_subprocess(config), Error);
  config.all_reduce = "ring";
  config.collective_model = "rings";
  EXPECT_THROW(sim::simulate_in_subprocess(config), Error);
  config.collective_model = "bulk";
  config.cluster = free_links(1);
  EXPECT_THROW(sim::simulate_in_subprocess(config), Error);  // the plan needs 2 workers
}

TEST(SimulationComputeModel, FlopsOverPeakGiveTheStageTimes) {
  Plan plan = testing::straight_plan(2, 1.0, 2.0);
  plan.stages[0].forward_flops = 2e12;
  plan.stages[1].forward_flops = 4e12;
  // Peak 1e12 FLOP/s at speed 2: stage 0 forward 2 s, backward 4 s; stage 1 forward 4 s, backward 8 s.
  Cluster cluster("flops", "", DeviceSpec{"dev", 2.0, 1e12, 80e9}, {{"server", 2, "link", 1e30, 0.0}});
  sim::SimulationConfig config{plan, cluster};
  config.schedule_name = "gpipe";
  config.microbatches = 1;
  config.iterations = 1;
  config.warmup_iterations = 0;
  config.compute_model = "flops";
  const auto result = sim::simulate_in_subprocess(config);
  EXPECT_NEAR(result.summary.makespan_s, 2 + 4 + 8 + 4, 1e-9);
  config.compute_model = "profile";  // 1 + 1 + 2 + 2 on speed-2 hosts: 3 s
  EXPECT_NEAR(sim::simulate_in_subprocess(config).summary.makespan_s, 3.0, 1e-9);
  config.compute_model = "flops";
  config.plan.stages[1].forward_flops = 0;
  EXPECT_THROW(sim::simulate_in_subprocess(config), Error);
}


TEST(SimulationOverhead, ActionOverheadIsSpentBeforeEveryAction) {
  // One worker, GPipe with 2 microbatches: F0 F1 B0 B1 OPT = 5 actions, each preceded by 0.1 s.
  Cluster cluster("o", "", DeviceSpec{"dev", 1.0, 0.0, 80e9, 0.1}, {{"host", 1, "link", 1e30, 0.0}});
  sim::SimulationConfig config{testing::straight_plan(1, 1.0, 2.0), cluster};
  config.schedule_name = "gpipe";
  config.microbatches = 2;
  config.iterations = 1;
  config.warmup_iterations = 0;
  EXPECT_NEAR(sim::simulate_in_subprocess(config).summary.makespan_s, 2 * 3.0 + 5 * 0.1, 1e-9);
}

TEST(SimulationOverhead, SendOverheadKeepsTheSenderBusyBeforeTheTransfer) {
  // Two stages, one microbatch, free links: F0, post (0.25 s), F1, B1, post (0.25 s), B0.
  Cluster cluster("o", "", DeviceSpec{"dev", 1.0, 0.0, 80e9, 0.0, 0.25}, {{"host", 2, "link", 1e30, 0.0}});
  sim::SimulationConfig config{testing::straight_plan(2, 1.0, 2.0), cluster};
  config.schedule_name = "gpipe";
  config.microbatches = 1;
  config.iterations = 1;
  config.warmup_iterations = 0;
  const auto result = sim::simulate_in_subprocess(config);
  EXPECT_NEAR(result.summary.makespan_s, 2 * 3.0 + 2 * 0.25, 1e-9);
  for (const TraceEvent* send : events(result.trace, ActionKind::SEND_ACT)) EXPECT_NEAR(send->end_s - send->start_s, 0.25, 1e-9);
}

TEST(SimulationOverhead, ReceiveOverheadOnlyWhenTheMessageHadArrived) {
  // GPipe, 2 microbatches, free links; stage 0 forwards in 1 s, stage 1 in 1.5 s. Worker 1 waits for
  // microbatch 0 (arrives at 1: no overhead); microbatch 1 arrived at 2, worker 1 asks at 2.5: 0.25 s.
  Cluster cluster("o", "", DeviceSpec{"dev", 1.0, 0.0, 80e9, 0.0, 0.0, 0.25}, {{"host", 2, "link", 1e30, 0.0}});
  const Plan plan = testing::hand_plan({{{0}, 1.0, 2.0, 1e6, 0}, {{1}, 1.5, 3.0, 1e6, 0}}, 2);
  sim::SimulationConfig config{plan, cluster};
  config.schedule_name = "gpipe";
  config.microbatches = 2;
  config.iterations = 1;
  config.warmup_iterations = 0;
  const auto result = sim::simulate_in_subprocess(config);
  const auto receives = events(result.trace, ActionKind::RECV_ACT);
  ASSERT_EQ(receives.size(), 2u);
  EXPECT_NEAR(receives[0]->start_s, 0.0, 1e-9);
  EXPECT_NEAR(receives[0]->end_s, 1.0, 1e-9);
  EXPECT_NEAR(receives[1]->start_s, 2.5, 1e-9);
  EXPECT_NEAR(receives[1]->end_s, 2.75, 1e-9);
}

TEST(SimulationOverhead, EachWorkerComputesAtItsOwnSpeed) {
  // Worker 1 at half speed: GPipe, one microbatch, free links: 1 + 2 x (1 + 2) + 2 = 9 s.
  DeviceSpec device{"dev", 1.0, 0.0, 80e9};
  device.worker_speed_factors = {1.0, 0.5};
  sim::SimulationConfig config{testing::straight_plan(2, 1.0, 2.0), Cluster("s", "", device, {{"host", 2, "link", 1e30, 0.0}})};
  config.schedule_name = "gpipe";
  config.microbatches = 1;
  config.iterations = 1;
  config.warmup_iterations = 0;
  EXPECT_NEAR(sim::simulate_in_subprocess(config).summary.makespan_s, 9.0, 1e-9);
}

// Workers sharing one machine's compute (device shared_compute): GPipe, two microbatches, f = 1, b = 2,
// free links. Worker 1's first forward overlaps worker 0's second; each backward of worker 0 but the
// last overlaps one of worker 1's.
sim::SimulationResult shared_run(double shared_compute, double share0, double share1) {
  DeviceSpec device{"dev", 1.0, 0.0, 80e9};
  device.shared_compute = shared_compute;
  Plan plan = testing::straight_plan(2, 1.0, 2.0);
  plan.stages[0].compute_share = share0;
  plan.stages[1].compute_share = share1;
  return run(plan, Cluster("s", "", device, {{"host", 2, "link", 1e30, 0.0}}), "gpipe", 2);
}

double end_of(const Trace& trace, int worker, ActionKind kind, int microbatch) {
  for (const TraceEvent& e : trace.events) {
    if (e.worker == worker && e.kind == kind && e.microbatch == microbatch) return e.end_s;
  }
  return -1.0;
}

TEST(SimulationSharedCompute, CapacityForTwoIsNoContention) {
  EXPECT_NEAR(shared_run(2.0, 1.0, 1.0).summary.makespan_s, 9.0, 1e-9);  // (m + p - 1)(f + b)
}

TEST(SimulationSharedCompute, OneWorkersWorthSharedEquallyHalvesOverlappedRates) {
  // F0 [0,1] alone; F1 on w0 and F0 on w1 both at 1/2: [1,3]; w1 F1 [3,4]; w1 B [4,6] alone; w0 B and
  // w1 B both at 1/2: [6,10]; w0's last B alone [10,12].
  const auto result = shared_run(1.0, 1.0, 1.0);
  EXPECT_NEAR(result.summary.makespan_s, 12.0, 1e-9);
  EXPECT_NEAR(end_of(result.trace, 0, ActionKind::FORWARD, 1), 3.0, 1e-9);
  // 1.5 workers' worth: overlapped at 3/4 each: F [1, 1 + 4/3]; w1 F1 then B alone to 1 + 4/3 + 3;
  // both B: 8/3 more; w0's last B 2: 10 in all.
  EXPECT_NEAR(shared_run(1.5, 1.0, 1.0).summary.makespan_s, 10.0, 1e-9);
}

TEST(SimulationSharedCompute, SharesFollowTheStagesComputeShare) {
  // Shares 3:1 of one worker's worth: w0 runs at 3/4 while w1 runs at 1/4 (then alone at 1): w0's F1
  // ends at 1 + 1 / (3/4); w1's F0 has done 1/3 by then and ends 2/3 later, at 3.
  const auto result = shared_run(1.0, 3.0, 1.0);
  EXPECT_NEAR(end_of(result.trace, 0, ActionKind::FORWARD, 1), 1.0 + 4.0 / 3.0, 1e-9);
  EXPECT_NEAR(end_of(result.trace, 1, ActionKind::FORWARD, 0), 3.0, 1e-9);
}

TEST(SimulationSharedCompute, CapacityByCountFollowsHowManyWorkersCompute) {
  // Capacity 0.5 for one computing worker, 2 for two (each then at its bound, 1): F0 [0,2] alone;
  // both [2,3]; w1's F1 alone [3,5] and its first B [5,9]; both B [9,11]; w0's last B alone [11,15].
  DeviceSpec device{"dev", 1.0, 0.0, 80e9};
  device.shared_compute_by_count = {0.5, 2.0};
  const auto result = run(testing::straight_plan(2, 1.0, 2.0), Cluster("s", "", device, {{"host", 2, "link", 1e30, 0.0}}),
                          "gpipe", 2);
  EXPECT_NEAR(result.summary.makespan_s, 15.0, 1e-9);
  EXPECT_NEAR(end_of(result.trace, 0, ActionKind::FORWARD, 1), 3.0, 1e-9);
}

// A worker woken by its message while every core of the machine is held by another worker's compute
// costs the machine device.busy_wake_s (0.5 s here) of its CPU before it goes on. One core, capacity two
// workers' worth (no slow-down from sharing), GPipe over 2 microbatches, f = 1, b = 2, 0.5 s links.
// w0: F0 [0,1], F1 [1,2]. w1 waits from 0; microbatch 0 arrives at 1.5 while w0 computes F1: its
// receive ends at 2, F0 [2,3]; microbatch 1 arrived at 2.5, before w1 asked (at 3): no cost, F1 [3,4];
// its backwards [4,6], [6,8]. w0 waits from 2; the first gradient arrives at 6.5 while w1 computes: its
// receive ends at 7, B [7,9]; the second arrived at 8.5, before it asked: B [9,11]. Without the cost (two
// cores, cores unknown, or a woken worker whose peer does not compute) w1's F0 ends at 2.5, the run at 10.
TEST(SimulationSharedCompute, AWakeUpOnBusyCoresCostsTheMachine) {
  auto simulated = [](int cores) {
    DeviceSpec device{"dev", 1.0, 0.0, 80e9};
    device.shared_compute = 2.0;
    device.cores = cores;
    device.busy_wake_s = 0.5;
    return run(testing::straight_plan(2, 1.0, 2.0), Cluster("s", "", device, {{"host", 2, "link", 1e30, 0.5}}),
               "gpipe", 2);
  };
  const auto one_core = simulated(1);
  EXPECT_NEAR(end_of(one_core.trace, 1, ActionKind::RECV_ACT, 0), 2.0, 1e-9);
  EXPECT_NEAR(end_of(one_core.trace, 1, ActionKind::FORWARD, 0), 3.0, 1e-9);
  EXPECT_NEAR(end_of(one_core.trace, 1, ActionKind::RECV_ACT, 1), 3.0, 1e-9);
  EXPECT_NEAR(end_of(one_core.trace, 1, ActionKind::FORWARD, 1), 4.0, 1e-9);
  EXPECT_NEAR(one_core.summary.makespan_s, 11.0, 1e-9);
  for (const int cores : {2, 0}) {
    const auto free = simulated(cores);
    EXPECT_NEAR(end_of(free.trace, 1, ActionKind::FORWARD, 0), 2.5, 1e-9) << cores << " cores";
    EXPECT_NEAR(free.summary.makespan_s, 10.0, 1e-9) << cores << " cores";
  }
}

// A message's CPU (device.message_cpu_s, 0.5 s here) runs on the shared machine (one worker's worth)
// beside its workers: F0 [0,1]; its message's CPU, w0's F1 and w1's F0 at 1/3 each until the message's
// 0.5 s is done, at 2.5; both forwards at 1/2 for their last 0.5 s: [1, 3.5] (3 without it). The
// second message's CPU and w1's F1 at 1/2 each from 3.5 to 4.5, then F1 alone: it ends at 5.
TEST(SimulationSharedCompute, AMessagesCpuSlowsTheMachinesComputing) {
  DeviceSpec device{"dev", 1.0, 0.0, 80e9};
  device.shared_compute = 1.0;
  device.message_cpu_s = 0.5;
  const auto result = run(testing::straight_plan(2, 1.0, 2.0), Cluster("s", "", device, {{"host", 2, "link", 1e30, 0.0}}),
                          "gpipe", 2);
  EXPECT_NEAR(end_of(result.trace, 0, ActionKind::FORWARD, 1), 3.5, 1e-9);
  EXPECT_NEAR(end_of(result.trace, 1, ActionKind::FORWARD, 0), 3.5, 1e-9);
  EXPECT_NEAR(end_of(result.trace, 1, ActionKind::FORWARD, 1), 5.0, 1e-9);
  // Per byte alike: 0.5 s for the straight plan's messages of activation_bytes.
  device.message_cpu_s = 0.0;
  const Plan plan = testing::straight_plan(2, 1.0, 2.0);
  device.message_cpu_s_per_byte = 0.5 / plan.stages[0].output_activation_bytes;
  const auto per_byte = run(plan, Cluster("s", "", device, {{"host", 2, "link", 1e30, 0.0}}), "gpipe", 2);
  EXPECT_NEAR(end_of(per_byte.trace, 0, ActionKind::FORWARD, 1), 3.5, 1e-9);
}

// The runtime's own time is the worker's CPU: on a shared machine (one worker's worth) posting a send
// (0.5 s) shares it. Stage 1 forwards in 3 s. F0 [0,1]; w0 posts alone [1,1.5]; w0's F1 and w1's F0 at
// 1/2: w0's F1 ends at 3.5 (w1's F0 has 2 s left); w0 posts F1's output beside it, both at 1/2, to
// 4.5; w1's F0 alone for its last 1.5 s: ends at 6 (5.5 were posting an idle wait).
TEST(SimulationSharedCompute, PostingASendSharesTheMachine) {
  DeviceSpec device{"dev", 1.0, 0.0, 80e9};
  device.shared_compute = 1.0;
  device.send_overhead_s = 0.5;
  const Plan plan = testing::hand_plan({{{0}, 1.0, 2.0, 1e6, 0}, {{1}, 3.0, 2.0, 1e6, 0}}, 2);
  const auto result = run(plan, Cluster("s", "", device, {{"host", 2, "link", 1e30, 0.0}}), "gpipe", 2);
  EXPECT_NEAR(end_of(result.trace, 0, ActionKind::FORWARD, 1), 3.5, 1e-9);
  EXPECT_NEAR(end_of(result.trace, 1, ActionKind::FORWARD, 0), 6.0, 1e-9);
}

// Two workers of `device` on one host, joined by free links.
Cluster two_on_one_host(const DeviceSpec& device) { return Cluster("s", "", device, {{"host", 2, "link", 1e30, 0.0}}); }

// Where the machine has a core for each of its workers (two here), the runtime's own time and a
// message's CPU keep off its compute; with fewer cores than workers they share it, as in the two tests
// above. The posting test's plan (stage 1 forwards in 3 s), one worker's worth, 0.5 s posting: F0 [0,1];
// w0 posts [1,1.5] off the machine; w0's F1 and w1's F0 at 1/2 each: w0's F1 ends at 3.5, w1's F0 has 2 s
// left; w0 posts again [3.5,4] off the machine while w1's F0 runs alone: it ends at 5.5 (one core: 6). A
// message's CPU (0.5 s) costs the compute nothing: both forwards [1,3] at 1/2 each, w1's F1 alone [3,4].
TEST(SimulationSharedCompute, WithACoreEachTheRuntimeAndMessagesKeepOffTheCompute) {
  DeviceSpec device{"dev", 1.0, 0.0, 80e9};
  device.shared_compute = 1.0;
  device.send_overhead_s = 0.5;
  const Plan plan = testing::hand_plan({{{0}, 1.0, 2.0, 1e6, 0}, {{1}, 3.0, 2.0, 1e6, 0}}, 2);
  for (const auto& [cores, second_forward_end_s] : {std::pair{2, 5.5}, std::pair{1, 6.0}}) {
    device.cores = cores;
    const auto result = run(plan, two_on_one_host(device), "gpipe", 2);
    EXPECT_NEAR(end_of(result.trace, 0, ActionKind::FORWARD, 1), 3.5, 1e-9) << cores << " cores";
    EXPECT_NEAR(end_of(result.trace, 1, ActionKind::FORWARD, 0), second_forward_end_s, 1e-9) << cores << " cores";
  }
  device.send_overhead_s = 0.0;
  device.message_cpu_s = 0.5;
  device.cores = 2;
  const auto messages = run(testing::straight_plan(2, 1.0, 2.0), two_on_one_host(device), "gpipe", 2);
  EXPECT_NEAR(end_of(messages.trace, 0, ActionKind::FORWARD, 1), 3.0, 1e-9);
  EXPECT_NEAR(end_of(messages.trace, 1, ActionKind::FORWARD, 0), 3.0, 1e-9);
  EXPECT_NEAR(end_of(messages.trace, 1, ActionKind::FORWARD, 1), 4.0, 1e-9);
}

// A receive that waits for its message loses device.receive_wait_s (0.25 s) once the message is there; one
// whose message had arrived loses nothing. GPipe over 2 microbatches, f = 1, b = 2, free links: w1 waits
// from 0 for microbatch 0 (there at 1): its receive ends at 1.25, F0 [1.25,2.25]; microbatch 1 arrived at
// 2, before w1 asked: F1 [2.25,3.25], B0 [3.25,5.25], B1 [5.25,7.25]. w0 waits from 2 for the first
// gradient (there at 5.25): its receive ends at 5.5, B0 [5.5,7.5]; the second arrived at 7.25, before it
// asked: B1 [7.5,9.5]. Without the wait the run takes 9 s.
TEST(Simulation, AWaitingReceiveLosesTheReceiveWait) {
  DeviceSpec device{"dev", 1.0, 0.0, 80e9};
  device.receive_wait_s = 0.25;
  const auto result = run(testing::straight_plan(2, 1.0, 2.0), two_on_one_host(device), "gpipe", 2);
  EXPECT_NEAR(end_of(result.trace, 1, ActionKind::RECV_ACT, 0), 1.25, 1e-9);
  EXPECT_NEAR(end_of(result.trace, 1, ActionKind::FORWARD, 1), 3.25, 1e-9);
  EXPECT_NEAR(end_of(result.trace, 0, ActionKind::RECV_GRAD, 0), 5.5, 1e-9);
  EXPECT_NEAR(result.summary.makespan_s, 9.5, 1e-9);
}

// fit_receive_wait_s recovers the receive wait a run was simulated with: 1F1B over 4 microbatches, the
// second stage slower (f = 1.5, b = 3 against 1, 2) so that the first waits for each gradient; 3
// iterations, the first a warm-up. Simulated with 0.3 s, then fitted from 0.
TEST(Simulation, TheReceiveWaitFitRecoversTheWaitARunWasSimulatedWith) {
  const Plan plan = testing::hand_plan({{{0}, 1.0, 2.0, 1e6, 0}, {{1}, 1.5, 3.0, 1e6, 0}}, 2);
  auto iteration_s = [&](double receive_wait_s) {
    DeviceSpec device{"dev", 1.0, 0.0, 80e9};
    device.receive_wait_s = receive_wait_s;
    return trace_metrics(run(plan, two_on_one_host(device), "1f1b", 4, 3, 1, 1).trace).median_iteration_s;
  };
  const double measured_s = iteration_s(0.3);
  ASSERT_GT(measured_s, iteration_s(0.0));  // the wait shows in the run
  EXPECT_NEAR(fit_receive_wait_s(iteration_s, measured_s), 0.3, 1e-4 * measured_s);
}

// Two stages of 3 GB activations and 1 MB parameters, 1F1B over 4 microbatches: worker 0 keeps
// p - s = 2 microbatches in flight, worker 1 one. Worker 0: 2 x 3 GB + one weight version (1 MB) + one
// momentum buffer (1 MB) = 6.002 GB; worker 1: 3.002 GB.
sim::SimulationConfig memory_config(double device_memory_bytes) {
  Plan plan = testing::straight_plan(2, 1.0, 2.0);
  for (PlanStage& stage : plan.stages) stage.activation_bytes = 3e9;
  sim::SimulationConfig config{plan, Cluster("m", "", DeviceSpec{"dev", 1.0, 0.0, device_memory_bytes},
                                             {{"server", 2, "link", 1e30, 0.0}}, "m.json")};
  config.schedule_name = "1f1b";
  config.microbatches = 4;
  config.iterations = 1;
  config.warmup_iterations = 0;
  return config;
}

TEST(SimulationMemory, AnInfeasiblePlanIsRejectedWithTheWorkerStageAndNumbers) {
  sim::SimulationConfig config = memory_config(5e9);
  try {
    sim::simulate_in_subprocess(config);
    FAIL() << "a plan needing 6.002 GB on a 5 GB device was simulated";
  } catch (const Error& error) {
    EXPECT_EQ(error.context().field, "device.memory_bytes");
    EXPECT_THAT(error.what(), HasSubstr("infeasible with the 1f1b schedule, not run"));
    EXPECT_THAT(error.what(), HasSubstr("worker 0 (stage 0) needs 6.002 GB"));
    EXPECT_THAT(error.what(), HasSubstr("6.000 GB of activations and 0.001 GB of weights"));
    EXPECT_THAT(error.what(), HasSubstr("up to 2 microbatches in flight, 1 weight version"));
    EXPECT_THAT(error.what(), HasSubstr("0.001 GB of optimizer state; the limit is 5.000 GB"));
    EXPECT_THAT(error.what(), HasSubstr("--ignore-memory"));
  }
  config.ignore_memory = true;  // simulated on request, and the summary shows the same figures
  const auto forced = sim::simulate_in_subprocess(config);
  ASSERT_EQ(forced.summary.peak_memory_bytes.size(), 2u);
  EXPECT_DOUBLE_EQ(forced.summary.peak_memory_bytes[0], 6.002e9);
  EXPECT_DOUBLE_EQ(forced.summary.peak_memory_bytes[1], 3.002e9);
  // Between the two workers' needs only worker 1 fits: still infeasible, on a 7 GB device it runs.
  EXPECT_THROW(sim::simulate_in_subprocess(memory_config(4e9)), Error);
  EXPECT_NO_THROW(sim::simulate_in_subprocess(memory_config(7e9)));
}

TEST(SimulationSchedule, ALoadedScheduleRunsAndADeadlockedOneIsRejectedBeforeSimulating) {
  testing::TempDir dir;
  sim::SimulationConfig config{testing::straight_plan(2, 1.0, 2.0), free_links(2)};
  config.schedule_name = "1f1b";
  config.microbatches = 4;
  config.iterations = 1;
  config.warmup_iterations = 0;
  Schedule schedule = sim::prepare_schedule(config).schedule;
  testing::write_file(dir.file("ok.csv"), schedule_to_csv(schedule));
  config.schedule_csv_path = dir.file("ok.csv");
  // The file is simulated as it is: what the configuration would generate plays no part.
  config.schedule_name = "gpipe";
  config.microbatches = 7;
  const sim::SimulationResult loaded = sim::simulate_in_subprocess(config);
  EXPECT_NEAR(loaded.summary.makespan_s, (4 + 2 - 1) * 3.0, 1e-9);
  EXPECT_EQ(loaded.trace.header.schedule, "1f1b");
  EXPECT_EQ(loaded.trace.header.microbatches, 4);
  for (const TraceEvent& e : loaded.trace.events) {
    if (is_send(e.kind) || is_receive(e.kind)) {
      EXPECT_GE(e.message, 0);  // every message carries its id
    }
  }

  // Worker 0 waits for microbatch 0's gradient before sending microbatch 0's activation: no order of
  // events lets both workers finish.
  auto& worker = schedule.workers[0];
  const auto position = [&worker](const std::string& text) {
    for (std::size_t i = 0; i < worker.size(); ++i) {
      if (to_text(worker[i]) == text) return i;
    }
    throw std::runtime_error(text + " not in worker 0's list");
  };
  const Action receive = worker[position("0RECV_B0")];
  worker.erase(worker.begin() + static_cast<long>(position("0RECV_B0")));
  worker.insert(worker.begin() + static_cast<long>(position("0SEND_F0")), receive);
  testing::write_file(dir.file("stuck.csv"), schedule_to_csv(schedule));
  config.schedule_csv_path = dir.file("stuck.csv");
  try {
    sim::simulate_in_subprocess(config);
    FAIL() << "a deadlocked schedule was simulated";
  } catch (const Error& error) {
    EXPECT_EQ(error.context().file, dir.file("stuck.csv"));
    EXPECT_THAT(error.what(), HasSubstr("deadlock"));
    EXPECT_THAT(error.what(), HasSubstr("worker 0"));
  }
}

// The search's on-paper iteration and the simulated one of the plan it writes agree where nothing
// contends (tensor parallel 4 in one server, its sums the only traffic; or 2 stages x 2 replicas inside
// one server, each GPU on its own link); where the 4 pipelines of 2 stages x 4 replicas all cross one
// 10 GB/s uplink at once, or the 4 tensor-parallel ranks of a stage each send their share of the
// activations over their server's one uplink, the simulation is slower (contention the estimate
// leaves out: it gives every rank's message the uplink's bandwidth).
TEST(SimulationParallelSearch, TheWrittenPlanSimulatesToTheSearchsEstimate) {
  TransformerSpec spec = transformer_preset("llama2-7b");
  spec.layers = 8, spec.hidden = 1024, spec.ffn_hidden = 4096, spec.heads = 16, spec.kv_heads = 4;
  spec.sequence_length = 1024;
  const Cluster cluster("two-servers", "", DeviceSpec{"gpu", 1.0, 100e12, 1e12},
                        {{"server", 4, "nvlink", 100e9, 1e-6}, {"cluster", 2, "ib", 10e9, 5e-6}}, "two-servers.json");
  const Cluster one_server("one-server", "", DeviceSpec{"gpu", 1.0, 100e12, 1e12},
                           {{"server", 4, "nvlink", 100e9, 1e-6}}, "one-server.json");
  struct Case {
    const Cluster* cluster;
    int t, p;
    bool contended;
  };
  for (const Case& c : {Case{&one_server, 4, 1, false}, Case{&one_server, 1, 2, false}, Case{&cluster, 1, 2, true},
                        Case{&cluster, 4, 2, true}}) {
    const auto [cluster_of_case, t, p, contended] = c;
    ParallelSearchRequest request;
    request.model = spec;
    request.global_batch = 8;
    request.tensor_parallel = {t};
    request.stages = {p};
    request.microbatch_sizes = {1};
    request.recomputation = {Recomputation::selective};
    request.schedules = {"1f1b"};
    const ParallelSearchResult result = search_parallel_plans(request, *cluster_of_case);
    ASSERT_EQ(result.configurations.size(), 1u);
    const ParallelConfiguration& chosen = result.configurations.front();
    const ParallelPlan plan = parallel_plan(request, *cluster_of_case, chosen);
    const auto simulated = run(plan.plan, plan.cluster, "1f1b", chosen.microbatches * chosen.data_parallel);
    const double ratio = simulated.summary.makespan_s / chosen.iteration_s;
    if (contended) {
      EXPECT_GT(ratio, 1.01) << chosen.label();
    } else {
      EXPECT_NEAR(ratio, 1.0, 0.01) << chosen.label();
    }
  }
}

}  // namespace
}  // namespace pipetwin
