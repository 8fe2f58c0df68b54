// Lowering — turns a compute-only schedule into one the back ends can run, for every schedule alike.
//
// Adds, on each worker: a RECV_ACT before every forward whose input comes from another worker and a
// SEND_ACT after every forward whose output goes to one; a RECV_GRAD before every backward (B or I)
// that needs the next stage's gradient and a SEND_GRAD after it; an ALLREDUCE of the stage's
// gradients among its replicas before every OPTIMIZER_STEP of a replicated stage. Peers follow the
// round-robin replica of the microbatch; byte counts come from the shape.
#pragma once

#include "planner/schedule.h"

namespace pipetwin {

Schedule lower_schedule(const Schedule& compute_only);

}  // namespace pipetwin
