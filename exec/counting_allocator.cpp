#include "exec/counting_allocator.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <atomic>

namespace pipetwin::exec {
namespace {

constexpr std::size_t kHeaderBytes = 64;  // keeps c10's 64-byte alignment of the data
constexpr std::uint8_t kPriority = 255;   // above libtorch's own registrations, so both swaps take

std::atomic<std::int64_t>& live_count() {
  static std::atomic<std::int64_t> bytes{0};  // outlives every block (see the header)
  return bytes;
}

void release(void* data) {
  if (data == nullptr) return;
  char* block = static_cast<char*>(data) - kHeaderBytes;
  live_count() -= static_cast<std::int64_t>(*reinterpret_cast<std::size_t*>(block));
  c10::free_cpu(block);
}

struct CountingAllocator final : c10::Allocator {
  c10::DataPtr allocate(std::size_t bytes) const override {
    char* block = static_cast<char*>(c10::alloc_cpu(bytes + kHeaderBytes));
    *reinterpret_cast<std::size_t*>(block) = bytes;
    live_count() += static_cast<std::int64_t>(bytes);
    void* data = block + kHeaderBytes;
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
};

c10::Allocator* counting_allocator() {
  static CountingAllocator allocator;  // registered with libtorch by pointer: must live to the end
  return &allocator;
}

}  // namespace

CountingCpuAllocation::CountingCpuAllocation() : previous_(c10::GetCPUAllocator()) {
  c10::SetCPUAllocator(counting_allocator(), kPriority);
}

CountingCpuAllocation::~CountingCpuAllocation() { c10::SetCPUAllocator(previous_, kPriority); }

std::int64_t CountingCpuAllocation::live_bytes() const { return live_count().load(); }

}  // namespace pipetwin::exec
