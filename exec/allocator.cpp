#include "exec/allocator.h"

#include <malloc.h>

namespace pipetwin::exec {

void keep_freed_memory() {
  mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);  // glibc's largest; also stops the dynamic threshold
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 256 * 1024 * 1024);
}

}  // namespace pipetwin::exec
