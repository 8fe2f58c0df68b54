#include "sim/simulation.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>
#include <memory>
#include <simgrid/s4u.hpp>
#include <xbt/log.h>

#include "planner/error.h"
#include "planner/schedule_interpreter.h"
#include "sim/platform.h"
#include "traces/trace_metrics.h"

namespace sg4 = simgrid::s4u;

namespace pipetwin::sim {
namespace {

// What travels in a mailbox: the message id, to check that each receive gets its own message.
struct Payload {
  int message;
};

std::string message_mailbox(int message) { return "m/" + std::to_string(message); }
std::string tensor_mailbox(int gpu) { return "tp/" + std::to_string(gpu); }
std::string ring_mailbox(int stage, const std::string& ring, int to) {
  return "r/" + std::to_string(stage) + "/" + ring + "/" + std::to_string(to);
}

// One ring of an all-reduce: an ordered list of workers and the name of the ring.
struct Ring {
  std::string tag;
  std::vector<int> members;
};

// How the replicas of each stage all-reduce: one ring, or (hierarchical) a reduce-scatter ring inside
// each outermost unit, a ring across units between workers of the same position, then an all-gather;
// or (tree) NCCL's double binary tree over the members in `local`'s one list.
struct AllReducePlan {
  bool hierarchical = false;
  bool tree = false;
  std::vector<Ring> local;  // per outermost unit (hierarchical) or the single ring
  std::vector<Ring> across;  // per local position (hierarchical only)
};

AllReducePlan all_reduce_plan(const std::vector<int>& replicas, const std::string& algorithm, int workers_per_unit) {
  AllReducePlan plan;
  std::vector<int> members = replicas;
  std::sort(members.begin(), members.end());
  if (algorithm == "tree" && members.size() > 2) {
    plan.tree = true;
    plan.local.push_back({"tree", members});
    return plan;
  }
  std::map<int, std::vector<int>> by_unit;
  for (int w : members) by_unit[w / workers_per_unit].push_back(w);
  bool even = true;
  for (const auto& [unit, list] : by_unit) even = even && list.size() == by_unit.begin()->second.size();
  if (algorithm != "hierarchical" || by_unit.size() < 2 || by_unit.begin()->second.size() < 2 || !even) {
    plan.local.push_back({"ring", members});
    return plan;
  }
  plan.hierarchical = true;
  const std::size_t local_size = by_unit.begin()->second.size();
  for (const auto& [unit, list] : by_unit) plan.local.push_back({"local" + std::to_string(unit), list});
  for (std::size_t position = 0; position < local_size; ++position) {
    Ring ring{"across" + std::to_string(position), {}};
    for (const auto& [unit, list] : by_unit) ring.members.push_back(list[position]);
    plan.across.push_back(ring);
  }
  return plan;
}

// What every worker actor reads (the model of the run) and the traffic they account, owned by
// simulate_prepared; each actor only appends to its own WorkerRun.
struct World {
  const SimulationConfig& config;
  const Schedule& schedule;
  std::vector<StageTimes> times;
  std::vector<AllReducePlan> all_reduce;  // per stage
  Cluster gpus;   // the cluster as GPUs: config.cluster, or its tensor-parallel groups taken apart
  int ranks = 1;  // GPUs per worker (tensor parallelism): worker w's rank k is GPU w x ranks + k
  std::vector<sg4::Host*> hosts;  // per GPU
  int gpu(int worker, int rank = 0) const { return worker * ranks + rank; }
  struct Route {
    std::vector<sg4::Link*> links;
    double latency_s = 0.0;
  };
  std::map<std::pair<int, int>, Route> routes;  // looked up once per pair
  std::map<std::pair<int, std::string>, sg4::BarrierPtr> ring_barriers;  // per (stage, ring tag), bulk model
  // A worker's t GPUs summing on the links (tensor_ring): their meeting point, each rank's inbox, and
  // the bytes each rank sends in the sum under way (set by rank 0).
  struct TensorGroup {
    sg4::BarrierPtr members;
    std::vector<sg4::Mailbox*> inboxes;
    double edge_bytes = 0.0;
  };
  std::vector<TensorGroup> tensor_groups;  // per worker, with tensor_sums "links" and t >= 2
  std::map<sg4::Link*, double> link_bytes;
  long long messages = 0;
  std::map<sg4::Host*, int> computing;  // per shared machine host: its activities running now (run_on_machine)
  std::map<sg4::Host*, int> workers_computing;  // per shared machine host: its workers in a compute now (execute)
  std::map<sg4::Host*, int> workers_on_machine;  // per shared machine host: the workers that compute there
  std::string error;  // the first misdelivered message, if any
  std::unordered_map<int, double> arrival_s;  // per point-to-point message: when its transfer ended
};

struct WorkerRun {
  std::vector<TraceEvent> events;
  std::vector<std::pair<std::size_t, int>> sends;  // event index, message: its end is the message's arrival
};

// The links from GPU `from` to GPU `to` and their latency (looked up once per pair).
const World::Route& route(World& world, int from, int to) {
  World::Route& found = world.routes[{from, to}];
  if (found.links.empty()) {  // a route of no links is asked again: start its latency from zero
    found.latency_s = 0.0;
    world.hosts[from]->route_to(world.hosts[to], found.links, &found.latency_s);
  }
  return found;
}

// One transfer of `bytes` from GPU `from` to GPU `to`, counted and its bytes accounted on every link
// of its route.
void account(World& world, int from, int to, double bytes) {
  for (sg4::Link* link : route(world, from, to).links) world.link_bytes[link] += bytes;
  ++world.messages;
}

// A flow of `bytes` from GPU `from` to GPU `to` outside any mailbox, its bytes accounted on its links:
// appended to `waited` for the caller to wait for, or detached where `waited` is null.
void flow(World& world, int from, int to, double bytes, std::vector<sg4::CommPtr>* waited) {
  account(world, from, to, bytes);
  sg4::CommPtr comm = sg4::Comm::sendto_init(world.hosts[from], world.hosts[to])->set_payload_size(static_cast<uint64_t>(bytes));
  if (waited != nullptr) {
    waited->push_back(comm->start());
  } else {
    comm->detach();
  }
}

// Posts `bytes` from worker `from` to worker `to` through `mailbox`, accounting the bytes on every link
// of the route. With tensor parallelism every rank sends its own `bytes` to the same rank of `to` at
// once (Megatron's pipeline sends, the data-parallel rings of each rank): rank 0's through the mailbox,
// whose delivery the receiver waits for, the others' as flows beside it. With `lanes`, the transfers
// are returned (rank 0's) and appended (the others') for the caller to wait; without, they are detached
// (a pipeline send: nobody waits, and SimGrid keeps no list of them on the sender, which costs every
// later wait a search through all of them) and the receiver records the arrival (take).
sg4::CommPtr post(World& world, int from, int to, const std::string& mailbox, double bytes, int message,
                  std::vector<sg4::CommPtr>* lanes) {
  for (int rank = 1; rank < world.ranks; ++rank) flow(world, world.gpu(from, rank), world.gpu(to, rank), bytes, lanes);
  account(world, world.gpu(from), world.gpu(to), bytes);
  sg4::CommPtr sent = sg4::Mailbox::by_name(mailbox)->put_init(new Payload{message}, static_cast<uint64_t>(bytes));
  if (lanes == nullptr) {
    sent->detach();
    return nullptr;
  }
  return sent->start();
}

// One tensor-parallel sum's ring among worker `worker`'s t GPUs, as its rank `rank` takes part: each
// rank's actor (rank 0: the worker's; the others: tensor_rank_actor) meets the others, sends the sum's
// edge bytes to the next rank, receives the previous rank's, and meets them again when every edge has
// ended. Messages between the ranks' actors rather than host-to-host flows (Comm::sendto): SimGrid
// 3.32 keeps every host-to-host flow and every detached message on one list of the engine that the
// end of each transfer searches, so their cost grows with all transfers in flight (bench_simgrid_flows).
void tensor_ring(World& world, int worker, int rank) {
  World::TensorGroup& group = world.tensor_groups[worker];
  const int t = world.ranks, next = (rank + 1) % t;
  group.members->wait();
  account(world, world.gpu(worker, rank), world.gpu(worker, next), group.edge_bytes);
  sg4::CommPtr sent = group.inboxes[next]->put_async(&group, static_cast<uint64_t>(group.edge_bytes));
  World::TensorGroup* received = nullptr;
  group.inboxes[rank]->get_async<World::TensorGroup>(&received)->wait();
  sent->wait();
  group.members->wait();
}

// Rank `rank` >= 1 of worker `worker`: takes part in each of the worker's sums (a daemon: it ends
// with the workers).
void tensor_rank_actor(World& world, int worker, int rank) {
  for (;;) tensor_ring(world, worker, rank);
}

// Takes the next message of `mailbox`, which must be `message`; returns when its transfer ended.
double take(World& world, const std::string& mailbox, int message) {
  Payload* payload = nullptr;
  sg4::CommPtr comm = sg4::Mailbox::by_name(mailbox)->get_async<Payload>(&payload);
  comm->wait();
  const std::unique_ptr<Payload> owned(payload);
  if (payload->message != message && world.error.empty()) {
    world.error = "mailbox " + mailbox + " delivered message " + std::to_string(payload->message) + " where " +
                  std::to_string(message) + " was expected";
  }
  return comm->get_finish_time();
}

// Runs `flops` on a shared machine host at most at `bound`, sharing in proportion to `priority`, the
// machine's capacity that of the number of its activities running at once (pstate per count).
void run_on_machine(World& world, sg4::Host* machine, double flops, double bound, double priority) {
  int& running = world.computing[machine];
  const int pstates = static_cast<int>(machine->get_pstate_count());
  auto set_capacity = [&] { machine->set_pstate(std::clamp(running, 1, pstates) - 1); };
  ++running;
  set_capacity();  // the capacity for this many running, for those already running too
  sg4::this_actor::exec_init(flops)->set_host(machine)->set_bound(bound)->set_priority(priority)->start()->wait();
  --running;
  set_capacity();
}

// `seconds_s` of worker `worker`'s own CPU (at its speed, priority 1) on its shared machine.
void run_seconds_on_machine(World& world, sg4::Host* machine, int worker, double seconds_s) {
  const double bound = world.hosts[world.gpu(worker)]->get_speed();
  run_on_machine(world, machine, seconds_s * bound, bound, 1.0);
}

// Whether `machine` (a shared-compute host) has a core for each of the workers that compute on it; false
// where its cores are not known.
bool has_a_core_each(const World& world, sg4::Host* machine) {
  const int cores = world.config.cluster.device().cores;
  return cores > 0 && world.workers_on_machine.at(machine) <= cores;
}

// The CPU a message costs a machine whose workers share its compute (device.message_cpu_s and per
// byte: the transport's threads, the kernel's copies), run there beside its computing workers, at
// most one worker's speed, by an actor of its own: it slows their compute and is slowed by it, and
// delays no one directly (the message's time is the link's).
void spend_message_cpu(World& world, sg4::Host* machine, int from, double bytes, int message) {
  const DeviceSpec& device = world.config.cluster.device();
  const double cpu_s = device.message_cpu_s + bytes * device.message_cpu_s_per_byte;
  if (!(cpu_s > 0.0)) return;
  sg4::Actor::create("message_cpu" + std::to_string(message), world.hosts[world.gpu(from)],
                     [&world, machine, from, cpu_s] { run_seconds_on_machine(world, machine, from, cpu_s); });
}

// The SimGrid side of the interpreter for one worker: compute as flops on its host, messages through
// per-message mailboxes, all-reduces as ring phases (bulk flows, or point-to-point steps).
class SimRuntime final : public ScheduleRuntime {
 public:
  SimRuntime(World& world, int worker, WorkerRun& run)
      : world_(world),
        worker_(worker),
        run_(run),
        machine_(world.config.platform_xml_path.empty() ? shared_compute_host(world.gpus, world.gpu(worker)) : nullptr),
        runtime_on_machine_(machine_ != nullptr && !has_a_core_each(world, machine_)) {}

