// CPU time — what this process (every thread) or the calling thread has run on the cores, in
// seconds since it started: the message probe counts a message's CPU with it, and a worker what its
// compute actions and the rest of its process used (the trace's process_cpu_s, compute_cpu_s).
#pragma once

namespace pipetwin::exec {

double process_cpu_s();
double thread_cpu_s();

}  // namespace pipetwin::exec
