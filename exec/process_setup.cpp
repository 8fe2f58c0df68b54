#include "exec/process_setup.h"

#include <malloc.h>
#include <sched.h>

namespace pipetwin::exec {

void keep_freed_memory() {
  mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);  // glibc's largest; also stops the dynamic threshold
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 256 * 1024 * 1024);
}

void pin_to_own_core(int rank, int world_size) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 || world_size > CPU_COUNT(&allowed)) return;
  int seen = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    if (seen++ != rank) continue;
    cpu_set_t own;
    CPU_ZERO(&own);
    CPU_SET(cpu, &own);
    sched_setaffinity(0, sizeof(own), &own);
    return;
  }
}

}  // namespace pipetwin::exec
