// Profiler — measures a zoo model layer by layer and writes the profile format the planner reads.
//
// For each layer, with the previous layer's output as input: forward, backward and split backward
// (input part, then weight part, as zero-bubble workers run them) times (after
// warm-up runs, the median of `repeats`), output (activation) bytes and parameter bytes. Layers form
// a chain named "layer<i>". Times in ms per minibatch of `batch` samples, on one thread, as workers run.
#pragma once

#include <string>

#include "planner/profile.h"

namespace pipetwin::exec {

struct ProfilerOptions {
  std::string model = "mlp";
  int batch = 32;
  int warmup = 2;
  int repeats = 5;
  bool small = true;
};

Profile profile_model(const ProfilerOptions& options);

}  // namespace pipetwin::exec
