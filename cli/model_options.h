// The options that describe a transformer (a preset, its shape, each figure changeable), shared by
// `pipetwin model` and `pipetwin search`, and the description they give.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "planner/transformer_model.h"

namespace pipetwin::cli {

struct ModelShapeArguments {
  std::string preset;
  std::optional<int> layers, hidden, ffn_hidden, heads, kv_heads, sequence_length, element_bytes;
  std::optional<long long> vocabulary;
  std::optional<bool> gated_mlp, linear_biases, dropout, tied_embeddings, learned_positions;
  std::optional<double> optimizer_bytes;
};

// Registers --preset, --layers, --hidden, --ffn-hidden, --heads, --kv-heads, --vocabulary,
// --sequence-length, --gated-mlp, --linear-biases, --dropout, --tied-embeddings, --learned-positions,
// --element-bytes and --optimizer-bytes.
void add_model_shape_options(CLI::App* command, ModelShapeArguments& arguments);

// `field` = `given` when the option was given.
template <typename T>
void take(const std::optional<T>& given, T& field) {
  if (given) field = *given;
}

// The preset with the given figures changed, or the given shape; throws Error naming the option.
TransformerSpec model_spec(const ModelShapeArguments& arguments);

// Whether the options describe a transformer (a preset, or a shape begun).
bool describes_transformer(const ModelShapeArguments& arguments);

// Throws Error naming --profile when a measured profile (`profile_path`) and a transformer are both given.
void check_one_model(const ModelShapeArguments& arguments, const std::string& profile_path);

}  // namespace pipetwin::cli