  double now_s() override { return sg4::Engine::get_clock(); }

  void before_action(const Action&) override {
    const double overhead_s = world_.config.cluster.device().action_overhead_s;
    if (overhead_s > 0.0) runtime_time(overhead_s);  // the runtime's own time between actions
  }

  void compute(const Action& action) override { execute(action); }
  void optimizer_step(const Action& action) override { execute(action); }

  void send(const Action& action) override {
    const double overhead_s = world_.config.cluster.device().send_overhead_s;
    if (overhead_s > 0.0) runtime_time(overhead_s);  // posting the send
    // The interpreter records this action next: its end becomes the transfer's end, which its receiver sees.
    run_.sends.emplace_back(run_.events.size(), action.message);
    if (runtime_on_machine_) spend_message_cpu(world_, machine_, worker_, action.bytes, action.message);
    post(world_, worker_, action.peer, message_mailbox(action.message), action.bytes, action.message, nullptr);
  }

  void receive(const Action& action) override {
    const std::string mailbox = message_mailbox(action.message);
    const bool arrived = sg4::Mailbox::by_name(mailbox)->ready();  // delivered before we asked
    world_.arrival_s[action.message] = take(world_, mailbox, action.message);
    // Woken by the message while every core of its machine was held by another worker's compute: the
    // wake-up costs the machine device.busy_wake_s of the worker's CPU before it goes on.
    const DeviceSpec& device = world_.config.cluster.device();
    if (!arrived && machine_ != nullptr && device.cores > 0 && device.busy_wake_s > 0.0 &&
        world_.workers_computing[machine_] >= device.cores) {
      run_seconds_on_machine(world_, machine_, worker_, device.busy_wake_s);
    }
    if (arrived && device.recv_overhead_s > 0.0) runtime_time(device.recv_overhead_s);
    if (!arrived && device.receive_wait_s > 0.0) sg4::this_actor::sleep_for(device.receive_wait_s);
  }

