// Process set-up for training processes on CPU — what every worker (and the profiler and the probe,
// so they see what the workers see) does before its first tensor:
//  - keep_freed_memory(): glibc hands every block over its (dynamic) mmap threshold to mmap and gives
//    freed heap tops back to the kernel, so each microbatch's activations are fresh pages the kernel
//    must fault in and zero: measured here, 1F1B ran 30-40% slower than with memory kept (1,240
//    against 1,750 samples/s, VGG-16, 2 workers), GPipe 20%, and the penalty depended on the
//    schedule's order of allocations, which no profile can predict;
//  - pin_to_own_core(): process `rank` of `world_size` on the rank-th core it may use when there are
//    enough (one pipeline worker per core keeps the scheduler from moving workers about, which made
//    run-to-run times spread); nothing when there are fewer cores than processes. It pins the calling
//    thread and those it starts later: called once the transport has started its threads (Gloo's
//    work and I/O threads), which stay free to run on any core. Pinned with them, every all-reduce
//    waited for its core: 3-4 ms for 4 KB between two processes against 0.3-0.8 ms (`probe
//    --all-reduce`, 2026-12-04);
//  - report_fatal_signals(): a crash (segmentation fault, bus error, illegal instruction) prints one
//    line naming the signal and the process, then the call stack, before the process dies of it as
//    it would have; installed once by pipetwin-exec, inherited by every forked worker.
#pragma once

#include <vector>

namespace pipetwin::exec {

// Blocks up to 32 MB from the heap, freed memory kept in the process (no trimming), 256 MB top pad.
void keep_freed_memory();

void pin_to_own_core(int rank, int world_size);

// The cores this process may run on (its affinity mask; the machine's count where that cannot be read).
int usable_cores();
// The CPUs this process may run on, by number (its affinity mask; empty where that cannot be read).
std::vector<int> usable_cpus();
// Pins the calling thread (and the threads it starts later) to `cpus`; false where that fails.
bool pin_to_cpus(const std::vector<int>& cpus);

void report_fatal_signals();

// A TCP port free on the loopback interface now (for a rendezvous of processes of this machine).
// Throws pipetwin::Error when none can be had.
int free_local_port();

}  // namespace pipetwin::exec
