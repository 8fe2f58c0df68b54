// Kineto import — a PyTorch profiler (Kineto) Chrome trace of a torch.distributed.pipelining job as a
// measured pipetwin trace, so `compare` and `calibrate` work on a user's own torch job.
//
// torch's pipelining runtime wraps every action in record_function("PP:<action>"), the action in
// torch's text form (torch_schedule_csv.h): "PP:0F3", "PP:1I2", "PP:0SEND_F3". Every complete event
// ("ph": "X") so named becomes one trace event: worker = the rank, stage, kind, microbatch from the
// label, start and end from "ts" and "dur" (microseconds, shifted so the earliest event starts at 0).
// The rank is the file's "distributedInfo.rank" when present, else the file's position among the
// files given; in one merged file holding several processes, the rank is the position of the
// event's "pid" in ascending order. Iterations: the k-th occurrence of (rank, stage, kind,
// microbatch) is iteration k. An OVERLAP_F_B pair becomes its forward and its backward, each half of
// the pair's time. Other events are ignored. Errors name the file, the event's index and the field.
#pragma once

#include <string>
#include <vector>

#include "traces/trace.h"

namespace pipetwin {

struct KinetoFile {
  std::string path;
  std::string text;
};

// `profile` and `cluster` are recorded in the header (what the job ran on), may be empty.
Trace trace_from_kineto(const std::vector<KinetoFile>& files, const std::string& profile, const std::string& cluster);

}  // namespace pipetwin
