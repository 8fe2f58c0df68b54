#include "planner/antichain_states.h"

#include <optional>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>

#include "planner/error.h"

namespace pipetwin {
namespace {

// A fixed-size set of layer indices.
class LayerSet {
 public:
  explicit LayerSet(std::size_t size = 0) : words_((size + 63) / 64, 0) {}
  void insert(std::size_t i) { words_[i / 64] |= std::uint64_t{1} << (i % 64); }
  bool contains(std::size_t i) const { return (words_[i / 64] >> (i % 64)) & 1U; }
  void unite(const LayerSet& other) {
    for (std::size_t w = 0; w < words_.size(); ++w) words_[w] |= other.words_[w];
  }

 private:
  std::vector<std::uint64_t> words_;
};

// The model graph PipeDream's optimizer works on: inputs removed, dangling __getitem__ sinks removed.
struct WorkingGraph {
  std::vector<bool> alive;
  std::vector<std::vector<std::size_t>> out, in;
  std::vector<LayerSet> ancestors, descendants;  // strict, transitive
};

bool starts_with(const std::string& text, const char* prefix) { return text.rfind(prefix, 0) == 0; }

WorkingGraph make_working_graph(const Profile& profile, AntichainStates& result) {
  const std::size_t n = profile.layer_count();
  WorkingGraph graph;
  graph.alive.assign(n, true);
  for (std::size_t i = 0; i < n; ++i) {
    if (profile.predecessors(i).empty() && profile.layer(i).is_input) {
      graph.alive[i] = false;
      result.removed_inputs.push_back(i);
    }
  }
  // Sinks are judged once, after the inputs are gone, as PipeDream does.
  for (std::size_t i = 0; i < n; ++i) {
    if (graph.alive[i] && profile.successors(i).empty() && starts_with(profile.layer(i).description, "__getitem__")) {
      graph.alive[i] = false;
      result.removed_sinks.push_back(i);
    }
  }
  graph.out.resize(n);
  graph.in.resize(n);
  for (const auto& [from, to] : profile.edges()) {
    if (graph.alive[from] && graph.alive[to]) {
      graph.out[from].push_back(to);
      graph.in[to].push_back(from);
    }
  }
  graph.ancestors.assign(n, LayerSet(n));
  graph.descendants.assign(n, LayerSet(n));
  for (std::size_t i = 0; i < n; ++i) {  // layers are in topological order
    for (std::size_t p : graph.in[i]) {
      graph.ancestors[i].insert(p);
      graph.ancestors[i].unite(graph.ancestors[p]);
    }
  }
  for (std::size_t i = n; i-- > 0;) {
    for (std::size_t s : graph.out[i]) {
      graph.descendants[i].insert(s);
      graph.descendants[i].unite(graph.descendants[s]);
    }
  }
  return graph;
}

using Antichain = std::vector<std::size_t>;  // ascending layer indices

// Adds to an antichain every ancestor that still has an edge leaving the antichain's past: those
// layers' outputs are still needed later (PipeDream's augment_antichain).
Antichain augment(const WorkingGraph& graph, const Antichain& antichain) {
  Antichain result = antichain;
  for (std::size_t member : antichain) {
    const LayerSet& before = graph.ancestors[member];
    for (std::size_t p = 0; p < graph.alive.size(); ++p) {
      if (!before.contains(p)) continue;
      for (std::size_t next : graph.out[p]) {
        if (!before.contains(next) && next != member) {
          result.push_back(p);
          break;
        }
      }
    }
  }
  std::sort(result.begin(), result.end());
  result.erase(std::unique(result.begin(), result.end()), result.end());
  return result;
}

// Drops members that have a descendant in the list (PipeDream's deaugment_augmented_antichain).
Antichain deaugment(const WorkingGraph& graph, const Antichain& members) {
  Antichain result;
  for (std::size_t a : members) {
    bool has_later = false;
    for (std::size_t b : members) has_later = has_later || graph.descendants[a].contains(b);
    if (!has_later) result.push_back(a);
  }
  std::sort(result.begin(), result.end());
  result.erase(std::unique(result.begin(), result.end()), result.end());
  return result;
}

std::vector<Antichain> next_antichains(const WorkingGraph& graph, const Antichain& antichain) {
  const Antichain augmented = augment(graph, antichain);
  std::vector<Antichain> result;
  for (std::size_t member : augmented) {
    for (std::size_t next : graph.out[member]) {
      if (std::binary_search(antichain.begin(), antichain.end(), next)) continue;
      bool overtakes = false;  // some descendant of `next` is already in the augmented antichain
      for (std::size_t other : augmented) overtakes = overtakes || graph.descendants[next].contains(other);
      if (overtakes) continue;
      Antichain replaced = augmented;
      std::replace(replaced.begin(), replaced.end(), member, next);
      result.push_back(deaugment(graph, replaced));
    }
  }
  return result;
}

}  // namespace

std::optional<AntichainStates> build_antichain_states_within_limit(const Profile& profile) {
  AntichainStates result;
  const WorkingGraph graph = make_working_graph(profile, result);
  const std::size_t n = profile.layer_count();

  std::size_t first_source = n;
  for (std::size_t i = 0; i < n && first_source == n; ++i) {
    if (graph.alive[i] && graph.in[i].empty()) first_source = i;
  }
  if (first_source == n) {
    throw Error({profile.source_path(), 0, "layers"}, "the model has no layer left once data-loading inputs are removed",
                "profile at least one compute layer");
  }

  // Breadth-first discovery of the antichain DAG; ids in order of discovery, edges in order found.
  std::map<Antichain, std::size_t> id_of;
  std::vector<Antichain> antichains;
  std::vector<std::vector<std::size_t>> edges;
  auto intern = [&](const Antichain& antichain) {
    auto [it, inserted] = id_of.emplace(antichain, antichains.size());
    if (inserted) {
      antichains.push_back(antichain);
      edges.emplace_back();
    }
    return it->second;
  };
  std::deque<std::size_t> queue{intern({first_source})};
  std::vector<bool> expanded(1, false);
  while (!queue.empty()) {
    const std::size_t current = queue.front();
    queue.pop_front();
    if (expanded[current]) continue;
    expanded[current] = true;
    for (const Antichain& next : next_antichains(graph, antichains[current])) {
      const std::size_t next_id = intern(next);
      if (antichains.size() > kMaxAntichainStates) return std::nullopt;
      if (expanded.size() < antichains.size()) expanded.resize(antichains.size(), false);
      edges[current].push_back(next_id);
      queue.push_back(next_id);
    }
  }

  // Topological order: reverse post-order of a depth-first walk from the source, children in the
  // order they were found.
  const std::size_t count = antichains.size();
  std::vector<std::size_t> post_order;
  std::vector<char> state(count, 0);  // 0 new, 1 on stack, 2 done
  std::vector<std::pair<std::size_t, std::size_t>> stack{{0, 0}};
  state[0] = 1;
  while (!stack.empty()) {
    auto& [node, next_child] = stack.back();
    if (next_child < edges[node].size()) {
      const std::size_t child = edges[node][next_child++];
      if (state[child] == 0) {
        state[child] = 1;
        stack.emplace_back(child, 0);
      }
    } else {
      state[node] = 2;
      post_order.push_back(node);
      stack.pop_back();
    }
  }
  std::vector<std::size_t> order(post_order.rbegin(), post_order.rend());
  std::vector<std::size_t> position(count);
  for (std::size_t p = 0; p < count; ++p) position[order[p]] = p;

  result.states.resize(count);
  for (std::size_t p = 0; p < count; ++p) {
    AntichainState& state_out = result.states[p];
    state_out.antichain = augment(graph, antichains[order[p]]);
    LayerSet closure(n);
    for (std::size_t member : state_out.antichain) {
      closure.insert(member);
      closure.unite(graph.ancestors[member]);
      state_out.output_activation_bytes += profile.layer(member).activation_bytes;
    }
    for (std::size_t layer = 0; layer < n; ++layer) {
      if (!closure.contains(layer)) continue;
      state_out.closure.push_back(layer);
      const Layer& l = profile.layer(layer);
      state_out.compute_s += compute_ms(l) / 1000.0;
      state_out.activation_bytes += stashed_bytes(l);
      state_out.param_bytes += l.param_bytes;
    }
  }

  // Ancestors of each state in the antichain DAG, by position.
  std::vector<LayerSet> ancestors(count, LayerSet(count));
  for (std::size_t p = 0; p < count; ++p) {
    for (std::size_t child : edges[order[p]]) {
      const std::size_t q = position[child];
      ancestors[q].insert(p);
      ancestors[q].unite(ancestors[p]);
    }
  }
  result.predecessors.resize(count);
  result.is_chain = true;
  for (std::size_t q = 0; q < count; ++q) {
    for (std::size_t p = 0; p < count; ++p) {
      if (ancestors[q].contains(p)) result.predecessors[q].push_back(p);
    }
    result.is_chain = result.is_chain && result.predecessors[q].size() == q;
  }
  return result;
}

AntichainStates build_antichain_states(const Profile& profile) {
  std::optional<AntichainStates> states = build_antichain_states_within_limit(profile);
  if (!states) {
    throw Error({profile.source_path(), 0, "edges"},
                "the model's graph has more than " + std::to_string(kMaxAntichainStates) +
                    " antichain states (its parallel branches multiply them): planning it would take hours and tens of GB",
                "plan with --merge-branches (each block of parallel branches becomes one layer, as PipeDream's tooling "
                "does), or plan a chain profile");
  }
  return std::move(*states);
}

}  // namespace pipetwin
