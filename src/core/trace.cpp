// TraceRange: forwards named host ranges to the hooks a backend installed (NVTX on CUDA).
#include "trident/core/trace.hpp"

namespace trident {

namespace {

TraceHooks& hooks() {
  static TraceHooks h;
  return h;
}

}  // namespace

void set_trace_hooks(const TraceHooks& h) { hooks() = h; }

TraceRange::TraceRange(const char* name) {
  if (!hooks().push) return;
  hooks().push(name);
  open_ = true;
}

TraceRange::TraceRange(const std::string& prefix, const char* name) {
  if (!hooks().push) return;
  hooks().push((prefix + " " + name).c_str());
  open_ = true;
}

TraceRange::~TraceRange() {
  if (open_ && hooks().pop) hooks().pop();
}

}  // namespace trident
