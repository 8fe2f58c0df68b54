#include "planner/branch_merging.h"

#include <algorithm>
#include <set>
#include <utility>

namespace pipetwin {
namespace {

// The merged layer of `members` (topological indices of `profile`, ascending, two or more).
Layer merged_layer(const Profile& profile, const std::vector<std::size_t>& members) {
  Layer merged;
  const Layer& first = profile.layer(members.front());
  merged.id = first.id + ".." + profile.layer(members.back()).id;
  merged.description = "merged block of " + std::to_string(members.size()) + " layers:";
  bool split = true, counted = true;
  double input_ms = 0.0, weight_ms = 0.0, flops = 0.0, stashed = 0.0, optimizer = 0.0;
  bool stash_given = false, optimizer_given = false;
  for (std::size_t index : members) {
    const Layer& layer = profile.layer(index);
    merged.description += ' ';
    merged.description += layer.id;
    merged.fwd_ms += layer.fwd_ms;
    merged.bwd_ms += layer.bwd_ms;
    if (layer.recompute_ms) merged.recompute_ms = merged.recompute_ms.value_or(0.0) + *layer.recompute_ms;
    merged.recompute_bytes += layer.recompute_bytes;
    merged.activation_bytes += layer.activation_bytes;
    stashed += stashed_bytes(layer), optimizer += optimizer_bytes(layer);
    stash_given = stash_given || layer.stashed_bytes, optimizer_given = optimizer_given || layer.optimizer_bytes;
    merged.param_bytes += layer.param_bytes;
    split = split && layer.bwd_input_ms && layer.bwd_weight_ms;
    if (split) input_ms += *layer.bwd_input_ms, weight_ms += *layer.bwd_weight_ms;
    counted = counted && layer.flops;
    if (counted) flops += *layer.flops;
  }
  if (split) merged.bwd_input_ms = input_ms, merged.bwd_weight_ms = weight_ms;
  if (counted) merged.flops = flops;
  if (stash_given) merged.stashed_bytes = stashed;
  if (optimizer_given) merged.optimizer_bytes = optimizer;
  return merged;
}

}  // namespace

MergedProfile merge_parallel_branches(const Profile& profile) {
  const std::size_t n = profile.layer_count();
  const auto edges = profile.edges();
  // reach[k]: the furthest layer an edge from a layer before k goes to.
  std::vector<std::size_t> furthest_from(n, 0);
  for (const auto& [from, to] : edges) furthest_from[from] = std::max(furthest_from[from], to);
  std::vector<std::size_t> unit_of(n);  // each layer's layer in the result
  std::vector<std::vector<std::size_t>> units;
  std::vector<std::size_t> block;
  auto close_block = [&] {
    if (block.empty()) return;
    for (std::size_t member : block) unit_of[member] = units.size();
    units.push_back(block);
    block.clear();
  };
  std::size_t reach = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const bool cut_point = reach <= k;
    if (cut_point || profile.layer(k).is_input) {
      close_block();
      unit_of[k] = units.size();
      units.push_back({k});
    } else {
      block.push_back(k);
    }
    reach = std::max(reach, furthest_from[k]);
  }
  close_block();
  MergedProfile result{profile, 0, 0};
  std::vector<Layer> layers;
  for (const auto& members : units) {
    if (members.size() == 1) {
      layers.push_back(profile.layer(members.front()));
    } else {
      layers.push_back(merged_layer(profile, members));
      ++result.merged_blocks;
      result.merged_layers += static_cast<int>(members.size());
    }
  }
  std::set<Profile::Edge> merged_edges;
  for (const auto& [from, to] : edges) {
    if (unit_of[from] != unit_of[to]) merged_edges.insert({unit_of[from], unit_of[to]});
  }
  result.profile = Profile(profile.name(), profile.batch_size(), std::move(layers),
                           std::vector<Profile::Edge>(merged_edges.begin(), merged_edges.end()), profile.source_path());
  return result;
}

}  // namespace pipetwin
