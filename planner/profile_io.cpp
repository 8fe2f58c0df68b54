#include "planner/profile_io.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>
#include <unordered_map>

#include "planner/error.h"
#include "planner/json_fields.h"

namespace pipetwin {
namespace {

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

std::vector<std::string> split(const std::string& text, const std::string& separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const auto at = text.find(separator, start);
    if (at == std::string::npos) {
      parts.push_back(text.substr(start));
      return parts;
    }
    parts.push_back(text.substr(start, at - start));
    start = at + separator.size();
  }
}

double parse_number(const std::string& text, const std::string& path, int line, const std::string& field) {
  const std::string value = trim(text);
  char* end = nullptr;
  errno = 0;
  const double result = std::strtod(value.c_str(), &end);
  if (value.empty() || end != value.c_str() + value.size() || errno == ERANGE) {
    throw Error({path, line, field}, "'" + value + "' is not a number", "write a decimal number, e.g. 1.250");
  }
  return result;
}

// Parses "key=value" and checks the key.
std::string keyed_value(const std::string& item, const std::string& key, const std::string& path, int line) {
  const std::string text = trim(item);
  const auto equals = text.find('=');
  if (equals == std::string::npos || trim(text.substr(0, equals)) != key) {
    throw Error({path, line, key}, "expected '" + key + "=<value>', found '" + text + "'",
                "write the four fields in PipeDream's order: forward_compute_time, backward_compute_time, "
                "activation_size, parameter_size");
  }
  return text.substr(equals + 1);
}

Layer parse_node_line(const std::string& line_text, const std::string& path, int line) {
  const auto tokens = split(trim(line_text), " -- ");
  if (tokens.size() < 3 || tokens.size() > 4) {
    throw Error({path, line, "node"}, "expected 'id -- description -- metadata', found '" + trim(line_text) + "'",
                "node lines have three ' -- '-separated parts (and an optional stage_id); edge lines start with "
                "a tab");
  }
  Layer layer;
  layer.id = trim(tokens[0]);
  layer.description = trim(tokens[1]);
  layer.is_input = layer.description.rfind("Input", 0) == 0;
  const auto fields = split(tokens[2], ", ");
  if (fields.size() != 4) {
    throw Error({path, line, "metadata"},
                "expected 4 comma-separated fields, found " + std::to_string(fields.size()),
                "write forward_compute_time=, backward_compute_time=, activation_size=, parameter_size=");
  }
  layer.fwd_ms = parse_number(keyed_value(fields[0], "forward_compute_time", path, line), path, line,
                              "forward_compute_time");
  layer.bwd_ms = parse_number(keyed_value(fields[1], "backward_compute_time", path, line), path, line,
                              "backward_compute_time");
  const std::string activation = trim(keyed_value(fields[2], "activation_size", path, line));
  if (!activation.empty() && activation.front() == '[') {
    if (activation.back() != ']') {
      throw Error({path, line, "activation_size"}, "unterminated list '" + activation + "'", "close it with ']'");
    }
    for (const std::string& part : split(activation.substr(1, activation.size() - 2), ";")) {
      layer.output_bytes.push_back(parse_number(part, path, line, "activation_size"));
      layer.activation_bytes += layer.output_bytes.back();
    }
  } else {
    layer.activation_bytes = parse_number(activation, path, line, "activation_size");
  }
  layer.param_bytes = parse_number(keyed_value(fields[3], "parameter_size", path, line), path, line,
                                   "parameter_size");
  for (auto [value, field] : {std::pair{layer.fwd_ms, "forward_compute_time"},
                              std::pair{layer.bwd_ms, "backward_compute_time"},
                              std::pair{layer.activation_bytes, "activation_size"},
                              std::pair{layer.param_bytes, "parameter_size"}}) {
    if (value < 0.0) {
      throw Error({path, line, field}, "layer '" + layer.id + "' has a negative " + field,
                  "profiled times and sizes must be >= 0");
    }
  }
  return layer;
}

std::string stem_of(const std::string& path) {
  std::string name = path.substr(path.find_last_of('/') + 1);
  const auto dot = name.find('.');
  return dot == std::string::npos ? name : name.substr(0, dot);
}

std::optional<double> optional_number(const nlohmann::json& object, const char* key, const std::string& where,
                                      const std::string& path) {
  if (!object.contains(key) || object.at(key).is_null()) return std::nullopt;
  return json_fields::number(object, key, where, path);
}

}  // namespace

