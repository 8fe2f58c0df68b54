#include "exec/peak_memory.h"

#include <malloc.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>

namespace pipetwin::exec {

double process_status_bytes(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  const std::size_t length = std::strlen(field);
  while (std::getline(status, line)) {
    if (line.compare(0, length, field) == 0 && line.size() > length && line[length] == ':') {
      return std::stod(line.substr(length + 1)) * 1024.0;  // the kernel writes kB
    }
  }
  return -1.0;
}

void PeakMemory::start(double held_bytes) {
  held_bytes_ = held_bytes;
  // Free heap pages resident now (a worker forked from a process that profiled the model inherits
  // its freed heap) would be reused without growing the resident set: give them back first.
  malloc_trim(0);
  std::ofstream("/proc/self/clear_refs") << "5";  // resets VmHWM to the current resident set
  baseline_rss_bytes_ = process_status_bytes("VmRSS");
}

double PeakMemory::peak_bytes() const {
  const double high_water = process_status_bytes("VmHWM");
  if (baseline_rss_bytes_ < 0 || high_water < 0) return -1.0;
  return held_bytes_ + std::max(0.0, high_water - baseline_rss_bytes_);
}

}  // namespace pipetwin::exec