  // A ring among the worker's t GPUs (tensor_ring), each edge one message with every sum's bytes
  // (2(t-1)/t of them, as in a ring all-reduce), each sum's 2(t-1) step latencies paid (the message
  // paid one): count x (2(t-1)/t x bytes / bandwidth + 2(t-1) latencies) on free links, the paper's
  // time; longer where other traffic shares the GPUs' links.
  void tensor_all_reduce(const Action& action, ActionKind pass) override {
    const PassSums& sums = world_.times.at(action.stage).sums.of(pass);
    const int t = world_.ranks;
    if (t < 2 || sums.count == 0) return;
    if (world_.config.tensor_sums == "paper") {
      sg4::this_actor::sleep_for(sums.paper_s);
      return;
    }
    world_.tensor_groups[worker_].edge_bytes = 2.0 * (t - 1) / t * sums.bytes;
    tensor_ring(world_, worker_, 0);
    const double waited_latency_s = (sums.count * 2.0 * (t - 1) - 1) * route(world_, world_.gpu(worker_), world_.gpu(worker_, 1)).latency_s;
    if (waited_latency_s > 0.0) sg4::this_actor::sleep_for(waited_latency_s);
  }

  void all_reduce(const Action& action) override {
    collective(action);
    const DeviceSpec& device = world_.config.cluster.device();
    const double overhead_s = device.all_reduce_overhead_s + action.bytes * device.all_reduce_s_per_byte;
    if (overhead_s > 0.0) sg4::this_actor::sleep_for(overhead_s);  // the runtime's own, beyond the links
  }