Profile import_pipedream_graph(const std::string& text, const std::string& path, const std::string& name,
                               int batch_size) {
  std::vector<Layer> layers;
  ProfileSourceLines lines;
  std::unordered_map<std::string, std::size_t> index_of;
  std::vector<Profile::Edge> edges;
  std::istringstream in(text);
  std::string line_text;
  int line = 0;
  while (std::getline(in, line_text)) {
    ++line;
    if (trim(line_text).empty()) continue;
    if (line_text[0] == '\t' || line_text[0] == ' ') {
      const auto ends = split(trim(line_text), " -- ");
      if (ends.size() != 2) {
        throw Error({path, line, "edge"}, "expected '\\tfrom -- to', found '" + trim(line_text) + "'",
                    "edge lines name two node ids separated by ' -- '");
      }
      std::size_t endpoint[2];
      for (int side = 0; side < 2; ++side) {
        auto it = index_of.find(trim(ends[side]));
        if (it == index_of.end()) {
          throw Error({path, line, "edge"}, "edge names unknown node '" + trim(ends[side]) + "'",
                      "declare the node on a node line before edges that use it");
        }
        endpoint[side] = it->second;
      }
      edges.emplace_back(endpoint[0], endpoint[1]);
      lines.edge_lines.push_back(line);
      continue;
    }
    Layer layer = parse_node_line(line_text, path, line);
    if (!index_of.emplace(layer.id, layers.size()).second) {
      throw Error({path, line, "node"}, "node id '" + layer.id + "' is declared twice", "give each node one line");
    }
    layers.push_back(std::move(layer));
    lines.layer_lines.push_back(line);
  }
  if (layers.empty()) throw Error({path, 0, ""}, "no node lines found", "is this a PipeDream graph.txt?");
  return Profile(name, batch_size, std::move(layers), std::move(edges), path, lines);
}

nlohmann::json profile_to_json(const Profile& profile) {
  nlohmann::json layers = nlohmann::json::array();
  for (const Layer& layer : profile.layers()) {
    nlohmann::json entry = {{"id", layer.id},
                            {"description", layer.description},
                            {"fwd_ms", layer.fwd_ms},
                            {"bwd_ms", layer.bwd_ms},
                            {"activation_bytes", layer.activation_bytes},
                            {"param_bytes", layer.param_bytes}};
    if (layer.is_input) entry["input"] = true;
    if (layer.bwd_input_ms) entry["bwd_input_ms"] = *layer.bwd_input_ms;
    if (layer.bwd_weight_ms) entry["bwd_weight_ms"] = *layer.bwd_weight_ms;
    if (layer.compute_share) entry["compute_share"] = *layer.compute_share;
    if (!layer.output_bytes.empty()) entry["output_bytes"] = layer.output_bytes;
    if (layer.flops) entry["flops"] = *layer.flops;
    if (layer.stashed_bytes) entry["stashed_bytes"] = *layer.stashed_bytes;
    if (layer.optimizer_bytes) entry["optimizer_bytes"] = *layer.optimizer_bytes;
    if (layer.recompute_ms) entry["recompute_ms"] = *layer.recompute_ms;
    if (layer.recompute_bytes > 0.0) entry["recompute_bytes"] = layer.recompute_bytes;
    if (layer.tensor_sums.ranks > 1) entry["tensor_sums"] = tensor_sums_to_json(layer.tensor_sums);
    layers.push_back(std::move(entry));
  }
  nlohmann::json edges = nlohmann::json::array();
  for (const auto& [from, to] : profile.edges()) edges.push_back({profile.layer(from).id, profile.layer(to).id});
  return {{"format", "pipetwin.profile/1"},
          {"name", profile.name()},
          {"batch_size", profile.batch_size()},
          {"layers", std::move(layers)},
          {"edges", std::move(edges)}};
}

