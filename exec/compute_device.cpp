#include "exec/compute_device.h"

#include <torch/cuda.h>

#include "planner/error.h"

namespace pipetwin::exec {

torch::Device device_for_rank(const std::string& name, int rank) {
  if (name == "cpu") return torch::Device(torch::kCPU);
  if (name != "cuda") throw Error({"", 0, "--device"}, "unknown device '" + name + "'", "use cpu or cuda");
  if (!torch::cuda::is_available()) {
    throw Error({"", 0, "--device"}, "no CUDA device is visible to this libtorch",
                "use --device cpu, or a libtorch built with CUDA on a machine with a GPU");
  }
  return torch::Device(torch::kCUDA, static_cast<int>(rank % torch::cuda::device_count()));
}

void wait_for(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

bool one_gpu_per_worker(const std::string& name, int workers) {
  return name == "cuda" && static_cast<int>(torch::cuda::device_count()) >= workers;
}

}  // namespace pipetwin::exec
