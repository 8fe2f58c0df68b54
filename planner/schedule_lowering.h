// Lowering — turns a compute-only schedule into one the back ends can run, for every schedule alike.
//
// Adds, on each worker: a RECV_ACT before every forward whose input comes from another worker and a
// SEND_ACT after every forward whose output goes to one; a RECV_GRAD before every backward (B or I)
// that needs the next stage's gradient and a SEND_GRAD after it; an ALLREDUCE of the stage's
// gradients among its replicas before every OPTIMIZER_STEP of a replicated stage; a RECOMPUTE before
// every backward (B or I) of a stage that recomputes (add_recomputation). Peers follow the
// round-robin replica of the microbatch; byte counts come from the shape.
//
// Every message gets an id, the one place where a send is paired with its receive: a send and its
// receive share one (sender, receiver, activation or gradient, producing stage, iteration,
// microbatch), and the k-th all-reduce of a stage on each of its replicas is one collective. Ids are
// numbered 0, 1, ... in order of the senders' (worker, position); the back ends, the validator and
// calibration match messages by id alone.
#pragma once

#include "planner/schedule.h"

namespace pipetwin {

Schedule lower_schedule(const Schedule& compute_only);

// Numbers the messages of a schedule that already has its sends, receives and all-reduces (a torch
// CSV with communication): as above; a second identical send or receive keeps -1 for the validator.
void number_messages(Schedule& schedule);

// Puts a RECOMPUTE directly before every backward (B or I) of a recomputing stage (shape.recomputed):
// after the backward's gradient has arrived, as Megatron-LM recomputes, so the rebuilt activations are
// held no longer than the backward needs them; before the forward of an overlapped pair (OVERLAP_F_B),
// which runs as one with its backward. A schedule that already has its RECOMPUTEs is left as it is.
void add_recomputation(Schedule& schedule);

// Puts a TENSOR_ALLREDUCE after every F, B, I and R of a stage with tensor-parallel sums
// (shape.sums(stage).ranks > 1), its bytes the pass's (tensor_sums.h): directly after the pass, before
// its send; after an overlapped pair, one per pass in the pair's order. W sums nothing. A list that
// already has its TENSOR_ALLREDUCEs is left as it is. Run after add_recomputation.
void add_tensor_sums(Schedule& schedule);

}  // namespace pipetwin
