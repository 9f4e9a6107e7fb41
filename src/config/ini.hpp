// Minimal INI reader that remembers file:line of every entry, so errors can point at them.
#pragma once

#include <istream>
#include <string>
#include <vector>

namespace trident {

struct IniEntry {
  std::string key;     // "section.key", or "key" before any section
  std::string value;
  std::string where;   // "file:line"
};

// Throws InputError for an unreadable file or a malformed line (with file:line).
std::vector<IniEntry> read_ini(const std::string& path);
// The same for INI text held in memory; `origin` names it in messages.
std::vector<IniEntry> read_ini_stream(std::istream& in, const std::string& origin);

}  // namespace trident
