// Small helpers for reading pipetwin JSON files with errors that name the file and the field.
//
// Every reader of a pipetwin format (profile, cluster, plan) goes through these, so a missing or
// mistyped field always produces the same kind of message: "<file>: field '<path>': <problem> (fix: ...)".
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace pipetwin::json_fields {

// Reads and parses a whole JSON file; throws Error on I/O or syntax errors (with line and column).
nlohmann::json read_file(const std::string& path);

// Parses JSON text that came from `path` (used in messages only).
nlohmann::json parse(const std::string& text, const std::string& path);

// Checks `"format": "<expected>"` at the top of a document.
void expect_format(const nlohmann::json& document, const std::string& expected, const std::string& path);

// Field accessors. `where` is the JSON path of `object` (e.g. "layers[3]"); the field name is appended.
const nlohmann::json& require(const nlohmann::json& object, const char* key, const std::string& where,
                              const std::string& path);
double number(const nlohmann::json& object, const char* key, const std::string& where, const std::string& path);
double number_or(const nlohmann::json& object, const char* key, double fallback, const std::string& where,
                 const std::string& path);
long long integer(const nlohmann::json& object, const char* key, const std::string& where, const std::string& path);
// An integer between -1 and 1e9 (counts, ids, -1 for "none"), as an int; out of range is an Error.
int small_integer(const nlohmann::json& object, const char* key, const std::string& where, const std::string& path);
int small_integer_or(const nlohmann::json& object, const char* key, int fallback, const std::string& where,
                     const std::string& path);
std::string string(const nlohmann::json& object, const char* key, const std::string& where, const std::string& path);
std::string string_or(const nlohmann::json& object, const char* key, const std::string& fallback,
                      const std::string& where, const std::string& path);
bool boolean_or(const nlohmann::json& object, const char* key, bool fallback, const std::string& where,
                const std::string& path);

// Joins a JSON path and a key: field_path("levels[1]", "count") == "levels[1].count".
std::string field_path(const std::string& where, const std::string& key);

// The whole file at `path`; Error "cannot open <what>" naming the path when it cannot be read.
std::string read_text(const std::string& path, const std::string& what);

// Writes `text` to `path` atomically: a temporary file beside it, then rename, so a crash never
// leaves a partial file that looks complete.
void write_text_atomically(const std::string& path, const std::string& text);

}  // namespace pipetwin::json_fields
