// Comm: the collectives and point-to-point operations of one parallel group. Buffers live in
// the backend's memory (device pointers on GPUs). Every operation is ordered after the work
// already queued on `stream`; async operations return a Request, and wait() makes `stream`
// wait for completion (on the CPU backend it blocks the host).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "trident/core/dtype.hpp"
#include "trident/core/error.hpp"
#include "trident/core/peer_release.hpp"
#include "trident/core/stream.hpp"

namespace trident {

enum class ReduceOp { Sum, Max };

// Partial sums of the other rank a Comm holds at once (Comm::enable_partials reserves this many).
constexpr int kPartialSlots = 4;
// Copy-engine operations (register_window) started and not yet waited that a Comm allows.
constexpr int kCopyOpsInFlight = 256;

class CommWork {
 public:
  virtual ~CommWork() = default;
  // Orders `stream` after this operation (and checks for errors and the timeout).
  virtual void wait(Stream stream) = 0;
};
using Request = std::unique_ptr<CommWork>;

// A partial sum sent to the other rank of a pair (Comm::send_partial_async). wait(s) orders s
// after the other rank's partial has arrived; it is then readable at peer() by the ops queued
// on s, until release(s), queued after the last of them, lets the other rank reuse the space.
// Instead of release(s), the one op that reads it may free it itself where device_release()
// is not empty (a Backend op's PeerRelease).
class PartialWork : public CommWork {
 public:
  virtual const void* peer() const = 0;
  virtual void release(Stream s) = 0;
  virtual PeerRelease device_release() { return {}; }
};
using PartialRequest = std::unique_ptr<PartialWork>;

struct P2POp {
  enum Kind { Send, Recv } kind;
  void* buf;
  size_t count;
  DType dtype;
  int peer;  // rank inside this group
};

class Comm {
 public:
  virtual ~Comm() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const std::string& name() const = 0;  // "tp", "pp", "dp", "embed", "world"

  virtual Request all_reduce_async(void* buf, size_t count, DType t, ReduceOp op, Stream s) = 0;
  // In place: buf holds size()*count elements; rank r's reduced block lands at buf + r*count.
  virtual Request reduce_scatter_async(void* buf, size_t count, DType t, Stream s) = 0;
  // In place: rank r contributes buf + r*count; every rank ends with all size()*count elements.
  virtual Request all_gather_async(void* buf, size_t count, DType t, Stream s) = 0;
  virtual Request broadcast_async(void* buf, size_t count, DType t, int root, Stream s) = 0;
  // Sends and receives posted together (NCCL needs a paired exchange posted as one group).
  virtual Request exchange_async(const std::vector<P2POp>& ops, Stream s) = 0;
  virtual void barrier() = 0;

  // Fused sums for groups of two ranks (parallel.tp_fused_sum): instead of all-reducing a
  // buffer of partial sums in place, each rank sends its partial to the other and the op that
  // reads the sum adds the two (a + b rounds the same on both ranks, so replicas stay equal).
  // enable_partials is collective and called once: it reserves room for partials of up to
  // max_bytes and returns "" or, on every rank, why this group cannot (then nothing changed).
  virtual std::string enable_partials(size_t max_bytes) {
    (void)max_bytes;
    return "this communicator has no partial-sum exchange";
  }
  // Sends `count` elements at buf (after the work queued on s) to the other rank; buf may be
  // reused once the request's wait(s) has been queued. Needs enable_partials first.
  virtual PartialRequest send_partial_async(const void* buf, size_t count, DType t, Stream s) {
    (void)buf, (void)count, (void)t, (void)s;
    TRIDENT_FATAL(str("send_partial_async on the ", name(), " communicator without enable_partials"));
  }

  // Copy-engine collectives of a pair on one node (parallel.dp_copy_engine). register_window is
  // collective and called with the same-sized buffer on both ranks: it maps the other rank's
  // buffer, so that an all_gather_async or scatter_partial_async whose destination lies in a
  // window is a copy into the other GPU's memory by a copy engine (no SM runs it). Returns "" or,
  // on every rank, why this group cannot (then nothing changed); without windows the operations
  // run as before.
  virtual std::string register_window(void* base, size_t bytes) {
    (void)base, (void)bytes;
    return "this communicator has no copy-engine windows";
  }
  // Collective: drains the pair's operations and unmaps the window at base, which may then be
  // freed (the other rank's mapping must close first). Nothing where base is no window.
  virtual void unregister_window(void* base) { (void)base; }
  // A reduce-scatter of a pair that leaves the sum to the reader: sends the other rank's block of
  // buf (`count` elements at buf + (1 - rank)*count) into the other rank's `inbox` (the same
  // offset in its window) and receives the other rank's partial of this rank's block into this
  // rank's `inbox`; wait(s) orders s after both (this rank's block is then buf's + inbox's).
  virtual Request scatter_partial_async(void* buf, size_t count, DType t, void* inbox, Stream s);

  void all_reduce(void* buf, size_t count, DType t, ReduceOp op, Stream s) {
    all_reduce_async(buf, count, t, op, s)->wait(s);
  }
  void reduce_scatter(void* buf, size_t count, DType t, Stream s) {
    reduce_scatter_async(buf, count, t, s)->wait(s);
  }
  void all_gather(void* buf, size_t count, DType t, Stream s) { all_gather_async(buf, count, t, s)->wait(s); }
  void broadcast(void* buf, size_t count, DType t, int root, Stream s) {
    broadcast_async(buf, count, t, root, s)->wait(s);
  }
  void exchange(const std::vector<P2POp>& ops, Stream s) { exchange_async(ops, s)->wait(s); }

 protected:
  // For send_partial_async: the partial's size in bytes, checked against the slots that
  // enable_partials reserved (slot_bytes; 0 where it has not run).
  size_t partial_bytes(size_t count, DType t, size_t slot_bytes) const;
};

}  // namespace trident
