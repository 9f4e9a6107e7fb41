// CudaBackend factory: bf16 parameters and activations, fp32 gradients and optimizer state.
// Host-only header (no CUDA includes), so apps and tests can pick the backend at run time.
#pragma once

#include <memory>

#include "trident/backend/backend.hpp"

namespace trident {

// A backend on CUDA device `device` with its own non-blocking compute stream; fatal() when the
// device does not exist.
std::unique_ptr<Backend> make_cuda_backend(int device);

// Visible CUDA devices; 0 (never an abort) when there is no driver or no GPU.
int cuda_device_count();

// Memory of CUDA device `device` in bytes; 0 where it cannot be read. From the device's
// properties, which unlike cudaMemGetInfo create no context on the device.
size_t cuda_device_memory_bytes(int device);

}  // namespace trident
