// Tensor parallelism, Megatron-LM style, for the gpt zoo model. Rank k of a group of t holds 1/t of
// each transformer block: heads k·a/t .. (k+1)·a/t − 1 of the attention (the QKV projection split by
// its output rows, the output projection by its input columns) and the k-th t-th of the MLP's hidden
// units (the up projection split by output rows, the down projection by input columns). Per block:
//   forward   the block's input normalised, each rank's partial attention output all-reduced (sum),
//             the attention's bias added once; likewise the MLP: two all-reduces of b·s·h elements;
//   backward  the input gradient of each column-parallel projection (QKV, up) all-reduced: two more,
// as planner/transformer_model.h counts them. The embedding, the final norm and the head stay whole on
// every rank (each rank computes them alike). Every rank then has the whole model's loss and, for each
// parameter it holds, the whole model's gradient, or the slice of it that tensor_parallel_shard names.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>

#include "exec/model_zoo.h"

namespace pipetwin::exec {

// Sums a tensor over the tensor-parallel group, in place (every rank calls it in the same order).
using GroupAllReduce = std::function<void(torch::Tensor&)>;

// Throws Error naming "--model" for a model other than gpt (with ranks > 1) and "--tp" when `ranks`
// does not divide the gpt model's attention heads.
void check_tensor_parallel(const std::string& model, int ranks);

// The name of a profile, plan and trace of `model` at tensor parallelism `ranks`: "gpt-tp2" (as
// `pipetwin model --tp` names its profiles), the model's own name for 1; so calibrate refuses a trace of
// one degree against a plan of another, naming both.
std::string tensor_parallel_profile_name(const std::string& model, int ranks);

// `model` as rank `rank` of `ranks` holds it: each of its blocks replaced, in place, by its shard
// (copied from the block's weights, which are then freed). Checks as check_tensor_parallel.
std::unique_ptr<Model> tensor_parallel_model(std::unique_ptr<Model> model, int rank, int ranks,
                                             GroupAllReduce all_reduce);

// The part of a block's parameter named `parameter` ("qkv.weight", "out.bias", "norm1.weight", ...)
// that rank `rank` of `ranks` holds, cut from `whole` (the parameter's tensor, or its gradient, in
// the whole model): a slice for the split projections, `whole` itself for what every rank holds whole.
torch::Tensor tensor_parallel_shard(const std::string& parameter, const torch::Tensor& whole, int rank, int ranks);

}  // namespace pipetwin::exec
