// Counting CPU allocation — for the profiler: while a CountingCpuAllocation is alive, libtorch's CPU
// tensors are allocated through an allocator that counts the bytes they hold, so the bytes a layer's
// forward keeps alive for its backward (saved tensors and output) read as the growth of live_bytes()
// across that forward. The allocator underneath is libtorch's own (c10::alloc_cpu, 64-byte aligned);
// each block carries its size in a 64-byte header. The count is one process-wide figure (a freed
// block may outlive the scope that made it, so its deleter must find the count after the scope);
// nested scopes share it. CPU only: on a GPU the caching allocator is not replaced.
#pragma once

#include <cstdint>

namespace c10 {
struct Allocator;
}

namespace pipetwin::exec {

class CountingCpuAllocation {
 public:
  CountingCpuAllocation();   // installs the counting allocator
  ~CountingCpuAllocation();  // puts back the one that was there
  CountingCpuAllocation(const CountingCpuAllocation&) = delete;
  CountingCpuAllocation& operator=(const CountingCpuAllocation&) = delete;

  // Bytes of CPU tensors allocated through the counting allocator and not yet freed.
  std::int64_t live_bytes() const;

 private:
  c10::Allocator* previous_;
};

}  // namespace pipetwin::exec
