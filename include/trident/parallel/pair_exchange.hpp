// PairExchange: the operations of the two-rank fast path, an optional extension of a Comm
// (Comm::pair_exchange(), null where a communicator has none). Only that path uses it: fused TP
// sums (parallel.tp_fused_sum).
#pragma once

#include <memory>
#include <string>

#include "trident/peer/peer_release.hpp"
#include "trident/parallel/comm.hpp"

namespace trident {

// Partial sums of the other rank a PairExchange holds at once (enable_partials reserves this many).
constexpr int kPartialSlots = 4;

// A partial sum sent to the other rank of a pair (PairExchange::send_partial_async). wait(s)
// orders s after the other rank's partial has arrived; it is then readable at peer() by the ops
// queued on s, until release(s), queued after the last of them, lets the other rank reuse the
// space. Instead of release(s), the one op that reads it may free it itself where
// device_release() is not empty (a PeerOps op's PeerRelease).
class PartialWork : public CommWork {
 public:
  virtual const void* peer() const = 0;
  virtual void release(Stream s) = 0;
  virtual PeerRelease device_release() { return {}; }
};
using PartialRequest = std::unique_ptr<PartialWork>;

class PairExchange {
 public:
  virtual ~PairExchange() = default;

  // Fused sums for groups of two ranks (parallel.tp_fused_sum): instead of all-reducing a
  // buffer of partial sums in place, each rank sends its partial to the other and the op that
  // reads the sum adds the two (a + b rounds the same on both ranks, so replicas stay equal).
  // enable_partials is collective and called once: it reserves room for partials of up to
  // max_bytes and returns "" or, on every rank, why this group cannot (then nothing changed).
  virtual std::string enable_partials(size_t max_bytes) = 0;
  // Sends `count` elements at buf (after the work queued on s) to the other rank; buf may be
  // reused once the request's wait(s) has been queued. Needs enable_partials first.
  virtual PartialRequest send_partial_async(const void* buf, size_t count, DType t, Stream s) = 0;
};

// For send_partial_async: the partial's size in bytes, checked against the slots that
// enable_partials reserved (slot_bytes; 0 where it has not run) on comm.
size_t partial_bytes(const Comm& comm, size_t count, DType t, size_t slot_bytes);

}  // namespace trident
