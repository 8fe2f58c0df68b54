// Allocator settings for training processes on CPU. glibc hands every block over its (dynamic)
// mmap threshold to mmap and gives freed heap tops back to the kernel, so each microbatch's
// activations are fresh pages the kernel must fault in and zero: measured here, 1F1B ran 30-40%
// slower than with memory kept (1,240 against 1,750 samples/s, VGG-16, 2 workers), GPipe 20%, and the
// penalty depended on the schedule's order of allocations, which no profile can predict. Workers and
// the profiler both call keep_freed_memory() first, so the profile and the run see the same allocator.
#pragma once

namespace pipetwin::exec {

// Blocks up to 32 MB from the heap, freed memory kept in the process (no trimming), 256 MB top pad.
void keep_freed_memory();

}  // namespace pipetwin::exec
