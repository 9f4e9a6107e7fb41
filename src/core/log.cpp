// Rank-0 info logging and rank-prefixed warnings on stderr.
#include "trident/core/log.hpp"

#include <cstdio>

#include "trident/core/error.hpp"

namespace trident {
namespace {
bool g_log_rank = true;
}

void set_log_rank(bool log_rank) { g_log_rank = log_rank; }
bool is_log_rank() { return g_log_rank; }

void log_info(const std::string& line) {
  if (!g_log_rank) return;
  std::fprintf(stdout, "%s\n", line.c_str());
  std::fflush(stdout);
}

void log_warn(const std::string& line) {
  std::fprintf(stderr, "%s warning: %s\n", error_context().c_str(), line.c_str());
  std::fflush(stderr);
}

}  // namespace trident
