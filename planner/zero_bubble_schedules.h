// Zero-bubble schedules — backward split into input (I) and weight (W) gradients, W filling bubbles.
//
// zb-h1, zb-h2, interleaved-zb and zb-v are one list-scheduling pass with unit times: a free worker
// runs, in order of preference, the input backward of its oldest microbatch whose gradient has arrived,
// the forward of its deepest stage whose input has arrived, or its oldest pending weight backward.
// They differ in where stages sit (one per worker, looped chunks, or a V) and in how many chunk
// activations a worker may hold, counted from F to I, before it admits another microbatch (a pending
// W keeps its activations too and may wait to the drain, so a worker can hold more: measured on 2
// stages x 8 microbatches, the first holds all 8 before its W's; bench/README.md):
//   zb-h1           p - s       (1F1B's peak; Qi et al. 2024, ZB-H1)
//   zb-h2           2(p - s) - 1 (about twice 1F1B's; ZB-H2)
//   interleaved-zb  Megatron's interleaved warm-up + 1 = 2(p - r - 1) + (v - 1)p + 1 (torch's ZB1P)
//   zb-v            2p chunks = 1F1B's peak of p whole stages (ZB-V)
// Only entry into a worker's first stage is gated, so a microbatch already admitted always finishes:
// the pass cannot deadlock. dualpipe-v is DeepSeek's DualPipeV, written out step by step.
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
