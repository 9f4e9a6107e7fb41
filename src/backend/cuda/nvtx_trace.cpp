// TraceRange hooks over the header-only NVTX 3 of the CUDA toolkit.
#include "trident/backend/nvtx_trace.hpp"

#include <nvtx3/nvToolsExt.h>

#include "trident/core/trace.hpp"

namespace trident {

void install_nvtx_trace() {
  set_trace_hooks(TraceHooks{[](const char* name) { nvtxRangePushA(name); }, [] { nvtxRangePop(); }});
}

}  // namespace trident
