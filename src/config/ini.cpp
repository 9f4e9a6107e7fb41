// INI files: [section] headers, key = value lines, full-line comments with # or ;.
#include "ini.hpp"

#include <filesystem>
#include <fstream>
#include <map>

#include "trident/core/error.hpp"

namespace trident {
namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

bool valid_name(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

}  // namespace

std::vector<IniEntry> read_ini(const std::string& path) {
  // A directory opens as an empty stream on Linux: it would read as a config without entries.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(str("config file '", path, "' is a directory (give an INI file to --config)"));
  std::ifstream in(path);
  if (!in) throw InputError(str("config file '", path, "' cannot be read (check the --config path)"));
  return read_ini_stream(in, path);
}

std::vector<IniEntry> read_ini_stream(std::istream& in, const std::string& path) {
  std::vector<IniEntry> out;
  std::map<std::string, int> line_of;   // key -> the line that set it, to reject a second setting
  std::string section, raw;
  int line_no = 0;
  while (std::getline(in, raw)) {
    ++line_no;
    std::string line = trim(raw);
    std::string where = str(path, ":", line_no);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[') {
      if (line.back() != ']' || !valid_name(trim(line.substr(1, line.size() - 2))))
        throw InputError(str(where, ": malformed section header ", quoted_text(line), " (expected '[section]')"));
      section = trim(line.substr(1, line.size() - 2));
      continue;
    }
    size_t eq = line.find('=');
    std::string key = eq == std::string::npos ? "" : trim(line.substr(0, eq));
    if (!valid_name(key))
      throw InputError(str(where, ": malformed line ", quoted_text(line), " (expected 'key = value' or '[section]')"));
    std::string value = trim(line.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    const std::string full_key = section.empty() ? key : section + "." + key;
    const auto [first, fresh] = line_of.emplace(full_key, line_no);
    if (!fresh)
      throw InputError(str(where, ": ", full_key, " is set again (first at line ", first->second,
                           "); keep one of the two lines"));
    out.push_back({full_key, value, where});
  }
  return out;
}

}  // namespace trident
