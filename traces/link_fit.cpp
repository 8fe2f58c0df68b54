#include "traces/link_fit.h"

#include <cmath>
#include <set>

#include "planner/error.h"
#include "planner/json_fields.h"
#include "planner/schedule_evaluator.h"
#include "traces/prediction_accuracy.h"

namespace pipetwin {

LinkFit fit_link(const std::vector<double>& bytes, const std::vector<double>& seconds) {
  const std::set<double> sizes(bytes.begin(), bytes.end());
  if (bytes.size() != seconds.size() || sizes.size() < 2) {
    throw Error({"", 0, "message_bytes"}, "a link fit needs times at two sizes at least", "probe more message sizes");
  }
  // Least squares of the relative error, (latency + slope b - t) / t: every size counts alike, where
  // plain least squares would let the largest messages set the line and miss the small ones' latency.
  const double n = static_cast<double>(bytes.size());
  double s00 = 0.0, s01 = 0.0, s11 = 0.0, r0 = 0.0, r1 = 0.0;  // normal equations, weights 1 / t^2
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const double w = 1.0 / (seconds[i] * seconds[i]);
    s00 += w, s01 += w * bytes[i], s11 += w * bytes[i] * bytes[i];
    r0 += w * seconds[i], r1 += w * bytes[i] * seconds[i];
  }
  const double determinant = s00 * s11 - s01 * s01;
  double intercept = (r0 * s11 - r1 * s01) / determinant, slope = (s00 * r1 - s01 * r0) / determinant;
  if (intercept < 0.0) {  // through the origin instead: slope = sum(b / t) / sum(b^2 / t^2)
    intercept = 0.0;
    slope = r1 / s11;
  }
  if (!(slope > 0.0)) {
    throw Error({"", 0, "message_one_way_s"}, "the message times do not grow with the size",
                "probe larger messages (up to tens of MB) or repeat on a quieter machine");
  }
  LinkFit fit{intercept, 1.0 / slope, 0.0};
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const double predicted = intercept + slope * bytes[i];
    fit.rms_relative_error += std::pow((predicted - seconds[i]) / seconds[i], 2) / n;
  }
  fit.rms_relative_error = std::sqrt(fit.rms_relative_error);
  return fit;
}

LinkFit probed_link(const nlohmann::json& probe, const std::string& path) {
  json_fields::expect_format(probe, "pipetwin.probe/1", path);
  if (!probe.contains("messages")) {
    throw Error({path, 0, "messages"}, "the probe timed no messages", "probe again with pipetwin probe --messages");
  }
  const nlohmann::json& messages = probe.at("messages");
  LinkFit link;
  link.latency_s = json_fields::number(messages, "latency_s", "messages", path);
  link.bandwidth_bytes_per_s = json_fields::number(messages, "bandwidth_bytes_per_s", "messages", path);
  link.rms_relative_error = json_fields::number_or(messages, "rms_relative_error", 0.0, "messages", path);
  link.send_overhead_s = json_fields::number_or(messages, "send_overhead_s", 0.0, "messages", path);
  link.recv_overhead_s = json_fields::number_or(messages, "recv_overhead_s", 0.0, "messages", path);
  link.message_cpu_s = json_fields::number_or(messages, "message_cpu_s", 0.0, "messages", path);
  link.message_cpu_s_per_byte = json_fields::number_or(messages, "message_cpu_s_per_byte", 0.0, "messages", path);
  if (!(link.message_cpu_s >= 0.0) || !(link.message_cpu_s_per_byte >= 0.0)) {
    throw Error({path, 0, "messages.message_cpu_s"}, "a message's CPU cost must not be negative",
                "probe again with pipetwin probe --messages");
  }
  if (!(link.send_overhead_s >= 0.0) || !(link.recv_overhead_s >= 0.0)) {
    throw Error({path, 0, "messages.send_overhead_s"}, "a message's overheads must not be negative",
                "probe again with pipetwin probe --messages");
  }
  if (!(link.latency_s >= 0.0)) {
    throw Error({path, 0, "messages.latency_s"}, "a link latency must not be negative", "probe again with pipetwin probe --messages");
  }
  if (!(link.bandwidth_bytes_per_s > 0.0)) {
    throw Error({path, 0, "messages.bandwidth_bytes_per_s"}, "a link bandwidth must be positive",
                "probe again with pipetwin probe --messages");
  }
  return link;
}

AllReduceOverhead fit_all_reduce_overhead(const std::vector<AllReduceTimes>& groups, const LinkFit& link) {
  const CommunicationCost ring{link.bandwidth_bytes_per_s, link.latency_s};
  std::vector<double> bytes, residual_s;
  for (const AllReduceTimes& group : groups) {
    for (std::size_t i = 0; i < group.bytes.size() && i < group.seconds.size(); ++i) {
      const double residual = group.seconds[i] - ring.ring_allreduce_s(group.bytes[i], group.processes);
      if (residual > 0.0) bytes.push_back(group.bytes[i]), residual_s.push_back(residual);
    }
  }
  if (residual_s.empty()) return {};
  try {
    const LinkFit line = fit_link(bytes, residual_s);
    return {line.latency_s, 1.0 / line.bandwidth_bytes_per_s};
  } catch (const Error&) {  // one size, or no growth with the size: a fixed cost alone
    return {median_of(residual_s), 0.0};
  }
}

std::optional<AllReduceOverhead> probed_all_reduce_overhead(const nlohmann::json& probe, const std::string& path) {
  if (!probe.contains("all_reduce") || !probe.at("all_reduce").contains("overhead_s")) return std::nullopt;
  const nlohmann::json& all_reduce = probe.at("all_reduce");
  AllReduceOverhead overhead;
  overhead.overhead_s = json_fields::number(all_reduce, "overhead_s", "all_reduce", path);
  overhead.s_per_byte = json_fields::number_or(all_reduce, "s_per_byte", 0.0, "all_reduce", path);
  if (!(overhead.overhead_s >= 0.0) || !(overhead.s_per_byte >= 0.0)) {
    throw Error({path, 0, "all_reduce.overhead_s"}, "an all-reduce's overhead and cost per byte must not be negative",
                "probe again with pipetwin probe --messages --all-reduce");
  }
  return overhead;
}

}  // namespace pipetwin
