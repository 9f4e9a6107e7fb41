// The release of the other TP rank's partial sum (parallel.tp_fused_sum) by the op that reads
// it: a stream operation between two kernels delays the second by ~4-6 microseconds on H200,
// so on a GPU the reading kernel frees the partial itself, from the block that finishes last.
// Its own header-only layer (trident_peer), not core: it belongs to the optional pair-exchange
// extension only, and both sides of that extension need it, parallel's PairExchange (which makes
// it) and backend's PeerOps (whose kernels use it), two layers that may not include each other.
#pragma once

#include <cstdint>

namespace trident {

struct PeerRelease {
  uint64_t* flag = nullptr;      // the other GPU's "freed" flag, mapped into this process
  uint64_t value = 0;            // what to write there once every read of the partial is done
  unsigned* counter = nullptr;   // a zeroed device word the op may count its blocks in (left zeroed)
  explicit operator bool() const { return flag != nullptr; }
};

}  // namespace trident