 private:
  // The all-reduce's transfers on the links: rings, hierarchical rings or the double binary tree.
  void collective(const Action& action) {
    const AllReducePlan& plan = world_.all_reduce[action.stage];
    auto ring_of = [&](const std::vector<Ring>& rings) -> const Ring& {
      for (const Ring& ring : rings) {
        if (std::find(ring.members.begin(), ring.members.end(), worker_) != ring.members.end()) return ring;
      }
      return rings.front();
    };
    const Ring& local = ring_of(plan.local);
    const int n = static_cast<int>(local.members.size());
    if (plan.tree) {
      double_binary_tree(action.stage, local, action.bytes);
      return;
    }
    if (!plan.hierarchical) {
      ring_phase(action.stage, local, 2 * (n - 1), action.bytes / n);
      return;
    }
    const Ring& across = ring_of(plan.across);
    const int k = static_cast<int>(across.members.size());
    ring_phase(action.stage, local, n - 1, action.bytes / n);             // reduce-scatter inside the unit
    ring_phase(action.stage, across, 2 * (k - 1), action.bytes / n / k);  // all-reduce of my shard across units
    ring_phase(action.stage, local, n - 1, action.bytes / n);             // all-gather inside the unit
  }

  // The runtime's own time (between actions, posting a send, taking an arrived message): the worker's
  // CPU, so on a machine whose workers share compute and outnumber its cores it runs there beside their
  // computing, at most at the worker's speed; elsewhere the worker's device idles meanwhile.
  void runtime_time(double seconds_s) {
    if (!runtime_on_machine_) {
      sg4::this_actor::sleep_for(seconds_s);
      return;
    }
    run_seconds_on_machine(world_, machine_, worker_, seconds_s);
  }

