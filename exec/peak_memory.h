// Peak memory of a worker on CPU — what the memory model predicts, measured honestly: the resident
// set's high-water mark (VmHWM) since the run started, less the resident set then, plus the bytes the
// stages already held then (weights, momentum); the heap's free pages are given back first, so
// reusing them counts as growth. Linux resets the high-water mark through
// /proc/self/clear_refs ("5"), so what model construction touched before the run does not count.
// Where /proc cannot be read, peak_bytes() is -1 (unknown), never a guess.
#pragma once

namespace pipetwin::exec {

class PeakMemory {
 public:
  // Marks the start: `held_bytes` is what the worker's stages hold at this moment.
  void start(double held_bytes);
  // The peak since start() (held bytes + growth of the resident set); -1 when unknown.
  double peak_bytes() const;

 private:
  double held_bytes_ = 0.0;
  double baseline_rss_bytes_ = -1.0;
};

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM"), -1 when absent.
double process_status_bytes(const char* field);

}  // namespace pipetwin::exec
