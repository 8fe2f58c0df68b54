// Balanced plans — a fixed number of stages, each replicated the same number of times, with layers
// cut in topological order so that the slowest stage's compute is as small as possible. The sweep
// uses them to explore stage counts and replica splits beside the optimizer's plan.
#pragma once

#include <string>

#include "planner/cluster.h"
#include "planner/plan.h"
#include "planner/profile.h"

namespace pipetwin {

// `stages` must divide the cluster's workers and be at most the number of compute layers; stage s
// runs on workers [s*r, (s+1)*r), r = workers / stages. Throws Error otherwise.
Plan balanced_plan(const Profile& profile, const Cluster& cluster, int stages, const std::string& schedule,
                   int microbatches);

// The same with `replicas[s]` workers for stage s (their sum must be the cluster's workers); stage s
// runs on the next replicas[s] workers in order.
Plan balanced_plan(const Profile& profile, const Cluster& cluster, const std::vector<int>& replicas,
                   const std::string& schedule, int microbatches);

}  // namespace pipetwin