  double seconds(const Action& action) const {
    return world_.times.at(action.stage).seconds(action.kind);
  }

  // On the worker's own host, or on its machine's shared host at most at its own speed, sharing in
  // proportion to its stage's compute_share.
  void execute(const Action& action) {
    const double flops = seconds(action) * kReferenceFlopsPerSecond;
    if (machine_ == nullptr) {
      sg4::this_actor::execute(flops);
      return;
    }
    const double bound = world_.hosts[world_.gpu(worker_)]->get_speed();
    int& computing = world_.workers_computing[machine_];
    ++computing;
    run_on_machine(world_, machine_, flops, bound, world_.times.at(action.stage).compute_share);
    --computing;
  }

  // `steps` steps around a ring, each sending `chunk` bytes to the next member and receiving from the
  // previous (a reduce-scatter or all-gather is n-1 steps, an all-reduce 2(n-1)).
  void ring_phase(int stage, const Ring& ring, int steps, double chunk) {
    const auto& m = ring.members;
    const int n = static_cast<int>(m.size());
    if (n < 2) return;
    const int position = static_cast<int>(std::find(m.begin(), m.end(), worker_) - m.begin());
    const int next = m[(position + 1) % n];
    if (world_.config.collective_model == "bulk") {
      // Bulk: one flow to the next member with every step's bytes, so the edge's links carry the
      // phase's load for its whole length, sharing bandwidth with whatever else crosses them. A step
      // is latency + chunk / bandwidth; the flow paid one latency, the other steps' are waited here;
      // then the members leave together, as a ring's last step ends at once for all of them (its
      // slowest edge sets the pace). Exact against the step model where the ring's edges are alike.
      const int previous = m[(position + n - 1) % n];
      const sg4::BarrierPtr& members = world_.ring_barriers.at({stage, ring.tag});
      members->wait();  // a ring's steps need every member: it starts when the last one arrives
      std::vector<sg4::CommPtr> sent;
      sent.push_back(post(world_, worker_, next, ring_mailbox(stage, ring.tag, next), steps * chunk, 0, &sent));
      take(world_, ring_mailbox(stage, ring.tag, worker_), 0);
      sg4::Comm::wait_all(sent);
      const double waited_latency_s = (steps - 1) * route(world_, world_.gpu(previous), world_.gpu(worker_)).latency_s;
      if (waited_latency_s > 0.0) sg4::this_actor::sleep_for(waited_latency_s);
      members->wait();
      return;
    }
    std::vector<sg4::CommPtr> sent;
    for (int step = 0; step < steps; ++step) {
      sent.push_back(post(world_, worker_, next, ring_mailbox(stage, ring.tag, next), chunk, step, &sent));
      take(world_, ring_mailbox(stage, ring.tag, worker_), step);
    }
    sg4::Comm::wait_all(sent);
  }

