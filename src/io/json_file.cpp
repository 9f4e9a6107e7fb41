// A JSON file (or text) read whole, with errors that name it.
#include "json_file.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "trident/core/error.hpp"

namespace trident {

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(str(path, ": cannot open (", std::strerror(errno), ")"));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(str(path, ": not valid JSON (", e.what(), ")"));
  }
}

nlohmann::json parse_json_text(const std::string& text, const std::string& where) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(str(where, ": not valid JSON (", e.what(), ")"));
  }
}

}  // namespace trident