Profile profile_from_json(const nlohmann::json& document, const std::string& path) {
  json_fields::expect_format(document, "pipetwin.profile/1", path);
  const std::string name = json_fields::string_or(document, "name", stem_of(path), "", path);
  const long long batch_size = json_fields::integer(document, "batch_size", "", path);
  const nlohmann::json& layer_list = json_fields::require(document, "layers", "", path);
  if (!layer_list.is_array()) throw Error({path, 0, "layers"}, "expected an array", "write \"layers\": [...]");
  std::vector<Layer> layers;
  std::unordered_map<std::string, std::size_t> index_of;
  for (std::size_t i = 0; i < layer_list.size(); ++i) {
    const std::string where = "layers[" + std::to_string(i) + "]";
    const nlohmann::json& entry = layer_list[i];
    Layer layer;
    layer.id = json_fields::string(entry, "id", where, path);
    layer.description = json_fields::string_or(entry, "description", "", where, path);
    layer.fwd_ms = json_fields::number(entry, "fwd_ms", where, path);
    layer.bwd_ms = json_fields::number(entry, "bwd_ms", where, path);
    layer.bwd_input_ms = optional_number(entry, "bwd_input_ms", where, path);
    layer.bwd_weight_ms = optional_number(entry, "bwd_weight_ms", where, path);
    layer.compute_share = optional_number(entry, "compute_share", where, path);
    layer.activation_bytes = json_fields::number(entry, "activation_bytes", where, path);
    layer.param_bytes = json_fields::number(entry, "param_bytes", where, path);
    layer.flops = optional_number(entry, "flops", where, path);
    layer.stashed_bytes = optional_number(entry, "stashed_bytes", where, path);
    layer.optimizer_bytes = optional_number(entry, "optimizer_bytes", where, path);
    layer.recompute_ms = optional_number(entry, "recompute_ms", where, path);
    layer.recompute_bytes = optional_number(entry, "recompute_bytes", where, path).value_or(0.0);
    layer.is_input = json_fields::boolean_or(entry, "input", false, where, path);
    layer.tensor_sums = tensor_sums_from_json(entry, "tensor_sums", where, path);
    if (entry.contains("output_bytes")) {
      const nlohmann::json& outputs = entry.at("output_bytes");
      if (!outputs.is_array()) {
        throw Error({path, 0, where + ".output_bytes"}, "expected an array of numbers", "write [bytes, ...]");
      }
      for (const auto& bytes : outputs) {
        if (!bytes.is_number()) {
          throw Error({path, 0, where + ".output_bytes"}, "expected numbers, found " + bytes.dump(),
                      "write plain numbers");
        }
        layer.output_bytes.push_back(bytes.get<double>());
      }
    }
    for (auto [value, field] : {std::pair{layer.fwd_ms, "fwd_ms"}, std::pair{layer.bwd_ms, "bwd_ms"},
                                std::pair{layer.activation_bytes, "activation_bytes"},
                                std::pair{layer.param_bytes, "param_bytes"}}) {
      if (value < 0.0) {
        throw Error({path, 0, where + "." + field}, "negative value " + std::to_string(value),
                    "profiled times and sizes must be >= 0");
      }
    }
    if (!index_of.emplace(layer.id, layers.size()).second) {
      throw Error({path, 0, where + ".id"}, "layer id '" + layer.id + "' appears twice", "give every layer a unique id");
    }
    layers.push_back(std::move(layer));
  }
  std::vector<Profile::Edge> edges;
  if (document.contains("edges")) {
    const nlohmann::json& edge_list = document.at("edges");
    if (!edge_list.is_array()) throw Error({path, 0, "edges"}, "expected an array", "write \"edges\": [[from, to], ...]");
    for (std::size_t e = 0; e < edge_list.size(); ++e) {
      const std::string where = "edges[" + std::to_string(e) + "]";
      const nlohmann::json& edge = edge_list[e];
      if (!edge.is_array() || edge.size() != 2 || !edge[0].is_string() || !edge[1].is_string()) {
        throw Error({path, 0, where}, "expected [\"from_id\", \"to_id\"], found " + edge.dump(),
                    "write each edge as a pair of layer ids");
      }
      std::size_t endpoint[2];
      for (int side = 0; side < 2; ++side) {
        auto it = index_of.find(edge[side].get<std::string>());
        if (it == index_of.end()) {
          throw Error({path, 0, where}, "edge names unknown layer '" + edge[side].get<std::string>() + "'",
                      "use ids listed under \"layers\"");
        }
        endpoint[side] = it->second;
      }
      edges.emplace_back(endpoint[0], endpoint[1]);
    }
  }
  if (batch_size <= 0 || batch_size > 1'000'000'000) {
    throw Error({path, 0, "batch_size"}, "batch size " + std::to_string(batch_size) + " is out of range",
                "give the minibatch size the profile was taken at, a positive integer");
  }
  return Profile(name, static_cast<int>(batch_size), std::move(layers), std::move(edges), path);
}

void write_profile_json(const Profile& profile, const std::string& path) {
  json_fields::write_text_atomically(path, profile_to_json(profile).dump(2) + "\n");
}

Profile load_profile(const std::string& path, int graph_batch_size) {
  const std::string text = json_fields::read_text(path, "profile");
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    return profile_from_json(json_fields::parse(text, path), path);
  }
  return import_pipedream_graph(text, path, stem_of(path), graph_batch_size);
}

}  // namespace pipetwin
