// The NCCL process group, for workers on GPUs. Built only with -DPIPETWIN_WITH_NCCL=ON, against a CUDA
// build of libtorch (the Debian libtorch is CPU-only) with the CUDA toolkit and NCCL; otherwise
// make_nccl_group throws a pipetwin::Error saying how to get it.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>

#include "exec/transport.h"

namespace pipetwin::exec {

bool nccl_available();
c10::intrusive_ptr<CollectiveGroup> make_nccl_group(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                  std::chrono::milliseconds timeout);

}  // namespace pipetwin::exec
