// The receive wait — what each receive that waits for its message loses beyond the message's arrival
// (DeviceSpec::receive_wait_s), fitted so that a calibration predicts its own run. The twin runs every
// action at its mean duration; the runs' durations vary, and each receive that waits on a sender
// slower than its mean absorbs the lateness, so the runs' iterations are longer than a twin of means
// gives (bench/README.md "Ten matrices pooled"). Fitted on the base's run, it carries that loss to every
// other configuration in proportion to how many of its receives wait.
#pragma once

#include <functional>

namespace pipetwin {

// The receive wait w >= 0 at which predicted_iteration_s(w) (a simulation of the calibrated run's own
// configuration; non-decreasing in w) reaches measured_iteration_s, by bisection to 1e-4 x the run:
// 0 where the prediction without it is already as long as the run, or does not grow with it (none of
// the run's receives waits); 8 x the gap where even that leaves the prediction short.
double fit_receive_wait_s(const std::function<double(double)>& predicted_iteration_s, double measured_iteration_s);

}  // namespace pipetwin
