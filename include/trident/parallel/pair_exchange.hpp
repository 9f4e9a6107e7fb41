// PairExchange: the operations of the fast path between the pairs of ranks of a group inside one
// node, an optional extension of a Comm (Comm::pair_exchange(), null where a communicator has
// none). Only that path uses it: fused TP sums (parallel.tp_fused_sum).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "trident/peer/peer_release.hpp"
#include "trident/parallel/comm.hpp"

namespace trident {

// Partial sums from each other rank a PairExchange holds at once (enable_partials reserves this
// many per other rank).
constexpr int kPartialSlots = 4;

// A partial sum sent to another rank of the group (PairExchange::send_partial_async). wait(s)
// orders s after that rank's partial has arrived; it is then readable at peer() by the ops
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

  // Fused sums (parallel.tp_fused_sum): instead of all-reducing (or reduce-scattering) a buffer of
  // partial sums, each rank sends its partial of a block of rows to the rank that sums that block,
  // and the op that reads the sum adds the partials it received (with two ranks a + b rounds the
  // same on both, so replicas stay equal). enable_partials is collective and called once: it
  // reserves room for partials of up to max_bytes from each other rank and returns "" or, on every
  // rank, why this group cannot (then nothing changed).
  virtual std::string enable_partials(size_t max_bytes) = 0;
  // Sends `count` elements at buf (after the work queued on s) to rank `to` of the group; the
  // request holds the partial `to` sends this rank in return (the same call on `to`: partials
  // between two ranks pair up in the order of their sends). buf may be reused once the request's
  // wait(s) has been queued. Needs enable_partials first.
  virtual PartialRequest send_partial_async(const void* buf, size_t count, DType t, int to, Stream s) = 0;
  // The all-gather of `count` elements per rank in place in buf (this rank's at rank x count) as
  // one request per other rank (null at this rank's place), each done once that rank's block is
  // in: ops that read one block can start before the others arrive. Needs enable_partials first
  // (blocks up to its max_bytes).
  virtual std::vector<Request> gather_each_async(void* buf, size_t count, DType t, Stream s) = 0;
};

// For send_partial_async: the partial's size in bytes, checked against the slots that
// enable_partials reserved (slot_bytes; 0 where it has not run) on comm.
size_t partial_bytes(const Comm& comm, size_t count, DType t, size_t slot_bytes);

}  // namespace trident
