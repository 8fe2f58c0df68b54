#include "exec/core_speed.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <vector>

#include "exec/process_setup.h"
#include "traces/prediction_accuracy.h"

namespace pipetwin::exec {
namespace {

constexpr int kSide = 64;         // three 64x64 float matrices: 48 KB, in a core's own caches
constexpr int kProducts = 100;    // ~2.5 ms on this machine's cores

// A fixed amount of floating-point work (matrix products, as the workers' computes are), its seconds.
double time_kernel() {
  static thread_local std::array<float, kSide * kSide> a, b, c;
  for (int i = 0; i < kSide * kSide; ++i) {
    a[i] = static_cast<float>(i % 7) * 0.1f;
    b[i] = static_cast<float>(i % 5) * 0.2f;
    c[i] = 0.0f;
  }
  const auto start = std::chrono::steady_clock::now();
  for (int product = 0; product < kProducts; ++product) {
    for (int i = 0; i < kSide; ++i) {
      for (int k = 0; k < kSide; ++k) {
        const float scale = a[i * kSide + k];
        for (int j = 0; j < kSide; ++j) c[i * kSide + j] += scale * b[k * kSide + j];
      }
    }
    a[product % (kSide * kSide)] += c[(product * 7) % (kSide * kSide)] * 1e-9f;  // no product can be skipped
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  volatile float sink = c[kSide + 1];
  (void)sink;
  return seconds;
}

double median_of_tries(int tries) {
  std::vector<double> seconds;
  for (int t = 0; t < std::max(1, tries); ++t) seconds.push_back(time_kernel());
  return median_of(seconds);
}

}  // namespace

std::vector<double> kernel_seconds_per_core(int tries) {
  const std::vector<int> allowed = usable_cpus();
  std::vector<double> seconds;
  for (int cpu : allowed) {
    if (pin_to_cpus({cpu})) seconds.push_back(median_of_tries(tries));
  }
  pin_to_cpus(allowed);
  if (seconds.empty()) seconds.push_back(median_of_tries(tries));
  return seconds;
}

}  // namespace pipetwin::exec
