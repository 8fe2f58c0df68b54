#include "planner/profile.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>
#include <unordered_map>

#include "planner/error.h"

namespace pipetwin {
namespace {

int line_of(const std::vector<int>& lines, std::size_t index) {
  return index < lines.size() ? lines[index] : 0;
}

void check_number(double value, const std::string& path, int line, const std::string& field,
                  const std::string& layer_id) {
  if (!std::isfinite(value) || value < 0.0) {
    throw Error({path, line, field}, "layer '" + layer_id + "' has " + field + " = " + std::to_string(value) +
                                         ", which is negative or not a number",
                "give a finite value >= 0");
  }
}

void validate_layer(const Layer& layer, const std::string& path, int line) {
  if (layer.id.empty()) throw Error({path, line, "id"}, "a layer has an empty id", "give every layer a unique id");
  check_number(layer.fwd_ms, path, line, "fwd_ms", layer.id);
  check_number(layer.bwd_ms, path, line, "bwd_ms", layer.id);
  if (layer.bwd_input_ms) check_number(*layer.bwd_input_ms, path, line, "bwd_input_ms", layer.id);
  if (layer.bwd_weight_ms) check_number(*layer.bwd_weight_ms, path, line, "bwd_weight_ms", layer.id);
  if (layer.compute_share && !(*layer.compute_share > 0.0)) {
    throw Error({path, line, "compute_share"}, "layer '" + layer.id + "' has a compute_share that is not positive",
                "give a positive weight (1 is the default) or leave it out");
  }
  check_number(layer.activation_bytes, path, line, "activation_bytes", layer.id);
  for (double bytes : layer.output_bytes) check_number(bytes, path, line, "output_bytes", layer.id);
  check_number(layer.param_bytes, path, line, "param_bytes", layer.id);
  if (layer.flops) check_number(*layer.flops, path, line, "flops", layer.id);
  if (layer.stashed_bytes) check_number(*layer.stashed_bytes, path, line, "stashed_bytes", layer.id);
  if (layer.optimizer_bytes) check_number(*layer.optimizer_bytes, path, line, "optimizer_bytes", layer.id);
  if (layer.recompute_ms) check_number(*layer.recompute_ms, path, line, "recompute_ms", layer.id);
  check_number(layer.recompute_bytes, path, line, "recompute_bytes", layer.id);
}

// Finds one cycle among `remaining` layers (those Kahn's algorithm could not order) and describes it.
// Every remaining layer has a remaining predecessor, so walking backwards must revisit a layer.
std::string describe_cycle(const std::vector<std::vector<std::size_t>>& in, const std::vector<bool>& remaining,
                           const std::vector<Layer>& layers, Profile::Edge* an_edge) {
  std::size_t node = 0;
  while (!remaining[node]) ++node;
  std::vector<int> seen_at(layers.size(), -1);
  std::vector<std::size_t> walk;
  while (seen_at[node] < 0) {
    seen_at[node] = static_cast<int>(walk.size());
    walk.push_back(node);
    for (std::size_t candidate : in[node]) {
      if (remaining[candidate]) { node = candidate; break; }
    }
  }
  // walk[seen_at[node]..] goes backwards around the cycle; print it forwards.
  std::vector<std::size_t> cycle(walk.begin() + seen_at[node], walk.end());
  std::reverse(cycle.begin(), cycle.end());
  std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());  // start at the first layer
  std::string text;
  for (std::size_t member : cycle) text += layers[member].id + " -> ";
  text += layers[cycle.front()].id;
  *an_edge = {cycle.front(), cycle.size() > 1 ? cycle[1] : cycle.front()};
  return text;
}

}  // namespace

