#include "planner/torch_schedule_csv.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include "planner/error.h"
#include "planner/schedule_generators.h"
#include "planner/schedule_lowering.h"

namespace pipetwin {
namespace {

// torch's action types are pipetwin's kind codes (F, I, B, W, SEND_F, RECV_F, SEND_B, RECV_B), but for
// the all-reduce, REDUCE_GRAD; pipetwin's ALLREDUCE, OPT, R (recomputation) and TP (tensor-parallel sums) are
// not torch types.
constexpr const char* kReduceGrad = "REDUCE_GRAD";
constexpr const char* kOverlap = "OVERLAP_F_B";
constexpr const char* kTypes = "F, I, B, W, SEND_F, RECV_F, SEND_B, RECV_B, REDUCE_GRAD or (<F>;<B>)OVERLAP_F_B";

std::string torch_code(ActionKind kind) { return kind == ActionKind::ALLREDUCE ? kReduceGrad : kind_code(kind); }

std::string torch_text(const Action& action) {
  std::string text = std::to_string(action.stage) + torch_code(action.kind);
  if (action.kind != ActionKind::ALLREDUCE) text += std::to_string(action.microbatch);
  return text;
}

std::string overlap_text(const Action& forward, const Action& backward) {
  std::string text = "(";
  text += torch_text(forward);
  text += ';';
  text += torch_text(backward);
  text += ')';
  text += kOverlap;
  return text;
}

class CellParser {
 public:
  CellParser(const std::string& path, int row, const std::string& field) : path_(path), row_(row), field_(field) {}

  [[noreturn]] void fail(const std::string& cell, const std::string& problem, const std::string& fix) const {
    throw Error({path_, row_, field_}, "'" + cell + "': " + problem, fix);
  }

  Action action(const std::string& text, const std::string& cell) const {
    std::size_t position = 0;
    while (position < text.size() && std::isdigit(static_cast<unsigned char>(text[position]))) ++position;
    std::size_t type_end = position;
    while (type_end < text.size() && (std::isupper(static_cast<unsigned char>(text[type_end])) || text[type_end] == '_')) ++type_end;
    std::size_t number_end = type_end;
    while (number_end < text.size() && std::isdigit(static_cast<unsigned char>(text[number_end]))) ++number_end;
    const std::string stage = text.substr(0, position), type = text.substr(position, type_end - position),
                      microbatch = text.substr(type_end, number_end - type_end);
    if (stage.empty() || stage.size() > 6) fail(cell, "does not start with a stage number", "write <stage><TYPE><microbatch>, e.g. 0F3");
    if (type == "BW") fail(cell, "'BW' is torch's old spelling", "write W for a weight backward, or B for a full backward");
    if (type == "UNSHARD" || type == "RESHARD") {
      fail(cell, type + " is FSDP's, and pipetwin does not model FSDP", "remove the UNSHARD and RESHARD cells");
    }
    Action action;
    const std::optional<ActionKind> kind = type == kReduceGrad ? ActionKind::ALLREDUCE : kind_from_code(type);
    const bool pipetwin_only = type == kind_code(ActionKind::ALLREDUCE) || type == kind_code(ActionKind::OPTIMIZER_STEP) ||
                               type == kind_code(ActionKind::RECOMPUTE) || type == kind_code(ActionKind::TENSOR_ALLREDUCE);
    if (!kind || pipetwin_only) {
      fail(cell, "'" + type + "' is not an action type", std::string("use ") + kTypes);
    }
    action.kind = *kind;
    if (number_end != text.size()) {
      fail(cell, "has '" + text.substr(number_end) + "' after the action", "remove the trailing characters");
    }
    action.stage = std::stoi(stage);
    if (action.kind == ActionKind::ALLREDUCE) {
      if (!microbatch.empty()) fail(cell, "REDUCE_GRAD takes no microbatch", "write <stage>REDUCE_GRAD");
    } else {
      if (microbatch.empty() || microbatch.size() > 6) fail(cell, "has no microbatch", "write <stage><TYPE><microbatch>, e.g. 0F3");
      action.microbatch = std::stoi(microbatch);
    }
    return action;
  }

