// fatal(): prints the rank context and the failing statement, then aborts the whole job;
// quoted_text()/printable(): user text made safe for a one-line message.
#include "trident/core/error.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace trident {
namespace {
std::string g_context = "[rank ?]";
AbortFn g_abort = nullptr;
std::atomic<long> g_step{-1};   // read by watchdog threads

// Length of the well-formed UTF-8 sequence at s[i] (2 to 4 bytes), 0 if there is none.
size_t utf8_sequence(const std::string& s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  const size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 0;
  return n;
}

// The printable form of text's first bytes (up to max_bytes); *used says how many it took.
std::string escaped(const std::string& text, size_t max_bytes, size_t* used) {
  std::string out;
  size_t i = 0;
  while (i < text.size() && i < max_bytes) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
    } else if (const size_t n = utf8_sequence(text, i)) {
      out.append(text, i, n);   // readable text stays readable
      i += n;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
      ++i;
    }
  }
  *used = i;
  return out;
}

}  // namespace

std::string quoted_text(const std::string& text, size_t max_bytes) {
  size_t used = 0;
  std::string out = "'" + escaped(text, max_bytes, &used) + "'";
  if (used < text.size()) out += str("... (", text.size(), " bytes)");
  return out;
}

std::string printable(const std::string& text, size_t max_bytes) {
  size_t used = 0;
  std::string out = escaped(text, max_bytes, &used);
  if (used < text.size()) out += str("... (", text.size() - used, " more bytes)");
  return out;
}

void set_current_step(long step) { g_step = step; }
long current_step() { return g_step; }

void set_error_context(const std::string& prefix, AbortFn abort_fn) {
  g_context = prefix;
  if (abort_fn) g_abort = abort_fn;
}

const std::string& error_context() { return g_context; }

void fatal(const char* file, int line, const char* stmt, const std::string& msg) {
  std::fprintf(stderr, "%s %s:%d %s%s%s\n", g_context.c_str(), file, line, stmt,
               *stmt ? ": " : "", msg.c_str());
  std::fflush(stderr);
  if (g_abort) g_abort(1);
  std::abort();
}

}  // namespace trident
