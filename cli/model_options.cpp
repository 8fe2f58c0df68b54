#include "cli/model_options.h"

#include "planner/error.h"

namespace pipetwin::cli {

TransformerSpec model_spec(const ModelShapeArguments& arguments) {
  TransformerSpec spec;
  if (!arguments.preset.empty()) spec = transformer_preset(arguments.preset);
  const bool shape_given = arguments.layers && arguments.hidden && arguments.ffn_hidden && arguments.heads &&
                           arguments.vocabulary && arguments.sequence_length;
  if (arguments.preset.empty() && !shape_given) {
    throw Error({"", 0, "--preset"}, "no model described",
                "give --preset NAME (--list-presets), or --layers, --hidden, --ffn-hidden, --heads, --vocabulary and "
                "--sequence-length");
  }
  if (arguments.preset.empty()) spec.name = "transformer";
  take(arguments.layers, spec.layers);
  take(arguments.hidden, spec.hidden);
  take(arguments.ffn_hidden, spec.ffn_hidden);
  take(arguments.heads, spec.heads);
  if (arguments.preset.empty()) spec.kv_heads = spec.heads;
  take(arguments.kv_heads, spec.kv_heads);
  take(arguments.vocabulary, spec.vocabulary);
  take(arguments.sequence_length, spec.sequence_length);
  take(arguments.element_bytes, spec.element_bytes);
  take(arguments.gated_mlp, spec.gated_mlp);
  take(arguments.linear_biases, spec.linear_biases);
  take(arguments.dropout, spec.dropout);
  take(arguments.tied_embeddings, spec.tied_embeddings);
  take(arguments.learned_positions, spec.learned_positions);
  take(arguments.optimizer_bytes, spec.optimizer_bytes_per_parameter);
  check_transformer_spec(spec);
  return spec;
}

bool describes_transformer(const ModelShapeArguments& arguments) {
  return !arguments.preset.empty() || arguments.layers || arguments.hidden;
}

void check_one_model(const ModelShapeArguments& arguments, const std::string& profile_path) {
  if (!profile_path.empty() && describes_transformer(arguments)) {
    throw Error({"", 0, "--profile"}, "both a measured profile and a transformer described",
                "give --profile FILE or the transformer (--preset ...), not both");
  }
}

void add_model_shape_options(CLI::App* command, ModelShapeArguments& arguments) {
  command->add_option("--preset", arguments.preset, "a published model (see --list-presets)");
  command->add_option("--layers", arguments.layers, "transformer blocks L")->check(CLI::PositiveNumber);
  command->add_option("--hidden", arguments.hidden, "hidden size h")->check(CLI::PositiveNumber);
  command->add_option("--ffn-hidden", arguments.ffn_hidden, "FFN size f (e.g. 4h; 11008 for Llama-2-7B)")
      ->check(CLI::PositiveNumber);
  command->add_option("--heads", arguments.heads, "attention heads (divide h)")->check(CLI::PositiveNumber);
  command->add_option("--kv-heads", arguments.kv_heads, "key/value heads (GQA; default: --heads)")
      ->check(CLI::PositiveNumber);
  command->add_option("--vocabulary", arguments.vocabulary, "vocabulary size V (padded as trained)")
      ->check(CLI::PositiveNumber);
  command->add_option("--sequence-length", arguments.sequence_length, "tokens per sample s")
      ->check(CLI::PositiveNumber);
  command->add_option("--gated-mlp", arguments.gated_mlp, "SwiGLU MLP with three matrices (true/false)");
  command->add_option("--linear-biases", arguments.linear_biases,
                      "biases in linear layers and LayerNorm, as GPT (true/false; false: RMSNorm, no biases)");
  command->add_option("--dropout", arguments.dropout, "dropout masks kept for the backward (true/false)");
  command->add_option("--tied-embeddings", arguments.tied_embeddings, "output layer shares the embedding (true/false)");
  command->add_option("--learned-positions", arguments.learned_positions, "learned position embedding (true/false)");
  command->add_option("--element-bytes", arguments.element_bytes, "bytes per weight and activation element (2: bf16)")
      ->check(CLI::PositiveNumber);
  command->add_option("--optimizer-bytes", arguments.optimizer_bytes,
                      "bytes per parameter of gradients and optimizer state beside the weights (default 16: fp32 "
                      "gradient, master weight and Adam's two moments)")
      ->check(CLI::NonNegativeNumber);
}

}  // namespace pipetwin::cli