  // A cell: one action, or an overlapped pair (its forward marked overlap).
  std::vector<Action> actions(const std::string& cell) const {
    std::vector<Action> parsed;
    const std::string suffix = std::string(")") + kOverlap;
    if (!cell.empty() && cell.front() == '(') {
      const std::size_t semicolon = cell.find(';'), close = cell.find(')');
      if (semicolon == std::string::npos || close == std::string::npos || semicolon > close ||
          cell.compare(close, std::string::npos, suffix) != 0) {
        fail(cell, "is not an overlapped pair", "write (<stage>F<mb>;<stage>B<mb>)OVERLAP_F_B");
      }
      parsed.push_back(action(cell.substr(1, semicolon - 1), cell));
      parsed.push_back(action(cell.substr(semicolon + 1, close - semicolon - 1), cell));
      if (parsed[0].kind != ActionKind::FORWARD || parsed[1].kind != ActionKind::BACKWARD) {
        fail(cell, "pairs something other than a forward and a full backward",
             "overlap a forward with a full backward (B), forward first");
      }
      parsed[0].overlap = true;
    } else {
      parsed.push_back(action(cell, cell));
    }
    return parsed;
  }

 private:
  const std::string& path_;
  int row_;
  std::string field_;
};

}  // namespace

std::vector<Action> torch_actions_from_text(const std::string& text, const std::string& path, int line, const std::string& field) {
  return CellParser(path, line, field).actions(text);
}

bool looks_like_torch_schedule(const std::string& text) { return text.rfind("# pipetwin.schedule", 0) != 0; }

TorchScheduleFile torch_schedule_from_csv(const std::string& text, const std::string& path) {
  TorchScheduleFile file;
  std::istringstream in(text);
  std::string line;
  int row = 0;
  std::vector<int> stage_rank;
  while (std::getline(in, line)) {
    ++row;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const int rank = row - 1;
    std::vector<Action>& actions = file.ranks.emplace_back();
    const auto cells = split_csv_line(line);
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const std::string& cell = cells[c];
      if (cell.empty()) continue;  // an idle step
      const CellParser parser(path, row, "column " + std::to_string(c + 1));
      const std::vector<Action> parsed = parser.actions(cell);
      for (const Action& action : parsed) {
        if (action.stage >= static_cast<int>(stage_rank.size())) stage_rank.resize(action.stage + 1, -1);
        if (stage_rank[action.stage] >= 0 && stage_rank[action.stage] != rank) {
          parser.fail(cell, "stage " + std::to_string(action.stage) + " is already on rank " +
                                std::to_string(stage_rank[action.stage]),
                      "give each stage to one rank (torch's form has no replicas)");
        }
        stage_rank[action.stage] = rank;
        file.microbatches = std::max(file.microbatches, action.microbatch + 1);
        file.with_communication = file.with_communication || is_send(action.kind) || is_receive(action.kind);
        actions.push_back(action);
      }
    }
  }
  if (row == 0) throw Error({path, 0, ""}, "empty schedule file", "write one row of actions per rank");
  for (std::size_t s = 0; s < stage_rank.size(); ++s) {
    if (stage_rank[s] < 0) {
      throw Error({path, 0, "stage " + std::to_string(s)}, "no rank runs stage " + std::to_string(s),
                  "give every stage 0.." + std::to_string(stage_rank.size() - 1) + " to a rank");
    }
  }
  if (stage_rank.empty()) throw Error({path, 0, ""}, "the file has no actions", "write one row of actions per rank");
  file.stage_rank = stage_rank;
  return file;
}

