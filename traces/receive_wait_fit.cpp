#include "traces/receive_wait_fit.h"

#include <cmath>

namespace pipetwin {

double fit_receive_wait_s(const std::function<double(double)>& predicted_iteration_s, double measured_iteration_s) {
  const double without_s = predicted_iteration_s(0.0);
  const double gap_s = measured_iteration_s - without_s;
  if (!(gap_s > 0.0) || !std::isfinite(gap_s)) return 0.0;
  // One waiting receive an iteration on the critical path makes up the gap at w = gap; fewer need more.
  double low_s = 0.0, high_s = gap_s;
  double at_bound_s = predicted_iteration_s(high_s);
  for (int doubling = 0; doubling < 3 && at_bound_s < measured_iteration_s; ++doubling) {
    low_s = high_s;
    high_s *= 2.0;
    at_bound_s = predicted_iteration_s(high_s);
  }
  if (!(at_bound_s > without_s)) return 0.0;  // no receive of the run waits: nothing to fit it on
  if (at_bound_s < measured_iteration_s) return high_s;
  while (high_s - low_s > 1e-4 * measured_iteration_s) {
    const double middle_s = 0.5 * (low_s + high_s);
    (predicted_iteration_s(middle_s) < measured_iteration_s ? low_s : high_s) = middle_s;
  }
  return 0.5 * (low_s + high_s);
}

}  // namespace pipetwin
