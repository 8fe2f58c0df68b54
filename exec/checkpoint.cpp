#include "exec/checkpoint.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "planner/error.h"
#include "planner/json_fields.h"

namespace pipetwin::exec {
namespace {

SavedCheckpoint read_saved(const nlohmann::json& object, const std::string& where, const std::string& path) {
  return {static_cast<int>(json_fields::integer(object, "iteration", where, path)),
          json_fields::string(object, "tensors", where, path), json_fields::string_or(object, "checksum", "", where, path)};
}

nlohmann::json saved_json(const SavedCheckpoint& saved) {
  return {{"iteration", saved.iteration}, {"tensors", saved.tensors}, {"checksum", saved.checksum}};
}

// Why a saved checkpoint cannot be used, or "" when its tensor file is there and matches its checksum.
std::string damage(const SavedCheckpoint& saved) {
  if (saved.iteration < 0) return "none saved";
  if (!std::filesystem::exists(saved.tensors)) return "its tensor file " + saved.tensors + " is missing";
  if (saved.checksum.empty()) return "it has no checksum (written by an older pipetwin)";
  if (file_checksum(saved.tensors) != saved.checksum) return "its tensor file " + saved.tensors + " is corrupt or torn (checksum mismatch)";
  return "";
}

// The message of a torch error without its C++ backtrace.
std::string one_line(const std::exception& error) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&error)) return c10_error->what_without_backtrace();
  std::string text = error.what();
  const auto newline = text.find('\n');
  return newline == std::string::npos ? text : text.substr(0, newline);
}

}  // namespace

std::string file_checksum(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::uint64_t hash = 1469598103934665603ULL;
  char buffer[65536];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    for (std::streamsize i = 0; i < in.gcount(); ++i) {
      hash ^= static_cast<unsigned char>(buffer[i]);
      hash *= 1099511628211ULL;
    }
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

CheckpointStore::CheckpointStore(std::string directory, int rank, std::string model, FaultSpec fault)
    : directory_(std::move(directory)), rank_(rank), model_(std::move(model)), fault_(fault) {}

std::string CheckpointStore::file(const std::string& extension) const {
  return directory_ + "/worker" + std::to_string(rank_) + extension;
}

void CheckpointStore::save(int iteration, const std::vector<torch::Tensor>& tensors, const nlohmann::json& stages) {
  const std::string tensor_path = file(".iteration" + std::to_string(iteration) + ".pt");
  try {
    std::filesystem::create_directories(directory_);
    torch::save(tensors, tensor_path + ".tmp");
  } catch (const std::exception& error) {
    throw Error({tensor_path, 0, "--checkpoint-dir"}, "cannot write the checkpoint: " + one_line(error),
                "choose a writable --checkpoint-dir with free space");
  }
  inject_while_saving(fault_, rank_, iteration);
  const SavedCheckpoint saved{iteration, tensor_path, file_checksum(tensor_path + ".tmp")};
  std::error_code code;
  std::filesystem::rename(tensor_path + ".tmp", tensor_path, code);
  if (code) {
    throw Error({tensor_path, 0, "--checkpoint-dir"}, "cannot write the checkpoint: " + code.message(),
                "choose a writable --checkpoint-dir");
  }
  nlohmann::json meta{{"format", "pipetwin.checkpoint/2"}, {"worker", rank_}, {"model", model_}, {"stages", stages}};
  meta.update(saved_json(saved));
  if (newest_.iteration >= 0 && newest_.iteration != iteration) meta["previous"] = saved_json(newest_);
  json_fields::write_text_atomically(file(".json"), meta.dump(2));
  if (!older_.tensors.empty() && older_.tensors != tensor_path && older_.tensors != newest_.tensors) {
    std::filesystem::remove(older_.tensors, code);
  }
  if (newest_.iteration != iteration) older_ = newest_;
  newest_ = saved;
}

int CheckpointStore::resume(std::vector<torch::Tensor>& tensors,
                            const std::function<std::int64_t(std::int64_t)>& agree_on_oldest) {
  const std::string path = file(".json");
  const nlohmann::json meta = json_fields::read_file(path);
  const std::string format = json_fields::string(meta, "format", "", path);
  if (format != "pipetwin.checkpoint/2" && format != "pipetwin.checkpoint/1") {
    throw Error({path, 0, "format"}, "not a pipetwin checkpoint ('" + format + "')", "start again without --resume");
  }
  if (json_fields::string(meta, "model", "", path) != model_) {
    throw Error({path, 0, "model"}, "the checkpoint is of another model", "resume with the same --model");
  }
  const SavedCheckpoint newest = read_saved(meta, "", path);
  const SavedCheckpoint previous = meta.contains("previous") ? read_saved(meta.at("previous"), "previous", path) : SavedCheckpoint{};
  const std::string newest_damage = damage(newest), previous_damage = damage(previous);
  const int offer = newest_damage.empty() ? newest.iteration : previous_damage.empty() ? previous.iteration : -1;
  const int common = static_cast<int>(agree_on_oldest(offer));
  if (common < 0) {
    throw Error({path, 0, "tensors"},
                offer < 0 ? "no intact checkpoint on this worker: newest: " + newest_damage + "; previous: " + previous_damage
                          : "another worker has no intact checkpoint",
                "start again without --resume (and an empty --checkpoint-dir)");
  }
  const SavedCheckpoint* chosen = common == newest.iteration && newest_damage.empty()       ? &newest
                                  : common == previous.iteration && previous_damage.empty() ? &previous
                                                                                            : nullptr;
  if (chosen == nullptr) {
    throw Error({path, 0, "iteration"},
                "this worker holds iterations " + std::to_string(newest.iteration) +
                    (previous.iteration >= 0 ? " and " + std::to_string(previous.iteration) : std::string()) +
                    ", the others resume from iteration " + std::to_string(common) + ": they are not from the same run" +
                    (newest_damage.empty() ? "" : " (newest: " + newest_damage + ")"),
                "start again without --resume (and an empty --checkpoint-dir)");
  }
  if (chosen != &newest) {
    std::fprintf(stderr, "worker %d: resuming from iteration %d, not from its newest checkpoint (iteration %d): %s\n", rank_,
                 common, newest.iteration, newest_damage.empty() ? "another worker does not have it intact" : newest_damage.c_str());
  }
  try {
    torch::load(tensors, chosen->tensors);
  } catch (const std::exception& error) {
    throw Error({chosen->tensors, 0, ""}, "cannot read the checkpoint's tensors: " + one_line(error),
                "start again without --resume");
  }
  std::error_code code;
  if (chosen == &previous) std::filesystem::remove(newest.tensors, code);  // an iteration not all of us have
  newest_ = *chosen;
  older_ = chosen == &newest ? previous : SavedCheckpoint{};
  return common;
}

}  // namespace pipetwin::exec
