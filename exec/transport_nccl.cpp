#include "exec/transport_nccl.h"

#include "planner/error.h"

#ifdef PIPETWIN_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace pipetwin::exec {

#ifdef PIPETWIN_WITH_NCCL

bool nccl_available() { return true; }

c10::intrusive_ptr<CollectiveGroup> make_nccl_group(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                    std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
}

#else

bool nccl_available() { return false; }

c10::intrusive_ptr<CollectiveGroup> make_nccl_group(const c10::intrusive_ptr<c10d::Store>&, int, int,
                                                    std::chrono::milliseconds) {
  throw Error({"", 0, "--device"}, "this pipetwin was built without NCCL",
              "on a CUDA machine: cmake -DPIPETWIN_WITH_NCCL=ON -DCMAKE_PREFIX_PATH=<a CUDA libtorch>, or use --device cpu");
}

#endif

}  // namespace pipetwin::exec
