// Branch merging — makes a wide model graph plannable by merging each block of parallel branches.
//
// A layer that every path from the model's start to its end goes through is a cut point (in topological
// order, no edge jumps over it). The layers strictly between two consecutive cut points (an Inception
// module's four branches, say) become one layer: times, FLOPs and parameters summed; activation bytes
// summed too, so the stash a stage holds stays right (a stage that ended on the block would be charged
// every member's output to send, an over-estimate; the planner cuts at the cut points instead).
// Data-loading Input layers are never merged. The result plans as a chain, or nearly: PipeDream's own
// tooling compresses branches the same way before its optimizer, since a stage boundary inside a block
// would cut several branches at once. Inception-v3's 221,564 antichain states become one per layer.
#pragma once

#include "planner/profile.h"

namespace pipetwin {

struct MergedProfile {
  Profile profile;
  int merged_blocks = 0;  // blocks of two or more layers made into one
  int merged_layers = 0;  // layers that went into them
};

MergedProfile merge_parallel_branches(const Profile& profile);

}  // namespace pipetwin
