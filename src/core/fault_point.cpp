// The fault-point seam: one handler pointer, unset in release binaries.
#include "trident/core/fault_point.hpp"

namespace trident {
namespace {
FaultHandler g_handler = nullptr;
}  // namespace

void set_fault_handler(FaultHandler handler) { g_handler = handler; }

bool fault_point(FaultPoint point, int world_rank, int64_t step) {
  return g_handler && g_handler(point, world_rank, step);
}

}  // namespace trident
