// Stream: an opaque handle to an ordered queue of work on a backend (cudaStream_t on GPUs,
// null on the CPU backend). Lives in core so that backends and comms can share it.
#pragma once

namespace trident {

struct Stream {
  void* handle = nullptr;
};

}  // namespace trident
