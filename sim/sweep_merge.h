// Sweep merge — puts the shards of one sweep (`sweep --shard K/N`, sweep_shard_csv) back together.
//
// Refuses, naming the file: a file that is not a shard, a shard of another sweep (another fingerprint,
// shard count or size), a shard given twice, a missing shard, a row that is not its shard's or is
// malformed. The merged CSV is what the whole sweep would have written in one run, byte for byte (rows
// by id); its rows are parsed back so the caller can name the best. Throws pipetwin::Error.
#pragma once

#include <string>
#include <vector>

#include "sim/sweep.h"

namespace pipetwin::sim {

struct ShardFile {
  std::string path;
  std::string text;
};

struct MergedSweep {
  std::string csv;
  std::vector<SweepRow> rows;  // by id
};

MergedSweep merge_sweep_shards(const std::vector<ShardFile>& files);

}  // namespace pipetwin::sim