Profile::Profile(std::string name, int batch_size, std::vector<Layer> layers, std::vector<Edge> edges,
                 std::string source_path, const ProfileSourceLines& lines)
    : name_(std::move(name)), source_path_(std::move(source_path)), batch_size_(batch_size) {
  if (batch_size_ <= 0) {
    throw Error({source_path_, 0, "batch_size"}, "batch size is " + std::to_string(batch_size_),
                "give the minibatch size the profile was taken at, a positive integer");
  }
  if (layers.empty()) throw Error({source_path_, 0, "layers"}, "the profile has no layers", "list at least one layer");

  std::unordered_map<std::string, std::size_t> given_index;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    validate_layer(layers[i], source_path_, line_of(lines.layer_lines, i));
    if (!given_index.emplace(layers[i].id, i).second) {
      throw Error({source_path_, line_of(lines.layer_lines, i), "id"}, "layer id '" + layers[i].id + "' appears twice",
                  "give every layer a unique id");
    }
  }

  std::vector<std::vector<std::size_t>> out(layers.size());
  std::vector<std::size_t> in_degree(layers.size(), 0);
  std::map<Edge, std::size_t> seen_edges;
  for (std::size_t e = 0; e < edges.size(); ++e) {
    auto [from, to] = edges[e];
    const int line = line_of(lines.edge_lines, e);
    if (from >= layers.size() || to >= layers.size()) {
      throw Error({source_path_, line, "edges"}, "edge refers to a layer index out of range",
                  "edges must connect layers listed in the profile");
    }
    if (from == to) {
      throw Error({source_path_, line, "edges"}, "layer '" + layers[from].id + "' has an edge to itself",
                  "remove the self-loop; the model graph must be acyclic");
    }
    if (!seen_edges.emplace(edges[e], e).second) continue;  // a repeated edge adds nothing
    out[from].push_back(to);
    ++in_degree[to];
  }

  // Kahn's algorithm, smallest given index first, so the order is stable and deterministic.
  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (in_degree[i] == 0) ready.push(i);
  }
  std::vector<std::size_t> order;
  order.reserve(layers.size());
  while (!ready.empty()) {
    std::size_t node = ready.top();
    ready.pop();
    order.push_back(node);
    for (std::size_t next : out[node]) {
      if (--in_degree[next] == 0) ready.push(next);
    }
  }
  if (order.size() != layers.size()) {
    std::vector<bool> remaining(layers.size(), true);
    for (std::size_t node : order) remaining[node] = false;
    std::vector<std::vector<std::size_t>> in(layers.size());
    for (std::size_t from = 0; from < out.size(); ++from) {
      for (std::size_t to : out[from]) in[to].push_back(from);
    }
    Edge an_edge;
    const std::string cycle = describe_cycle(in, remaining, layers, &an_edge);
    int line = 0;
    auto it = seen_edges.find(an_edge);
    if (it != seen_edges.end()) line = line_of(lines.edge_lines, it->second);
    throw Error({source_path_, line, "edges"}, "the model graph has a cycle: " + cycle,
                "remove one of these edges; a profile must be a DAG");
  }

  std::vector<std::size_t> new_index(layers.size());
  for (std::size_t position = 0; position < order.size(); ++position) new_index[order[position]] = position;
  layers_.reserve(layers.size());
  for (std::size_t node : order) layers_.push_back(std::move(layers[node]));
  graph_ = Graph(layers_.size());
  std::vector<Edge> sorted_edges;
  for (const auto& [edge, unused] : seen_edges) sorted_edges.emplace_back(new_index[edge.first], new_index[edge.second]);
  std::sort(sorted_edges.begin(), sorted_edges.end());
  for (const auto& [from, to] : sorted_edges) boost::add_edge(from, to, graph_);
}

std::size_t Profile::index_of(const std::string& id) const {
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    if (layers_[i].id == id) return i;
  }
  throw Error({source_path_, 0, "layers"}, "no layer with id '" + id + "'", "use an id listed in the profile");
}

std::vector<Profile::Edge> Profile::edges() const {
  std::vector<Edge> result;
  for (auto [it, end] = boost::edges(graph_); it != end; ++it) {
    result.emplace_back(boost::source(*it, graph_), boost::target(*it, graph_));
  }
  std::sort(result.begin(), result.end());
  return result;
}

std::vector<std::size_t> Profile::predecessors(std::size_t index) const {
  std::vector<std::size_t> result;
  for (auto [it, end] = boost::in_edges(index, graph_); it != end; ++it) result.push_back(boost::source(*it, graph_));
  std::sort(result.begin(), result.end());
  return result;
}

std::vector<std::size_t> Profile::successors(std::size_t index) const {
  std::vector<std::size_t> result;
  for (auto [it, end] = boost::out_edges(index, graph_); it != end; ++it) result.push_back(boost::target(*it, graph_));
  std::sort(result.begin(), result.end());
  return result;
}

double Profile::total_fwd_ms() const {
  double sum = 0.0;
  for (const Layer& layer : layers_) sum += layer.fwd_ms;
  return sum;
}

double Profile::total_bwd_ms() const {
  double sum = 0.0;
  for (const Layer& layer : layers_) sum += layer.bwd_ms;
  return sum;
}

Profile profile_at_microbatch(const Profile& profile, int microbatch_size) {
  if (microbatch_size < 1) {
    throw Error({"", 0, "--microbatch-sizes"}, "a microbatch needs at least one sample", "e.g. --microbatch-sizes 8,16");
  }
  const double ratio = static_cast<double>(microbatch_size) / profile.batch_size();
  std::vector<Layer> layers = profile.layers();
  for (Layer& layer : layers) {
    layer.fwd_ms *= ratio, layer.bwd_ms *= ratio;
    if (layer.bwd_input_ms) *layer.bwd_input_ms *= ratio;
    if (layer.bwd_weight_ms) *layer.bwd_weight_ms *= ratio;
    if (layer.flops) *layer.flops *= ratio;
    layer.activation_bytes *= ratio;
    for (double& bytes : layer.output_bytes) bytes *= ratio;
    if (layer.stashed_bytes) *layer.stashed_bytes *= ratio;
    if (layer.recompute_ms) *layer.recompute_ms *= ratio;
    layer.recompute_bytes *= ratio;
  }
  return Profile(profile.name(), microbatch_size, std::move(layers), profile.edges(), profile.source_path());
}

double Profile::total_param_bytes() const {
  double sum = 0.0;
  for (const Layer& layer : layers_) sum += layer.param_bytes;
  return sum;
}

}  // namespace pipetwin
