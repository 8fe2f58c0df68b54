// Core speed — how long a fixed kernel takes on each core this process may use, now: the check that a
// shared machine is in its usual state around a measured run (slow_spell.h).
//
// On the 2-core machine here one core at a time runs, in episodes of 1-15 s, about twice as slow as
// usual, in CPU time as well as wall time (a neighbour on the host, not this machine's scheduler),
// flickering between that and 1.1-1.4 times within half a second; a pipeline worker on that core
// computes about a quarter slower (bench/README.md, "Slow spells, waited out"). A kernel of ~2.5 ms on each core, the
// median of nine tries (~25 ms: a moment's flicker neither hides nor makes a spell), tells such a core
// from the others.
#pragma once

#include <vector>

namespace pipetwin::exec {

// Seconds the kernel took on each core this process may use (in the order of their numbers), pinned
// to each in turn, the median of `tries`; the thread's affinity is restored before it returns (a
// process started later inherits it). Where the affinity cannot be read or set: one figure, unpinned.
std::vector<double> kernel_seconds_per_core(int tries = 9);

}  // namespace pipetwin::exec
