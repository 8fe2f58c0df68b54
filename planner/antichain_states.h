// AntichainStates — PipeDream's linearisation of a model DAG into a DAG of "states" for the optimizer.
//
// A state is an antichain of layers: everything up to and including it has run. Following PipeDream's
// optimizer (graph.py antichain_dag), data-loading "Input" sources are removed first (their time is
// data loading, not compute) and dangling "__getitem__" sinks are dropped; antichains are grown from
// the first remaining source by replacing one member with a successor. A chain stays a chain: one
// state per layer. Each state carries cumulative compute, activation and parameter totals of all
// layers up to it, so any stage (states i+1..j) is a difference of two totals.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "planner/profile.h"

namespace pipetwin {

struct AntichainState {
  std::vector<std::size_t> antichain;   // augmented antichain, profile layer indices, ascending
  std::vector<std::size_t> closure;     // every layer up to and including the antichain, ascending
  double compute_s = 0.0;               // sum of (fwd + bwd) over the closure, seconds
  double activation_bytes = 0.0;        // sum of stashed activation bytes over the closure
  double param_bytes = 0.0;             // sum of parameter bytes over the closure
  double output_activation_bytes = 0.0; // activation bytes of the antichain's own layers
};

struct AntichainStates {
  std::vector<AntichainState> states;                  // topological order of the antichain DAG
  std::vector<std::vector<std::size_t>> predecessors;  // all ancestors of each state, ascending
  std::vector<std::size_t> removed_inputs;             // profile indices of removed Input sources
  std::vector<std::size_t> removed_sinks;              // profile indices of dropped __getitem__ sinks
  bool is_chain = false;                               // every state's ancestors are exactly 0..j-1
};

// The most states build_antichain_states makes. The optimizer's work on a DAG of n states is
// O(n^3 W^2) and its memory O(n^2) (ancestors, tables): at 5,000 states that is already hours and
// gigabytes, while a chain has one state per layer and PipeDream's ResNet-50 240. A wide graph (parallel
// branches, e.g. Inception's four-way blocks) multiplies its antichains: PipeDream's raw Inception-v3
// has 221,564 and planning it would need tens of GB.
constexpr std::size_t kMaxAntichainStates = 5000;

// Builds the states. Throws Error when nothing is left once inputs are removed, or when the graph has
// more than kMaxAntichainStates states (found while they are discovered, before any large allocation).
AntichainStates build_antichain_states(const Profile& profile);
// The same, or nothing when the graph has more than kMaxAntichainStates states (then merge its
// branches first: branch_merging.h).
std::optional<AntichainStates> build_antichain_states_within_limit(const Profile& profile);

}  // namespace pipetwin
