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
#include "trident/core/stream.hpp"

namespace trident {

enum class ReduceOp { Sum, Max };
class PairExchange;

class CommWork {
 public:
  virtual ~CommWork() = default;
  // Orders `stream` after this operation (and checks for errors and the timeout).
  virtual void wait(Stream stream) = 0;
};
using Request = std::unique_ptr<CommWork>;

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
  // Out of place: in holds size()*count elements, which stay as they are; this rank's reduced
  // block lands at out (count elements, not overlapping in).
  virtual Request reduce_scatter_to_async(const void* in, void* out, size_t count, DType t, Stream s) = 0;
  // In place: rank r contributes buf + r*count; every rank ends with all size()*count elements.
  virtual Request all_gather_async(void* buf, size_t count, DType t, Stream s) = 0;
  virtual Request broadcast_async(void* buf, size_t count, DType t, int root, Stream s) = 0;
  // Sends and receives posted together (NCCL needs a paired exchange posted as one group).
  virtual Request exchange_async(const std::vector<P2POp>& ops, Stream s) = 0;
  virtual void barrier() = 0;

  // The fused TP sums' operations between the pairs of ranks of this group (pair_exchange.hpp), or
  // null where this communicator has none.
  virtual PairExchange* pair_exchange() { return nullptr; }

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
};

}  // namespace trident
