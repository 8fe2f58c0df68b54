#include "sim/sweep_merge.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>

#include "planner/error.h"

namespace pipetwin::sim {
namespace {

constexpr const char* kShardFix = "give the files `pipetwin sweep --shard K/N -o ...` wrote, every K from 1 to N once";

struct Shard {
  std::string path, fingerprint;
  int index = 0, count = 0, configurations = 0;
  std::vector<std::pair<int, std::string>> rows;  // (id, the row's line)
};

// The cells of one CSV line; a quoted cell may hold commas and doubled quotes.
std::vector<std::string> cells_of(const std::string& line) {
  std::vector<std::string> cells{""};
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      cells.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      cells.emplace_back();
    } else {
      cells.back() += c;
    }
  }
  return cells;
}

bool to_int(const std::string& text, int* value) {
  char* end = nullptr;
  const long parsed = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size() || parsed < 0 || parsed > 100'000'000) return false;
  *value = static_cast<int>(parsed);
  return true;
}

bool to_double(const std::string& text, double* value) {
  char* end = nullptr;
  *value = std::strtod(text.c_str(), &end);
  return !text.empty() && end == text.c_str() + text.size();
}

Shard read_shard(const ShardFile& file, const std::string& header) {
  Shard shard;
  shard.path = file.path;
  std::istringstream in(file.text);
  std::string line;
  std::getline(in, line);
  char fingerprint[17] = {0};
  int consumed = 0;
  if (std::sscanf(line.c_str(), "# pipetwin.sweep-shard/1,sweep=%16[0-9a-f],shard=%d/%d,configurations=%d%n", fingerprint,
                  &shard.index, &shard.count, &shard.configurations, &consumed) != 4 ||
      consumed != static_cast<int>(line.size()) || shard.count < 1 || shard.index < 1 || shard.index > shard.count) {
    throw Error({file.path, 1, "shard"}, "not a shard of a sweep (its first line is not '# pipetwin.sweep-shard/1,...')",
                kShardFix);
  }
  shard.fingerprint = fingerprint;
  if (!std::getline(in, line) || line != header) {
    throw Error({file.path, 2, "header"}, "expected the sweep header '" + header + "'", kShardFix);
  }
  int line_number = 2;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.empty()) continue;
    int id = 0;
    const auto cells = cells_of(line);
    if (cells.size() != 12 || !to_int(cells[0], &id)) {
      throw Error({file.path, line_number, "row"}, "not a sweep row (12 columns, an id first)", kShardFix);
    }
    if (id >= shard.configurations || id % shard.count != shard.index - 1) {
      throw Error({file.path, line_number, "id"},
                  "configuration " + std::to_string(id) + " does not belong to shard " + std::to_string(shard.index) + "/" +
                      std::to_string(shard.count) + " of " + std::to_string(shard.configurations),
                  kShardFix);
    }
    shard.rows.emplace_back(id, line);
  }
  return shard;
}

SweepRow row_of(const std::string& line, const std::string& path) {
  const auto cells = cells_of(line);
  SweepRow row;
  bool ok = to_int(cells[0], &row.id) && to_int(cells[2], &row.stages) && to_int(cells[5], &row.microbatches) &&
            to_double(cells[6], &row.bandwidth_scale) && to_double(cells[9], &row.peak_memory_bytes);
  row.plan = cells[1];
  row.replicas = cells[3];
  row.schedule = cells[4];
  row.simulated = !cells[7].empty();
  if (row.simulated) ok = ok && to_double(cells[7], &row.iteration_s) && to_double(cells[8], &row.samples_per_s);
  row.feasible = cells[10] == "true";
  row.note = cells[11];
  row.failed = row.note.rfind("simulation failed", 0) == 0;
  if (!ok) throw Error({path, 0, "row " + cells[0]}, "a number in the row is malformed", kShardFix);
  return row;
}

}  // namespace

MergedSweep merge_sweep_shards(const std::vector<ShardFile>& files) {
  if (files.empty()) throw Error({"", 0, "shards"}, "no shard given", kShardFix);
  const std::string csv_header = sweep_csv({});
  const std::string header = csv_header.substr(0, csv_header.size() - 1);
  std::vector<Shard> shards;
  for (const ShardFile& file : files) shards.push_back(read_shard(file, header));
  const Shard& first = shards.front();
  std::map<int, const Shard*> by_index;
  for (const Shard& shard : shards) {
    if (shard.fingerprint != first.fingerprint || shard.count != first.count ||
        shard.configurations != first.configurations) {
      throw Error({shard.path, 1, "sweep"},
                  "a shard of another sweep (" + shard.fingerprint + ", " + std::to_string(shard.count) + " shards of " +
                      std::to_string(shard.configurations) + "), not of " + first.path + "'s (" + first.fingerprint +
                      ", " + std::to_string(first.count) + " shards of " + std::to_string(first.configurations) + ")",
                  kShardFix);
    }
    if (!by_index.emplace(shard.index, &shard).second) {
      throw Error({shard.path, 1, "shard"},
                  "shard " + std::to_string(shard.index) + "/" + std::to_string(shard.count) + " is also " +
                      by_index[shard.index]->path,
                  kShardFix);
    }
  }
  for (int k = 1; k <= first.count; ++k) {
    if (!by_index.count(k)) {
      throw Error({"", 0, "shards"},
                  "shard " + std::to_string(k) + "/" + std::to_string(first.count) + " of sweep " + first.fingerprint +
                      " is missing",
                  "run `pipetwin sweep ... --shard " + std::to_string(k) + "/" + std::to_string(first.count) +
                      "` and give its file too");
    }
  }
  std::map<int, std::pair<std::string, std::string>> rows;  // id -> (line, path)
  for (const Shard& shard : shards) {
    for (const auto& [id, line] : shard.rows) {
      if (!rows.emplace(id, std::pair{line, shard.path}).second) {
        throw Error({shard.path, 0, "id"}, "configuration " + std::to_string(id) + " is there twice", kShardFix);
      }
    }
  }
  for (int id = 0; id < first.configurations; ++id) {
    if (!rows.count(id)) {
      throw Error({by_index[id % first.count + 1]->path, 0, "id"},
                  "configuration " + std::to_string(id) + " is missing from its shard (a run cut short?)",
                  "run that shard again");
    }
  }
  MergedSweep merged;
  merged.csv = csv_header;
  for (const auto& [id, entry] : rows) {
    merged.csv += entry.first + "\n";
    merged.rows.push_back(row_of(entry.first, entry.second));
  }
  return merged;
}

}  // namespace pipetwin::sim
