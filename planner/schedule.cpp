#include "planner/schedule.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "planner/error.h"
#include "planner/json_fields.h"

namespace pipetwin {
namespace {

struct KindInfo {
  ActionKind kind;
  const char* code;
  const char* name;
};

constexpr KindInfo kKinds[] = {
    {ActionKind::FORWARD, "F", "FORWARD"},
    {ActionKind::BACKWARD, "B", "BACKWARD"},
    {ActionKind::BACKWARD_INPUT, "I", "BACKWARD_INPUT"},
    {ActionKind::BACKWARD_WEIGHT, "W", "BACKWARD_WEIGHT"},
    {ActionKind::SEND_ACT, "SEND_F", "SEND_ACT"},
    {ActionKind::RECV_ACT, "RECV_F", "RECV_ACT"},
    {ActionKind::SEND_GRAD, "SEND_B", "SEND_GRAD"},
    {ActionKind::RECV_GRAD, "RECV_B", "RECV_GRAD"},
    {ActionKind::ALLREDUCE, "ALLREDUCE", "ALLREDUCE"},
    {ActionKind::OPTIMIZER_STEP, "OPT", "OPTIMIZER_STEP"},
    {ActionKind::RECOMPUTE, "R", "RECOMPUTE"},
    {ActionKind::TENSOR_ALLREDUCE, "TP", "TENSOR_ALLREDUCE"},
};

const KindInfo& info(ActionKind kind) {
  for (const KindInfo& entry : kKinds) {
    if (entry.kind == kind) return entry;
  }
  return kKinds[0];
}

bool parse_int(const std::string& text, int* value) {
  if (text.empty() || text.size() > 9) return false;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  *value = std::stoi(text);
  return true;
}

}  // namespace

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

Action compute_action(int stage, ActionKind kind, int microbatch) {
  Action action;
  action.stage = stage;
  action.kind = kind;
  action.microbatch = microbatch;
  return action;
}

bool is_pass(ActionKind kind) {
  return kind == ActionKind::FORWARD || kind == ActionKind::BACKWARD || kind == ActionKind::BACKWARD_INPUT ||
         kind == ActionKind::BACKWARD_WEIGHT || kind == ActionKind::RECOMPUTE;
}

std::optional<ActionKind> summed_pass(const std::vector<Action>& actions, std::size_t index) {
  std::size_t before = 0;  // TENSOR_ALLREDUCEs between this one and the passes
  while (before < index && actions[index - 1 - before].kind == ActionKind::TENSOR_ALLREDUCE) ++before;
  if (before >= index) return std::nullopt;
  const std::size_t last = index - 1 - before;  // the last pass of the block
  if (!is_pass(actions[last].kind)) return std::nullopt;
  const bool pair = last > 0 && actions[last - 1].overlap;
  const std::size_t first = pair ? last - 1 : last;
  if (first + before > last) return std::nullopt;
  const Action& pass = actions[first + before];
  const Action& sums = actions[index];
  if (pass.stage != sums.stage || pass.microbatch != sums.microbatch || pass.iteration != sums.iteration) return std::nullopt;
  return pass.kind;
}

int PipelineShape::tensor_parallel() const {
  int ranks = 1;
  for (const TensorSums& sums : tensor_sums) ranks = std::max(ranks, sums.ranks);
  return ranks;
}

bool is_compute(ActionKind kind) { return is_pass(kind) || kind == ActionKind::OPTIMIZER_STEP; }

bool is_send(ActionKind kind) { return kind == ActionKind::SEND_ACT || kind == ActionKind::SEND_GRAD; }
bool is_receive(ActionKind kind) { return kind == ActionKind::RECV_ACT || kind == ActionKind::RECV_GRAD; }

bool is_backward(ActionKind kind) { return kind == ActionKind::BACKWARD || kind == ActionKind::BACKWARD_INPUT; }

std::string kind_code(ActionKind kind) { return info(kind).code; }
std::string kind_name(ActionKind kind) { return info(kind).name; }

std::optional<ActionKind> kind_from_code(const std::string& code) {
  for (const KindInfo& entry : kKinds) {
    if (code == entry.code) return entry.kind;
  }
  return std::nullopt;
}

ActionKind kind_from_name(const std::string& name, const std::string& where, const std::string& field) {
  for (const KindInfo& entry : kKinds) {
    if (name == entry.name) return entry.kind;
  }
  throw Error({where, 0, field}, "'" + name + "' is not an action kind",
              "use FORWARD, BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT, SEND_ACT, RECV_ACT, SEND_GRAD, RECV_GRAD, "
              "ALLREDUCE, OPTIMIZER_STEP, RECOMPUTE or TENSOR_ALLREDUCE");
}

std::string to_text(const Action& action) {
  std::string text = std::to_string(action.stage) + kind_code(action.kind);
  if (action.microbatch >= 0) text += std::to_string(action.microbatch);
  return text;
}

Action action_from_text(const std::string& text, const std::string& where) {
  std::size_t position = 0;
  while (position < text.size() && std::isdigit(static_cast<unsigned char>(text[position]))) ++position;
  std::size_t code_end = position;
  while (code_end < text.size() && !std::isdigit(static_cast<unsigned char>(text[code_end]))) ++code_end;
  Action action;
  const std::string code = text.substr(position, code_end - position);
  const std::string microbatch = text.substr(code_end);
  const std::optional<ActionKind> kind = kind_from_code(code);
  if (kind) action.kind = *kind;
  if (!parse_int(text.substr(0, position), &action.stage) || !kind ||
      (!microbatch.empty() && !parse_int(microbatch, &action.microbatch))) {
    throw Error({where, 0, "action"}, "'" + text + "' is not an action",
                "write <stage><kind><microbatch>, e.g. 2F0 or 1SEND_F3; kinds: F B I W SEND_F RECV_F SEND_B RECV_B "
                "ALLREDUCE OPT");
  }
  if (microbatch.empty() && action.kind != ActionKind::ALLREDUCE && action.kind != ActionKind::OPTIMIZER_STEP) {
    throw Error({where, 0, "action"}, "'" + text + "' has no microbatch", "append the microbatch, e.g. 2F0");
  }
  return action;
}

namespace {

constexpr const char* kCsvHeaderV2 = "worker,index,action,stage,kind,microbatch,iteration,peer,bytes,message";
constexpr const char* kCsvHeader = "worker,index,action,stage,kind,microbatch,iteration,peer,bytes,message,overlap";
constexpr const char* kCsvFormatV2 = "pipetwin.schedule/2";
constexpr const char* kCsvFormat = "pipetwin.schedule/3";
constexpr const char* kCsvFix = "fix the line, or regenerate the file with pipetwin schedule -o";

// "# pipetwin.schedule/3,name=1f1b,microbatches=8,iterations=3,chunks=1,workers=4"; *version 2 or 3
ScheduleFile parse_description(const std::string& line, const std::string& path, int* version) {
  const auto cells = split_csv_line(line);
  *version = !cells.empty() && cells[0] == std::string("# ") + kCsvFormatV2 ? 2 : 3;
  if (cells.empty() || (cells[0] != std::string("# ") + kCsvFormat && *version != 2)) {
    throw Error({path, 1, "format"},
                "expected a first line '# " + std::string(kCsvFormat) + ",name=...,microbatches=...,iterations=...,chunks=...,workers=...'",
                "write schedules with pipetwin schedule -o (files of pipetwin.schedule/1 lack the iteration and "
                "message columns: regenerate them)");
  }
  ScheduleFile file;
  std::map<std::string, int*> numbers{{"microbatches", &file.microbatches}, {"iterations", &file.iterations},
                                      {"chunks", &file.chunks}, {"workers", &file.workers}};
  std::set<std::string> given;
  for (std::size_t i = 1; i < cells.size(); ++i) {
    const auto equals = cells[i].find('=');
    const std::string key = cells[i].substr(0, equals), value = equals == std::string::npos ? "" : cells[i].substr(equals + 1);
    if (!given.insert(key).second) throw Error({path, 1, key}, "given twice", kCsvFix);
    if (key == "name") {
      file.name = value;
    } else if (numbers.count(key)) {
      if (!parse_int(value, numbers[key]) || *numbers[key] < 1 || *numbers[key] > 1'000'000) {
        throw Error({path, 1, key}, "'" + value + "' is not a count between 1 and 1000000", kCsvFix);
      }
    } else {
      throw Error({path, 1, key}, "unknown field '" + key + "'", "the fields are name, microbatches, iterations, chunks, workers");
    }
  }
  for (const char* key : {"name", "microbatches", "iterations", "chunks", "workers"}) {
    if (!given.count(key) || (std::string(key) == "name" && file.name.empty())) {
      throw Error({path, 1, key}, "missing", "add " + std::string(key) + "=... to the first line");
    }
  }
  file.actions.resize(static_cast<std::size_t>(file.workers));
  return file;
}

}  // namespace

std::string schedule_to_csv(const Schedule& schedule) {
  std::ostringstream out;
  out << "# " << kCsvFormat << ",name=" << schedule.name << ",microbatches=" << schedule.microbatches
      << ",iterations=" << schedule.iterations << ",chunks=" << schedule.shape.chunks << ",workers=" << schedule.workers.size()
      << "\n"
      << kCsvHeader << "\n";
  for (std::size_t w = 0; w < schedule.workers.size(); ++w) {
    for (std::size_t i = 0; i < schedule.workers[w].size(); ++i) {
      const Action& action = schedule.workers[w][i];
      char bytes[32];
      std::snprintf(bytes, sizeof bytes, "%.17g", action.bytes);
      out << w << ',' << i << ',' << to_text(action) << ',' << action.stage << ',' << kind_name(action.kind) << ','
          << action.microbatch << ',' << action.iteration << ',' << action.peer << ',' << bytes << ','
          << action.message << ',' << (action.overlap ? 1 : 0) << '\n';
    }
  }
  return out.str();
}

ScheduleFile schedule_file_from_csv(const std::string& text, const std::string& path) {
  std::istringstream in(text);
  std::string line;
  int line_number = 0;
  ScheduleFile file;
  int version = 3;
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line_number == 1) {
      file = parse_description(line, path, &version);
      continue;
    }
    const std::string header = version == 2 ? kCsvHeaderV2 : kCsvHeader;
    if (line_number == 2) {
      if (line != header) throw Error({path, 2, "header"}, "expected the header '" + header + "'", kCsvFix);
      continue;
    }
    if (line.empty()) continue;
    const auto cells = split_csv_line(line);
    auto fail = [&](const std::string& column, const std::string& problem) {
      throw Error({path, line_number, column}, problem, kCsvFix);
    };
    const std::size_t columns = version == 2 ? 10 : 11;
    if (cells.size() != columns) fail("row", "expected " + std::to_string(columns) + " columns, found " + std::to_string(cells.size()));
    int worker = 0, index = 0, stage = 0, microbatch = -1, iteration = 0, peer = -1, message = -1;
    if (!parse_int(cells[0], &worker) || worker >= file.workers) {
      fail("worker", "'" + cells[0] + "' is not a worker id below " + std::to_string(file.workers));
    }
    auto& actions = file.actions[static_cast<std::size_t>(worker)];
    if (!parse_int(cells[1], &index) || index != static_cast<int>(actions.size())) {
      fail("index", "expected index " + std::to_string(actions.size()) + " for worker " + std::to_string(worker) +
                        ", found '" + cells[1] + "'");
    }
    Action action = action_from_text(cells[2], path + ":" + std::to_string(line_number));
    if (!parse_int(cells[3], &stage) || stage != action.stage) fail("stage", "does not match the action text");
    if (cells[4] != kind_name(action.kind)) fail("kind", "'" + cells[4] + "' does not match the action text");
    if (cells[5] != "-1" && (!parse_int(cells[5], &microbatch) || microbatch != action.microbatch)) {
      fail("microbatch", "does not match the action text");
    }
    if (!parse_int(cells[6], &iteration) || iteration >= file.iterations) {
      fail("iteration", "'" + cells[6] + "' is not an iteration below " + std::to_string(file.iterations));
    }
    if (cells[7] != "-1" && (!parse_int(cells[7], &peer) || peer >= file.workers)) {
      fail("peer", "'" + cells[7] + "' is not a worker id below " + std::to_string(file.workers));
    }
    char* end = nullptr;
    action.bytes = std::strtod(cells[8].c_str(), &end);
    if (cells[8].empty() || end != cells[8].c_str() + cells[8].size() || !(action.bytes >= 0) || std::isinf(action.bytes)) {
      fail("bytes", "'" + cells[8] + "' is not a byte count >= 0");
    }
    if (cells[9] != "-1" && !parse_int(cells[9], &message)) fail("message", "'" + cells[9] + "' is not a message id >= 0 (or -1)");
    if (version == 3 && cells[10] != "0" && cells[10] != "1") fail("overlap", "'" + cells[10] + "' is not 0 or 1");
    action.iteration = iteration;
    action.peer = peer;
    action.message = message;
    action.overlap = version == 3 && cells[10] == "1";
    actions.push_back(action);
  }
  if (line_number == 0) throw Error({path, 0, ""}, "empty schedule file", "write schedules with pipetwin schedule -o");
  if (line_number == 1) throw Error({path, 2, "header"}, "the file ends before its header", kCsvFix);
  return file;
}

ScheduleFile load_schedule_file(const std::string& path) {
  return schedule_file_from_csv(json_fields::read_text(path, "schedule CSV"), path);
}

}  // namespace pipetwin
