// TraceRange: a named range on a profiler's timeline around a stretch of host code (forward,
// backward, optimizer, each collective and pipeline transfer, checkpoint save, evaluation). No
// backend header is needed: a backend that can trace (CUDA: NVTX) installs hooks, and without
// hooks a range costs one branch.
#pragma once

#include <string>

namespace trident {

struct TraceHooks {
  void (*push)(const char* name) = nullptr;
  void (*pop)() = nullptr;
};

// Installs the hooks every later TraceRange calls (all null: ranges off).
void set_trace_hooks(const TraceHooks& hooks);

class TraceRange {
 public:
  explicit TraceRange(const char* name);
  // "<prefix> <name>" (e.g. "dp all-reduce"), the text built only while hooks are installed.
  TraceRange(const std::string& prefix, const char* name);
  ~TraceRange();
  TraceRange(const TraceRange&) = delete;
  TraceRange& operator=(const TraceRange&) = delete;

 private:
  bool open_ = false;
};

}  // namespace trident
