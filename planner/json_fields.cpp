#include "planner/json_fields.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "planner/error.h"

namespace pipetwin::json_fields {

std::string field_path(const std::string& where, const std::string& key) {
  return where.empty() ? key : where + "." + key;
}

namespace {

int line_at(const std::string& text, std::size_t byte) {
  int line = 1;
  for (std::size_t i = 0; i < text.size() && i < byte; ++i) line += text[i] == '\n';
  return line;
}

// nlohmann's message without its "[json.exception...] ...; " prefix.
std::string plain_message(const std::string& message) {
  const auto bracket = message.find("] ");
  std::string plain = bracket == std::string::npos ? message : message.substr(bracket + 2);
  const auto colon = plain.find("; ");
  return colon == std::string::npos ? plain : plain.substr(colon + 2);
}

}  // namespace

nlohmann::json parse(const std::string& text, const std::string& path) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& error) {
    throw Error({path, line_at(text, error.byte), ""}, "not valid JSON: " + plain_message(error.what()),
                "fix the JSON syntax at that line");
  } catch (const nlohmann::json::exception& error) {
    // Not a syntax error but a value JSON cannot hold, e.g. "number overflow parsing '1e999'": find
    // the quoted token to name its line.
    const std::string message = plain_message(error.what());
    const auto open = message.find('\''), close = message.rfind('\'');
    std::size_t byte = std::string::npos;
    if (open != std::string::npos && close > open) byte = text.find(message.substr(open + 1, close - open - 1));
    throw Error({path, byte == std::string::npos ? 0 : line_at(text, byte), ""}, "not valid JSON: " + message,
                "write numbers within the range of a double (about 1.8e308)");
  }
}

std::string read_text(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error({path, 0, ""}, "cannot open " + what, "check the path exists and is readable");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::json read_file(const std::string& path) { return parse(read_text(path, "file"), path); }

void expect_format(const nlohmann::json& document, const std::string& expected, const std::string& path) {
  if (!document.is_object()) {
    throw Error({path, 0, ""}, "expected a JSON object at the top level", "write the document as {\"format\": \"" +
                                                                          expected + "\", ...}");
  }
  auto it = document.find("format");
  if (it == document.end() || !it->is_string()) {
    throw Error({path, 0, "format"}, "missing \"format\"", "add \"format\": \"" + expected + "\"");
  }
  if (it->get<std::string>() != expected) {
    throw Error({path, 0, "format"}, "format is \"" + it->get<std::string>() + "\", expected \"" + expected + "\"",
                "pass a file of kind " + expected);
  }
}

const nlohmann::json& require(const nlohmann::json& object, const char* key, const std::string& where,
                              const std::string& path) {
  if (!object.is_object()) {
    throw Error({path, 0, where}, "expected a JSON object", "write this entry as {...}");
  }
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) {
    throw Error({path, 0, field_path(where, key)}, "missing field", std::string("add \"") + key + "\"");
  }
  return *it;
}

double number(const nlohmann::json& object, const char* key, const std::string& where, const std::string& path) {
  const nlohmann::json& value = require(object, key, where, path);
  if (!value.is_number()) {
    throw Error({path, 0, field_path(where, key)}, "expected a number, found " + value.dump(),
                "write a plain number");
  }
  const double result = value.get<double>();
  if (!std::isfinite(result)) {
    throw Error({path, 0, field_path(where, key)}, "not a finite number", "write a finite number");
  }
  return result;
}

double number_or(const nlohmann::json& object, const char* key, double fallback, const std::string& where,
                 const std::string& path) {
  if (!object.contains(key) || object.at(key).is_null()) return fallback;
  return number(object, key, where, path);
}

long long integer(const nlohmann::json& object, const char* key, const std::string& where, const std::string& path) {
  const nlohmann::json& value = require(object, key, where, path);
  if (!value.is_number_integer()) {
    throw Error({path, 0, field_path(where, key)}, "expected an integer, found " + value.dump(),
                "write a whole number");
  }
  return value.get<long long>();
}

int small_integer(const nlohmann::json& object, const char* key, const std::string& where, const std::string& path) {
  const long long value = integer(object, key, where, path);
  if (value < -1 || value > 1'000'000'000) {
    throw Error({path, 0, field_path(where, key)}, std::to_string(value) + " is out of range (-1 .. 1e9)", "fix the value");
  }
  return static_cast<int>(value);
}

int small_integer_or(const nlohmann::json& object, const char* key, int fallback, const std::string& where,
                     const std::string& path) {
  if (!object.contains(key) || object.at(key).is_null()) return fallback;
  return small_integer(object, key, where, path);
}

std::string string(const nlohmann::json& object, const char* key, const std::string& where, const std::string& path) {
  const nlohmann::json& value = require(object, key, where, path);
  if (!value.is_string()) {
    throw Error({path, 0, field_path(where, key)}, "expected a string, found " + value.dump(), "quote the value");
  }
  return value.get<std::string>();
}

std::string string_or(const nlohmann::json& object, const char* key, const std::string& fallback,
                      const std::string& where, const std::string& path) {
  if (!object.contains(key) || object.at(key).is_null()) return fallback;
  return string(object, key, where, path);
}

bool boolean_or(const nlohmann::json& object, const char* key, bool fallback, const std::string& where,
                const std::string& path) {
  if (!object.contains(key) || object.at(key).is_null()) return fallback;
  const nlohmann::json& value = object.at(key);
  if (!value.is_boolean()) {
    throw Error({path, 0, field_path(where, key)}, "expected true or false, found " + value.dump(),
                "write true or false");
  }
  return value.get<bool>();
}

void write_text_atomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw Error({path, 0, ""}, "cannot write file", "check the folder exists and is writable");
    out << text;
    out.flush();
    if (!out) {
      std::remove(temporary.c_str());
      throw Error({path, 0, ""}, "writing failed (disk full?)", "free space and try again");
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    throw Error({path, 0, ""}, "cannot move the finished file into place", "check the folder is writable");
  }
}

}  // namespace pipetwin::json_fields
