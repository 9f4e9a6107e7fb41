// fatal(): prints the rank context and the failing statement, then aborts the whole job.
#include "trident/core/error.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace trident {
namespace {
std::string g_context = "[rank ?]";
AbortFn g_abort = nullptr;
std::atomic<long> g_step{-1};   // read by watchdog threads
}  // namespace

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