  // NCCL's double binary tree (Sanders et al.): two binary trees over the members, each carrying half
  // the bytes, the second the first mirrored (positions n-1-i), so a member inner in one is a leaf in
  // the other when n is even and no link carries more than one half per direction and tree. Reduce up
  // both trees, then broadcast down. Pipelined, as NCCL runs it in chunks: every edge of a phase is
  // one flow at once (both models), the phase's depth floor(log2 n) latencies paid in full; members
  // start together and leave each phase together. Bandwidth 2 x bytes / B, latency 2 log2(n) hops
  // (a ring: 2(n-1)/n x bytes / B and 2(n-1) hops).
  void double_binary_tree(int stage, const Ring& tree, double bytes) {
    const auto& m = tree.members;
    const int n = static_cast<int>(m.size());
    const int position = static_cast<int>(std::find(m.begin(), m.end(), worker_) - m.begin());
    auto mirrored = [n](int p) { return n - 1 - p; };
    std::vector<int> parents, children;  // member positions, over both trees
    for (const bool second : {false, true}) {
      const int p = second ? mirrored(position) : position;
      auto member = [&](int q) { return second ? mirrored(q) : q; };
      if (p > 0) parents.push_back(member((p - 1) / 2));
      for (int child : {2 * p + 1, 2 * p + 2}) {
        if (child < n) children.push_back(member(child));
      }
    }
    int depth = 0;
    while ((2 << depth) <= n) ++depth;  // floor(log2 n): the heap's last member's depth
    double latency_s = 0.0;
    for (int q : parents) latency_s = std::max(latency_s, route(world_, world_.gpu(worker_), world_.gpu(m[q])).latency_s);
    for (int q : children) latency_s = std::max(latency_s, route(world_, world_.gpu(m[q]), world_.gpu(worker_)).latency_s);
    const sg4::BarrierPtr& members = world_.ring_barriers.at({stage, tree.tag});
    const std::string inbox = ring_mailbox(stage, tree.tag, worker_);
    members->wait();
    for (const auto& [senders_to, receives, phase] :
         {std::tuple{&parents, children.size(), 0}, std::tuple{&children, parents.size(), 1}}) {
      std::vector<sg4::CommPtr> sent;
      for (int q : *senders_to) sent.push_back(post(world_, worker_, m[q], ring_mailbox(stage, tree.tag, m[q]), bytes / 2, phase, &sent));
      for (std::size_t r = 0; r < receives; ++r) take(world_, inbox, phase);
      sg4::Comm::wait_all(sent);
      if (depth > 1 && latency_s > 0.0) sg4::this_actor::sleep_for((depth - 1) * latency_s);
      members->wait();
    }
  }

