// Core speed — how long a fixed kernel takes on each core this process may use, now: the check that a
// shared machine is in its usual state around a measured run (slow_spell.h).
//
// On the 2-core machine here one core at a time runs, for spells of 10-25 s, 1.7-2 times slower than
// usual, in CPU time as well as wall time (a neighbour on the host, not this machine's scheduler), and
// a pipeline run then takes 1.4-1.7 times as long (bench/README.md, "Slow spells"). A kernel of ~2.5 ms
// on each core, the fastest of three tries, tells such a core from the others.
#pragma once

#include <vector>

namespace pipetwin::exec {

// Seconds the kernel took on each core this process may use (in the order of their numbers), pinned
// to each in turn, the fastest of `tries`; the thread's affinity is restored before it returns (a
// process started later inherits it). Where the affinity cannot be read or set: one figure, unpinned.
std::vector<double> kernel_seconds_per_core(int tries = 3);

}  // namespace pipetwin::exec
