// NVTX 3 ranges for TraceRange (CUDA builds): Nsight Systems and Nsight Compute see every range by name.
#pragma once

namespace trident {

// Installs TraceRange hooks that push and pop NVTX ranges.
void install_nvtx_trace();

}  // namespace trident
