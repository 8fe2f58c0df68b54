#include "planner/stage_figures.h"

#include <algorithm>

namespace pipetwin {

StageFigures stage_figures(const Profile& profile, const std::vector<std::size_t>& layers) {
  StageFigures figures;
  bool split_known = true, weight_known = true, flops_known = true;
  double shared_ms = 0.0, share_weighted_ms = 0.0;
  for (std::size_t index : layers) {
    const Layer& layer = profile.layer(index);
    if (!layer.is_input) {  // an input's time is data loading
      figures.forward_s += layer.fwd_ms / 1000.0;
      figures.backward_s += layer.bwd_ms / 1000.0;
      split_known = split_known && layer.bwd_input_ms.has_value();
      if (layer.bwd_input_ms) figures.backward_input_s += *layer.bwd_input_ms / 1000.0;
      weight_known = weight_known && layer.bwd_weight_ms.has_value();
      if (layer.bwd_weight_ms) figures.backward_weight_s += *layer.bwd_weight_ms / 1000.0;
      flops_known = flops_known && layer.flops.has_value();
      if (layer.flops) figures.forward_flops += *layer.flops;
      if (layer.recompute_ms) figures.recompute_s += *layer.recompute_ms / 1000.0, figures.recomputed = true;
      figures.recompute_bytes = std::max(figures.recompute_bytes, layer.recompute_bytes);
      shared_ms += compute_ms(layer);
      share_weighted_ms += compute_ms(layer) * layer.compute_share.value_or(1.0);
      figures.tensor_sums.add(layer.tensor_sums);
    }
    figures.param_bytes += layer.param_bytes;
    figures.activation_bytes += stashed_bytes(layer);
    if (!layer.is_input) figures.output_gradient_bytes += layer.activation_bytes;
    figures.optimizer_bytes += optimizer_bytes(layer);
  }
  if (!split_known) figures.backward_input_s = 0.0;
  if (!split_known || !weight_known) figures.backward_weight_s = 0.0;
  if (!flops_known) figures.forward_flops = 0.0;
  figures.compute_s = figures.forward_s + figures.backward_s + figures.recompute_s;
  if (shared_ms > 0.0) figures.compute_share = share_weighted_ms / shared_ms;
  return figures;
}

}  // namespace pipetwin