std::string schedule_to_torch_csv(const Schedule& schedule, bool with_communication, const Evaluation& unit_run) {
  if (!schedule_has_flush(schedule.name)) {
    throw Error({"", 0, "--export-torch"}, "torch's schedule CSV describes one flushed step; " + schedule.name + " has no flush",
                "export a schedule with a flush (" + schedule_names_text() + " but pipedream and 2bw)");
  }
  for (int s = 0; s < schedule.shape.stages(); ++s) {
    if (schedule.shape.replicas(s) > 1) {
      throw Error({"", 0, "--export-torch"}, "stage " + std::to_string(s) + " has replicas, which torch's form cannot say",
                  "export a plan made with --straight");
    }
  }
  std::ostringstream out;
  for (std::size_t w = 0; w < schedule.workers.size(); ++w) {
    const auto& actions = schedule.workers[w];
    std::vector<std::string> cells;
    for (std::size_t i = 0; i < actions.size(); ++i) {
      const Action& action = actions[i];
      // torch's format has no optimizer step, recomputation or tensor-parallel sums (the plan brings them back on import)
      if (action.iteration != 0 || action.kind == ActionKind::OPTIMIZER_STEP || action.kind == ActionKind::RECOMPUTE ||
          action.kind == ActionKind::TENSOR_ALLREDUCE) {
        continue;
      }
      const bool pair = action.overlap && i + 1 < actions.size();
      const std::string text = pair ? overlap_text(action, actions[i + 1]) : torch_text(action);
      if (with_communication) {
        cells.push_back(text);
      } else if (is_pass(action.kind)) {
        const auto slot = static_cast<std::size_t>(std::llround(unit_run.timings.at(w).at(i).start_s));
        if (cells.size() <= slot) cells.resize(slot + 1);
        cells[slot] = text;
      }
      if (pair) ++i;
    }
    for (std::size_t c = 0; c < cells.size(); ++c) out << (c ? "," : "") << cells[c];
    out << '\n';
  }
  return out.str();
}

Schedule schedule_from_torch(const TorchScheduleFile& file, PipelineShape shape, const std::string& path) {
  const int stages = static_cast<int>(file.stage_rank.size()), ranks = static_cast<int>(file.ranks.size());
  if (stages != shape.stages()) {
    throw Error({path, 0, "stages"},
                "the file runs " + std::to_string(stages) + " stages, the plan has " + std::to_string(shape.stages()),
                "use the plan the schedule was written for");
  }
  shape.workers = ranks;
  shape.chunks = std::max(1, stages / std::max(1, ranks));
  for (int s = 0; s < stages; ++s) shape.stage_workers[s] = {file.stage_rank[s]};
  Schedule schedule{"torch", file.microbatches, 1, shape, file.ranks};
  for (int rank = 0; rank < ranks; ++rank) {
    auto& actions = schedule.workers[rank];
    for (Action& action : actions) {
      const int s = action.stage;
      if (is_send(action.kind) || is_receive(action.kind)) {
        const int neighbour = (action.kind == ActionKind::SEND_ACT || action.kind == ActionKind::RECV_GRAD) ? s + 1 : s - 1;
        if (neighbour < 0 || neighbour >= stages) {
          throw Error({path, rank + 1, "stage " + std::to_string(s)},
                      torch_text(action) + " has no stage " + std::to_string(neighbour) + " at the other end",
                      "remove the cell");
        }
        action.peer = file.stage_rank[neighbour];
        action.bytes = shape.output_bytes[std::min(s, neighbour)];  // the lower stage's output or its gradient
      } else if (action.kind == ActionKind::ALLREDUCE) {
        action.bytes = shape.param_bytes[s];
      }
    }
    for (int s = 0; s < stages; ++s) {
      if (file.stage_rank[s] != rank) continue;
      Action step;
      step.stage = s;
      step.kind = ActionKind::OPTIMIZER_STEP;
      actions.push_back(step);
    }
  }
  if (!file.with_communication) return lower_schedule(schedule);
  number_messages(schedule);
  return schedule;
}

}  // namespace pipetwin
