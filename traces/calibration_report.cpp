#include "traces/calibration_report.h"

#include <cstdio>

namespace pipetwin {

nlohmann::json calibration_to_json(const Calibration& c) {
  return {{"compute_scale", c.compute_scale},
          {"worker_compute_scale", c.worker_compute_scale},
          {"stage_forward_fraction", c.stage_forward_fraction},
          {"stage_optimizer_s", c.stage_optimizer_s},
          {"message_overhead_s", c.message_overhead_s},
          {"bandwidth_bytes_per_s", c.bandwidth_bytes_per_s},
          {"action_overhead_s", c.action_overhead_s},
          {"send_overhead_s", c.send_overhead_s},
          {"send_samples", c.send_samples},
          {"send_crossing_s", c.send_crossing_s},
          {"send_crossing_samples", c.send_crossing_samples},
          {"recv_overhead_s", c.recv_overhead_s},
          {"recv_samples", c.recv_samples},
          {"compute_samples", c.compute_samples},
          {"transfer_samples", c.transfer_samples},
          {"compute_rms_relative_error", c.compute_rms_relative_error},
          {"transfer_rms_error_s", c.transfer_rms_error_s},
          {"runtime_memory_bytes", c.runtime_memory_bytes}};
}

std::string calibration_text(const Calibration& c) {
  char text[512];
  std::snprintf(text, sizeof text,
                "compute scale %.4f (device speed %.4f; %d operations, rms error %.1f%%), %.6f s between actions\n"
                "%.6f s to post a send (%d sends; %d crossed one the other way, %.6f s more), %.6f s to take an arrived message (%d receives)\n"
                "per-message overhead %.6f s, bandwidth %s (%d transfers, rms error %.6f s)\n",
                c.compute_scale, 1.0 / c.compute_scale, c.compute_samples, 100 * c.compute_rms_relative_error,
                c.action_overhead_s, c.send_overhead_s, c.send_samples, c.send_crossing_samples, c.send_crossing_s, c.recv_overhead_s, c.recv_samples,
                c.message_overhead_s,
                c.bandwidth_bytes_per_s > 0 ? (std::to_string(c.bandwidth_bytes_per_s / 1e9) + " GB/s").c_str() : "kept",
                c.transfer_samples, c.transfer_rms_error_s);
  std::string out = text;
  out += "compute scale per worker:";
  for (double k : c.worker_compute_scale) {
    std::snprintf(text, sizeof text, " %.4f", k);
    out += text;
  }
  if (c.runtime_memory_bytes >= 0.0) {
    std::snprintf(text, sizeof text, "\nruntime memory per worker process %.1f MB (device.runtime_memory_bytes)",
                  c.runtime_memory_bytes / 1e6);
  } else {
    std::snprintf(text, sizeof text, "\nruntime memory per worker process: not fitted (no peak per worker in the trace, or a schedule pipetwin does not generate)");
  }
  out += text;
  return out + "\n";
}

}  // namespace pipetwin
