#include "planner/schedule.h"

#include <cctype>
#include <cstdio>
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

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

}  // namespace

bool is_compute(ActionKind kind) {
  return kind == ActionKind::FORWARD || kind == ActionKind::BACKWARD || kind == ActionKind::BACKWARD_INPUT ||
         kind == ActionKind::BACKWARD_WEIGHT;
}

bool is_backward(ActionKind kind) { return kind == ActionKind::BACKWARD || kind == ActionKind::BACKWARD_INPUT; }

std::string kind_code(ActionKind kind) { return info(kind).code; }
std::string kind_name(ActionKind kind) { return info(kind).name; }

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
  bool known = false;
  for (const KindInfo& entry : kKinds) {
    if (code == entry.code) {
      action.kind = entry.kind;
      known = true;
    }
  }
  if (!parse_int(text.substr(0, position), &action.stage) || !known ||
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

std::string schedule_to_csv(const Schedule& schedule) {
  std::ostringstream out;
  out << "worker,index,action,stage,kind,microbatch,peer,bytes\n";
  for (std::size_t w = 0; w < schedule.workers.size(); ++w) {
    for (std::size_t i = 0; i < schedule.workers[w].size(); ++i) {
      const Action& action = schedule.workers[w][i];
      char bytes[32];
      std::snprintf(bytes, sizeof bytes, "%.17g", action.bytes);
      out << w << ',' << i << ',' << to_text(action) << ',' << action.stage << ',' << kind_name(action.kind) << ','
          << action.microbatch << ',' << action.peer << ',' << bytes << '\n';
    }
  }
  return out.str();
}

std::vector<std::vector<Action>> actions_from_csv(const std::string& text, const std::string& path, int workers) {
  std::vector<std::vector<Action>> result(static_cast<std::size_t>(workers));
  std::istringstream in(text);
  std::string line;
  int line_number = 0;
  const std::string header = "worker,index,action,stage,kind,microbatch,peer,bytes";
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line_number == 1) {
      if (line != header) {
        throw Error({path, 1, "header"}, "expected the header '" + header + "'", "write schedules with pipetwin schedule -o");
      }
      continue;
    }
    if (line.empty()) continue;
    const auto cells = split_csv(line);
    auto fail = [&](const std::string& column, const std::string& problem) {
      throw Error({path, line_number, column}, problem, "fix the row or regenerate the file with pipetwin schedule -o");
    };
    if (cells.size() != 8) fail("row", "expected 8 columns, found " + std::to_string(cells.size()));
    int worker = 0, index = 0, peer = 0;
    if (!parse_int(cells[0], &worker) || worker >= workers) {
      fail("worker", "'" + cells[0] + "' is not a worker id below " + std::to_string(workers));
    }
    if (!parse_int(cells[1], &index) || index != static_cast<int>(result[worker].size())) {
      fail("index", "expected index " + std::to_string(result[worker].size()) + " for worker " + std::to_string(worker) +
                        ", found '" + cells[1] + "'");
    }
    Action action = action_from_text(cells[2], path + ":" + std::to_string(line_number));
    int stage = 0, microbatch = -1;
    if (!parse_int(cells[3], &stage) || stage != action.stage) fail("stage", "does not match the action text");
    if (cells[4] != kind_name(action.kind)) fail("kind", "'" + cells[4] + "' does not match the action text");
    if (cells[5] != "-1" && (!parse_int(cells[5], &microbatch) || microbatch != action.microbatch)) {
      fail("microbatch", "does not match the action text");
    }
    if (cells[6] == "-1") {
      peer = -1;
    } else if (!parse_int(cells[6], &peer) || peer >= workers) {
      fail("peer", "'" + cells[6] + "' is not a worker id below " + std::to_string(workers));
    }
    action.peer = peer;
    char* end = nullptr;
    action.bytes = std::strtod(cells[7].c_str(), &end);
    if (cells[7].empty() || end != cells[7].c_str() + cells[7].size() || action.bytes < 0) {
      fail("bytes", "'" + cells[7] + "' is not a byte count >= 0");
    }
    result[worker].push_back(action);
  }
  if (line_number == 0) throw Error({path, 0, ""}, "empty schedule file", "write schedules with pipetwin schedule -o");
  return result;
}

std::vector<std::vector<Action>> load_schedule_actions(const std::string& path, int workers) {
  return actions_from_csv(json_fields::read_text(path, "schedule CSV"), path, workers);
}

}  // namespace pipetwin
