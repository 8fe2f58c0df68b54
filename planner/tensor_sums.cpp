#include "planner/tensor_sums.h"

#include <algorithm>

#include "planner/error.h"
#include "planner/json_fields.h"
#include "planner/schedule.h"

namespace pipetwin {

const PassSums& TensorSums::of(ActionKind kind) const {
  static const PassSums none;
  switch (kind) {
    case ActionKind::FORWARD: return forward;
    case ActionKind::BACKWARD:
    case ActionKind::BACKWARD_INPUT: return backward;
    case ActionKind::RECOMPUTE: return recompute;
    default: return none;
  }
}

void TensorSums::add(const TensorSums& other) {
  ranks = std::max(ranks, other.ranks);
  for (auto [mine, theirs] : {std::pair{&forward, &other.forward}, std::pair{&backward, &other.backward},
                              std::pair{&recompute, &other.recompute}}) {
    mine->count += theirs->count;
    mine->bytes += theirs->bytes;
    mine->paper_s += theirs->paper_s;
  }
}

nlohmann::json tensor_sums_to_json(const TensorSums& sums) {
  nlohmann::json document = {{"ranks", sums.ranks}};
  for (auto [name, pass] : {std::pair{"forward", &sums.forward}, std::pair{"backward", &sums.backward},
                            std::pair{"recompute", &sums.recompute}}) {
    document[name] = {{"count", pass->count}, {"bytes", pass->bytes}, {"paper_s", pass->paper_s}};
  }
  return document;
}

TensorSums tensor_sums_from_json(const nlohmann::json& object, const char* key, const std::string& where,
                                 const std::string& path) {
  TensorSums sums;
  if (!object.contains(key)) return sums;
  const std::string at = json_fields::field_path(where, key);
  const nlohmann::json& document = object.at(key);
  if (!document.is_object()) {
    throw Error({path, 0, at}, "expected an object", "write {\"ranks\": 2, \"forward\": {\"count\": ..., \"bytes\": ..., \"paper_s\": ...}, ...}");
  }
  sums.ranks = json_fields::small_integer(document, "ranks", at, path);
  if (sums.ranks < 1) throw Error({path, 0, at + ".ranks"}, "fewer than 1 rank", "the tensor-parallel degree, >= 1");
  for (auto [name, pass] : {std::pair{"forward", &sums.forward}, std::pair{"backward", &sums.backward},
                            std::pair{"recompute", &sums.recompute}}) {
    if (!document.contains(name)) continue;
    const std::string pass_at = json_fields::field_path(at, name);
    const nlohmann::json& entry = document.at(name);
    if (!entry.is_object()) throw Error({path, 0, pass_at}, "expected an object", "write {\"count\": 2, \"bytes\": ..., \"paper_s\": ...}");
    pass->count = json_fields::small_integer_or(entry, "count", 0, pass_at, path);
    pass->bytes = json_fields::number_or(entry, "bytes", 0.0, pass_at, path);
    pass->paper_s = json_fields::number_or(entry, "paper_s", 0.0, pass_at, path);
    if (pass->count < 0 || pass->bytes < 0.0 || pass->paper_s < 0.0) {
      throw Error({path, 0, pass_at}, "a negative count, bytes or time", "counts, bytes and times are >= 0");
    }
  }
  return sums;
}

}  // namespace pipetwin
