// Checkpoints of one worker: after an iteration, the weights and optimizer state of its stages.
//
// On disk, per worker: worker<r>.iteration<N>.pt (the tensors) and worker<r>.json naming the newest
// tensor file, its FNV-1a checksum and the one before it (both kept). Save writes the tensors first
// (temp + rename), then the JSON (temp + rename): a crash at any point leaves a JSON that names
// complete files. Resume verifies the checksum of every tensor file it might load; each worker
// offers the newest iteration it holds intact, all take the oldest offer (so workers a crash left
// one iteration apart, or one whose newest file is corrupt, torn or missing, meet at an iteration
// all have), and a worker that falls back says so on stderr. Errors are pipetwin::Error, one line.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exec/fault.h"

namespace pipetwin::exec {

struct SavedCheckpoint {
  int iteration = -1;
  std::string tensors;      // path of the tensor file
  std::string checksum;     // FNV-1a 64 of the tensor file, 16 hex digits
};

// FNV-1a 64 of the file's bytes as 16 hex digits; "" when it cannot be read.
std::string file_checksum(const std::string& path);

class CheckpointStore {
 public:
  CheckpointStore(std::string directory, int rank, std::string model, FaultSpec fault);

  // Writes this worker's tensors for `iteration` and makes them the newest; drops the one before the
  // previous. `stages` describes the tensors' order (kept in the JSON for readers of the checkpoint).
  void save(int iteration, const std::vector<torch::Tensor>& tensors, const nlohmann::json& stages);

  // Agrees with the other workers (`agree_on_oldest` returns the minimum of everyone's offer) on the
  // newest iteration all hold intact, loads that checkpoint's tensors and returns its iteration.
  int resume(std::vector<torch::Tensor>& tensors, const std::function<std::int64_t(std::int64_t)>& agree_on_oldest);

 private:
  std::string file(const std::string& extension) const;

  std::string directory_;
  int rank_;
  std::string model_;
  FaultSpec fault_;
  SavedCheckpoint newest_, older_;  // this worker's two newest checkpoints on disk
};

}  // namespace pipetwin::exec