  World& world_;
  const int worker_;
  WorkerRun& run_;
  sg4::Host* const machine_;  // where this worker computes when its machine shares compute, else nullptr
  // Its runtime's time and its messages' CPU run on machine_ beside the computing workers only where the
  // machine's workers outnumber its cores, or its cores are unknown (DeviceSpec::cores).
  const bool runtime_on_machine_;
};

// One worker's actor: interpret its list (its sends are detached: their ends come from their receivers).
void worker_actor(World& world, int worker, WorkerRun& run) {
  SimRuntime runtime(world, worker, run);
  interpret(world.schedule.workers[worker], runtime, [&](const Action& a, double start_s, double end_s) {
    run.events.push_back({worker, a.stage, a.kind, a.microbatch, a.iteration, start_s, end_s, a.bytes, a.peer, a.message});
  });
}

SimulationSummary summarise(const World& world, const Trace& trace, const ValidationReport& report) {
  SimulationSummary summary;
  const TraceMetrics metrics = trace_metrics(trace);
  summary.makespan_s = metrics.makespan_s;
  summary.iteration_s = metrics.mean_iteration_s;
  summary.samples_per_s = metrics.samples_per_s;
  summary.bubble_fraction = metrics.bubble_fraction;
  for (const auto& [link, bytes] : world.link_bytes) {
    const double utilisation = summary.makespan_s > 0 ? bytes / (link->get_bandwidth() * summary.makespan_s) : 0.0;
    if (utilisation > summary.busiest_link.utilisation ||
        (utilisation == summary.busiest_link.utilisation && link->get_name() < summary.busiest_link.name)) {
      summary.busiest_link = {link->get_name(), bytes, link->get_bandwidth(), utilisation};
    }
  }
  for (const WorkerMemory& memory : report.memory) summary.peak_memory_bytes.push_back(memory.total_bytes());
  summary.actions = static_cast<long long>(trace.events.size());
  summary.messages = world.messages;
  return summary;
}

SimulationResult run_simulation(World& world, const ValidationReport& report) {
  const SimulationConfig& config = world.config;
  const Schedule& schedule = world.schedule;
  const std::unique_ptr<sg4::Engine> engine = start_engine_for_exact_links();
  world.hosts = config.platform_xml_path.empty() ? build_platform(world.gpus)
                                                 : load_platform_xml(config.platform_xml_path, schedule.shape.workers * world.ranks);
  if (static_cast<int>(world.hosts.size()) < schedule.shape.workers * world.ranks) {
    throw Error({config.cluster.source_path(), 0, "levels"},
                "the cluster has " + std::to_string(world.hosts.size()) + " GPUs, the schedule needs " +
                    std::to_string(schedule.shape.workers) + " workers" +
                    (world.ranks > 1 ? " of " + std::to_string(world.ranks) + " tensor-parallel GPUs" : ""),
                "plan for this cluster, or use a larger one");
  }
  for (int w = 0; w < schedule.shape.workers && config.platform_xml_path.empty(); ++w) {
    if (sg4::Host* machine = shared_compute_host(world.gpus, world.gpu(w))) ++world.workers_on_machine[machine];
  }
  std::vector<WorkerRun> runs(schedule.shape.workers);
  std::vector<sg4::ActorPtr> actors;
  for (int w = 0; w < schedule.shape.workers; ++w) {
    actors.push_back(sg4::Actor::create("worker" + std::to_string(w), world.hosts[world.gpu(w)], worker_actor, std::ref(world), w,
                                        std::ref(runs[w])));
  }
  if (world.ranks > 1 && config.tensor_sums == "links") {
    world.tensor_groups.resize(schedule.shape.workers);
    for (int w = 0; w < schedule.shape.workers; ++w) {
      World::TensorGroup& group = world.tensor_groups[w];
      group.members = sg4::Barrier::create(world.ranks);
      for (int rank = 0; rank < world.ranks; ++rank) group.inboxes.push_back(sg4::Mailbox::by_name(tensor_mailbox(world.gpu(w, rank))));
      for (int rank = 1; rank < world.ranks; ++rank) {
        sg4::Actor::create("worker" + std::to_string(w) + "_rank" + std::to_string(rank), world.hosts[world.gpu(w, rank)],
                           tensor_rank_actor, std::ref(world), w, rank)
            ->daemonize();
      }
    }
  }
  // Permanent receivers make every send eager: a transfer starts when it is sent, as in the IR.
  for (int w = 0; w < schedule.shape.workers; ++w) {
    for (const Action& a : schedule.workers[w]) {
      if (is_receive(a.kind)) sg4::Mailbox::by_name(message_mailbox(a.message))->set_receiver(actors[w]);
    }
  }
  for (int s = 0; s < schedule.shape.stages(); ++s) {
    for (const auto* rings : {&world.all_reduce[s].local, &world.all_reduce[s].across}) {
      for (const Ring& ring : *rings) {
        for (int member : ring.members) sg4::Mailbox::by_name(ring_mailbox(s, ring.tag, member))->set_receiver(actors[member]);
        if (ring.members.size() > 1) world.ring_barriers[{s, ring.tag}] = sg4::Barrier::create(ring.members.size());
      }
    }
  }
  engine->run();
  if (!world.error.empty()) throw Error({"", 0, "simulation"}, world.error, "report this: the validated schedule misbehaved");

  SimulationResult result;
  Trace& trace = result.trace;
  trace.header = trace_header(schedule, "simulated", config.profile_name.empty() ? config.plan.profile_name : config.profile_name,
                              config.platform_xml_path.empty() ? config.cluster.name() : config.platform_xml_path,
                              config.plan.microbatch_size, config.warmup_iterations);
  trace.header.extra["all_reduce"] = config.all_reduce;
  trace.header.extra["collective_model"] = config.collective_model;
  if (world.ranks > 1) {
    trace.header.extra["tensor_parallel"] = world.ranks;
    trace.header.extra["tensor_sums"] = config.tensor_sums;
  }
  for (WorkerRun& run : runs) {
    for (const auto& [index, message] : run.sends) run.events[index].end_s = world.arrival_s.at(message);
  }
  for (WorkerRun& run : runs) trace.events.insert(trace.events.end(), run.events.begin(), run.events.end());
  sort_events(trace);
  result.summary = summarise(world, trace, report);
  return result;
}

}  // namespace

Cluster tensor_parallel_gpus(const Cluster& cluster, int ranks) {
  const std::string suffix = "-tp" + std::to_string(ranks);
  const std::string& name = cluster.name();
  if (ranks < 2 || name.size() < suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return cluster;
  }
  std::vector<ClusterLevel> levels = cluster.levels();
  levels.front().count *= ranks;
  return Cluster(name.substr(0, name.size() - suffix.size()), cluster.description(), cluster.device(), levels,
                 cluster.source_path(), cluster.fabric());
}

BuiltSchedule prepare_schedule(const SimulationConfig& config) {
  if (config.iterations < 1) throw Error({"", 0, "--iterations"}, "iterations must be >= 1", "e.g. --iterations 3");
  if (config.all_reduce != "ring" && config.all_reduce != "hierarchical" && config.all_reduce != "tree") {
    throw Error({"", 0, "--all-reduce"}, "unknown all-reduce '" + config.all_reduce + "'", "use ring, hierarchical or tree");
  }
  if (config.tensor_sums != "links" && config.tensor_sums != "paper") {
    throw Error({"", 0, "--tensor-sums"}, "unknown tensor-sums model '" + config.tensor_sums + "'",
                "use links (rings among each worker's GPUs) or paper (the profile's time, no flows)");
  }
  if (config.collective_model != "bulk" && config.collective_model != "step") {
    throw Error({"", 0, "--collective-model"}, "unknown collective model '" + config.collective_model + "'",
                "use bulk (one flow per ring edge) or step (every step a transfer)");
  }
  ScheduleRequest request;
  request.name = config.schedule_name;
  request.microbatches = config.microbatches;
  request.chunks = config.chunks;
  request.iterations = config.iterations;
  request.file = config.schedule_csv_path;
  request.runtime_memory_bytes = config.cluster.device().runtime_memory_bytes;
  if (!config.ignore_memory) {
    request.memory_limit_bytes = config.cluster.device().memory_bytes;
    request.memory_limit_source = config.plan.cluster_path.empty() ? config.cluster.source_path() : config.plan.cluster_path;
  }
  BuiltSchedule built = build_schedule(config.plan, request);
  const int iterations = built.schedule.iterations;  // a schedule file's own count
  if (config.warmup_iterations < 0 || config.warmup_iterations >= iterations) {
    throw Error({"", 0, "--warmup"},
                "warm-up iterations must be between 0 and iterations - 1 (" + std::to_string(iterations) + " laid out)",
                "e.g. --iterations 3 --warmup 1");
  }
  return built;
}

std::vector<StageTimes> simulation_stage_times(const SimulationConfig& config) {
  if (!config.stage_times.empty()) return config.stage_times;
  if (config.compute_model == "profile") return stage_times_from_plan(config.plan);
  if (config.compute_model != "flops") {
    throw Error({"", 0, "--compute-model"}, "unknown compute model '" + config.compute_model + "'", "use profile or flops");
  }
  const double peak = config.cluster.device().peak_flops;
  if (!(peak > 0.0)) {
    throw Error({config.cluster.source_path(), 0, "device.peak_flops"}, "the cluster does not give the device's peak FLOP/s",
                "add device.peak_flops, or use --compute-model profile");
  }
  std::vector<StageTimes> times;
  for (std::size_t s = 0; s < config.plan.stages.size(); ++s) {
    const PlanStage& stage = config.plan.stages[s];
    if (!(stage.forward_flops > 0.0)) {
      throw Error({"", 0, "stages[" + std::to_string(s) + "].forward_flops"},
                  "the profile has no FLOPs for every layer of stage " + std::to_string(s),
                  "profile FLOPs (the layers' \"flops\" field), or use --compute-model profile");
    }
    const double forward = stage.forward_flops / peak * config.cluster.device().speed;
    times.push_back({forward, 2 * forward, forward, forward, 0.0});
    times.back().sums = stage.tensor_sums;  // FLOPs count no sums: they run on the links as they are
  }
  return times;
}

SimulationResult simulate(const SimulationConfig& config) { return simulate_prepared(config, prepare_schedule(config)); }

SimulationResult simulate_prepared(const SimulationConfig& config, const BuiltSchedule& built) {
  const Schedule& schedule = built.schedule;
  std::vector<StageTimes> times = simulation_stage_times(config);
  if (static_cast<int>(times.size()) != schedule.shape.stages()) {
    throw Error({"", 0, "stage_times"}, "stage times for " + std::to_string(times.size()) + " stages, the schedule has " +
                                            std::to_string(schedule.shape.stages()),
                "give one entry per stage");
  }
  World world{config, schedule, std::move(times), {}, config.cluster, schedule.shape.tensor_parallel()};
  world.gpus = tensor_parallel_gpus(config.cluster, world.ranks);
  int workers_per_unit = config.cluster.worker_count();
  if (!config.cluster.levels().empty()) workers_per_unit /= config.cluster.levels().back().count;
  for (int s = 0; s < schedule.shape.stages(); ++s) {
    world.all_reduce.push_back(all_reduce_plan(schedule.shape.stage_workers[s], config.all_reduce, std::max(1, workers_per_unit)));
  }
  return run_simulation(world, built.report);
}

}  // namespace pipetwin::sim
