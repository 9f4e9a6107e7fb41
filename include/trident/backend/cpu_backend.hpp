// CpuBackend: fp32 reference implementation of every op; deterministic (threads split outputs,
// never reductions), so the same inputs give the same bits whatever the thread count.
#pragma once

#include "trident/backend/backend.hpp"

namespace trident {

std::unique_ptr<Backend> make_cpu_backend();

}  // namespace trident
