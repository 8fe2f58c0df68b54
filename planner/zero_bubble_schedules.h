// Zero-bubble schedules — backward split into input (I) and weight (W) gradients, W filling bubbles.
//
// zb-h1 and zb-h2 (one stage per worker) keep 1F1B's order of forwards and input backwards (I), with
// a longer warm-up for zb-h2, and run the oldest pending weight backward (W) whenever the next of
// those cannot run yet or a forward would exceed the budget of microbatches held from F to W (a W
// reads the same saved tensors as its I, so they are held until W):
//   zb-h1  warm-up p - s - 1, budget p      (1F1B's peak, p, on every worker; Qi et al. 2024, ZB-H1)
//   zb-h2  warm-up 2(p - s - 1), budget 2p - 1 (ZB-H2)
// With unit times both end at the flush bound 3m + p - 1.
// interleaved-zb and zb-v are one list-scheduling pass, timed with the stages' pass times where the
// shape carries them (PipelineShape::pass_times, from a plan: an uneven cut is laid out as it will run)
// and unit times otherwise: a free worker runs, in order of preference, the input backward of its
// oldest microbatch whose gradient has arrived, the forward of its deepest stage whose input has
// arrived, or its oldest pending weight backward. They differ
// in where stages sit (looped chunks or a V) and in how many chunk activations a worker may hold,
// counted from F to I, before it admits another microbatch (a pending W keeps its activations too and
// may wait to the drain, so a worker can hold more):
//   interleaved-zb  Megatron's interleaved warm-up + 1 = 2(p - r - 1) + (v - 1)p + 1 (torch's ZB1P)
//   zb-v            2p chunks = 1F1B's peak of p whole stages (ZB-V)
// Only entry into a worker's first stage is gated, so a microbatch already admitted always finishes:
// its deeper forward may pass the budget when the worker has nothing else to run (zb-v: and no other
// worker is computing; one chunk over at most on the tests' uneven shapes), so the pass cannot
// deadlock. dualpipe-v is DeepSeek's DualPipeV, written out step by step.
#pragma once

#include <string>

#include "planner/schedule.h"

namespace pipetwin {

// name: zb-h1, zb-h2, interleaved-zb or zb-v; the shape's placement must match (schedule_generators.h).
Schedule zero_bubble_schedule(const std::string& name, const PipelineShape& shape, int microbatches);

// DualPipeV on p workers and 2p stages in a V (worker r holds stages r and 2p-1-r); microbatches >= 2p.
// Its eight steps per rank r (DualPipe's dualpipev.py): 2(p-r-1) F0; r+1 (F0 F1); p-r-1 (I1 W F1);
// m-2p+r+1 ((F0&B1) (F1&B0)) (the last rank runs its first F0, B1 apart); p-r-1 (B1 (F1&B0));
// r+1 (B1 B0), the second half split into I with W deferred; p-r-1 (W I0); r+1 W. F&B is one
// overlapped pair (Action::overlap). Chunk 0 is stages 0..p-1, chunk 1 stages p..2p-1.
Schedule dualpipe_v_schedule(const PipelineShape& shape, int microbatches);

}  // namespace pipetwin
