// Megatron's conjugate communication pairs around tensor-parallel regions:
//   copy_to_tp_region:     forward identity,   backward all-reduce (of the input gradient)
//   reduce_from_tp_region: forward all-reduce, backward identity
// Only the non-identity halves need code, and both are one all-reduce: the backward's goes
// through the forward's (TpStrategy::sum_over_tp and start_sum in tp_strategy.hpp, which comment the pairing).
#pragma once

#include <exception>
#include <utility>
#include <vector>

#include "trident/backend/peer_ops.hpp"
#include "trident/core/tensor.hpp"
#include "trident/parallel/pair_exchange.hpp"

namespace trident {

inline void reduce_from_tp_region_fwd(Comm& tp, TensorView x, Stream s) {
  if (tp.size() > 1) tp.all_reduce(x.data, x.numel, x.dtype, ReduceOp::Sum, s);
}

// The same started asynchronously: wait on the request before x is read. Null when tp = 1.
inline Request reduce_from_tp_region_fwd_async(Comm& tp, TensorView x, Stream s) {
  if (tp.size() == 1) return nullptr;
  return tp.all_reduce_async(x.data, x.numel, x.dtype, ReduceOp::Sum, s);
}

// A TP sum of partials x in flight, for an op that can add the other ranks' partial itself
// (PeerOps::add_layernorm_fwd's a_peer, layernorm_bwd's dout_peer). Either x is all-reduced (or
// reduce-scattered) in place, or, with parallel.tp_fused_sum, this rank's partials are sent to the
// ranks that sum them (PairExchange) and wait() returns the sum of the partials the other ranks
// sent this rank, for the reading op to add to its own. Usage:
//   TpSum sum = TpSum::start(tp, x, fused, s);  ... other work ...
//   TensorView peer = sum.wait(s);   // empty: x holds the sum
//   op(x, peer, ...);  sum.done(s);
class TpSum {
 public:
  TpSum() = default;
  explicit TpSum(Request reduce) : reduce_(std::move(reduce)) {}   // a sum that completes x in place
  TpSum(TpSum&&) = default;
  // A sum dropped before done() would leave the other ranks waiting for a slot: fatal.
  TpSum& operator=(TpSum&& o) noexcept {
    check_done();
    reduce_ = std::move(o.reduce_);
    partials_ = std::move(o.partials_);
    x_ = o.x_;
    tp_ = o.tp_;
    whole_ = o.whole_;
    block_ = o.block_;
    be_ = o.be_;
    released_in_op_ = o.released_in_op_;
    return *this;
  }
  ~TpSum() { check_done(); }

  // The sum of x over a group of two: all-reduced in place, or fused (the whole x to the other rank).
  static TpSum start(Comm& tp, TensorView x, bool fused, Stream s) {
    TpSum sum;
    if (tp.size() == 1) return sum;
    if (fused) {
      TRIDENT_CHECK(tp.size() == 2, str("a fused sum of a whole buffer over the ", tp.size(), " ranks of ", tp.name(),
                                        " (beyond two ranks fused sums need sequence parallelism)"));
      sum.partials_.resize(2);
      sum.partials_[1 - tp.rank()] = exchange(tp).send_partial_async(x.data, x.numel, x.dtype, 1 - tp.rank(), s);
      sum.x_ = x;
    } else {
      sum.reduce_ = tp.all_reduce_async(x.data, x.numel, x.dtype, ReduceOp::Sum, s);
    }
    return sum;
  }

  // The fused sum of rows: x holds one block of `block` elements per rank of tp, block r summed by
  // rank r. send(r, s) sends rank r its block (once each, any order; start_rows sends them all),
  // and wait() returns the sum of the other ranks' partials of this rank's block (with more than
  // two ranks added up by be, in rank order).
  static TpSum rows(Comm& tp, Backend& be, TensorView x, size_t block) {
    TpSum sum;
    if (tp.size() == 1) return sum;
    sum.partials_.resize(static_cast<size_t>(tp.size()));
    sum.tp_ = &tp;
    sum.whole_ = x;
    sum.block_ = block;
    sum.x_ = x.slice(static_cast<size_t>(tp.rank()) * block, block);
    sum.be_ = &be;
    return sum;
  }
  void send(int r, Stream s) {
    TRIDENT_CHECK(tp_ && r != tp_->rank() && !partials_.at(static_cast<size_t>(r)),
                  str("a row sum's block ", r, " sent twice, or to its own rank"));
    const TensorView part = whole_.slice(static_cast<size_t>(r) * block_, block_);
    partials_[static_cast<size_t>(r)] = exchange(*tp_).send_partial_async(part.data, part.numel, part.dtype, r, s);
  }
  static TpSum start_rows(Comm& tp, Backend& be, TensorView x, size_t block, Stream s) {
    TpSum sum = rows(tp, be, x, block);
    for (int r = 0; r < tp.size(); ++r)
      if (r != tp.rank()) sum.send(r, s);
    return sum;
  }

  explicit operator bool() const { return reduce_ || holds(); }

  // Orders s after the sum; the other ranks' partial of x to add, or empty when x holds the sum.
  // x itself may be overwritten after this. With several partials the lowest rank's slot receives
  // their sum (added in rank order, each add rounded to act), and the others are released.
  TensorView wait(Stream s) {
    if (reduce_) reduce_->wait(s);
    PartialRequest* lowest = first();
    if (!lowest) return TensorView{};
    for (PartialRequest& p : partials_)
      if (p) p->wait(s);
    const TensorView sum(const_cast<void*>((*lowest)->peer()), x_.dtype, x_.numel);
    std::vector<TensorView> parts;
    for (PartialRequest& p : partials_)
      if (p) parts.emplace_back(const_cast<void*>(p->peer()), x_.dtype, x_.numel);
    if (parts.size() == 1) return sum;
    TRIDENT_CHECK(s.handle == be_->stream().handle, "a fused row sum waited on a stream other than its backend's");
    peer_ops_of(*be_, "parallel.tp_fused_sum").sum_partials(sum, parts);
    for (PartialRequest& p : partials_) {
      if (!p || &p == lowest) continue;
      p->release(s);
      p.reset();
    }
    return sum;
  }

  // For the one op that reads wait()'s partial, where it can free the partial itself (a fused
  // sum on GPUs): pass this to it, and done() then only closes the sum. Empty otherwise.
  PeerRelease release_in_op() {
    PartialRequest* p = first();
    if (!p) return {};
    PeerRelease r = (*p)->device_release();
    released_in_op_ = static_cast<bool>(r);
    return r;
  }

  // After the ops that read wait()'s partial are queued on s.
  void done(Stream s) {
    if (!released_in_op_)
      for (PartialRequest& p : partials_)
        if (p) p->release(s);
    partials_.clear();
    reduce_.reset();
    released_in_op_ = false;
  }

 private:
  static PairExchange& exchange(Comm& tp) {
    PairExchange* ex = tp.pair_exchange();
    TRIDENT_CHECK(ex, str("a fused sum on the ", tp.name(), " communicator, which has no pair exchange"));
    return *ex;
  }

  // The partial of the lowest other rank, or null where none is held.
  PartialRequest* first() {
    for (PartialRequest& p : partials_)
      if (p) return &p;
    return nullptr;
  }
  bool holds() const {
    for (const PartialRequest& p : partials_)
      if (p) return true;
    return false;
  }

  void check_done() const {
    if ((reduce_ || holds()) && std::uncaught_exceptions() == 0)
      TRIDENT_FATAL("a TP sum was dropped before done(): the other ranks would wait for it");
  }

  Request reduce_;
  std::vector<PartialRequest> partials_;   // a fused sum's partials from the other ranks, by rank
  TensorView x_;                           // this rank's partial (its block of a row sum)
  // A row sum's: the group, the whole (tp x block) partial and the block size; be adds up the
  // partials over more than two ranks.
  Comm* tp_ = nullptr;
  TensorView whole_;
  size_t block_ = 0;
  Backend* be_ = nullptr;
  bool released_in_op_ = false;   // release_in_op() handed the release to an op
};

// The norm ops that read a TP sum (LayerNorm, and RMSNorm for Llama), given TpSum::wait's partial
// and release_in_op's release: through the backend's PeerOps where there is a partial (a fused
// sum), else the Backend op.
inline void add_layernorm_fwd_tp(Backend& be, TensorView sum, TensorView out, TensorView mean, TensorView rstd,
                                 TensorView a, TensorView a_peer, TensorView residual, TensorView w, TensorView b,
                                 int N, int C, float eps, PeerRelease release) {
  if (a_peer.empty() && !release)
    be.add_layernorm_fwd(sum, out, mean, rstd, a, residual, w, b, N, C, eps);
  else
    peer_ops_of(be, "parallel.tp_fused_sum")
        .add_layernorm_fwd(sum, out, mean, rstd, a, a_peer, residual, w, b, N, C, eps, release);
}

inline void layernorm_bwd_tp(Backend& be, TensorView din_accum, TensorView dw, TensorView db, TensorView dsum,
                             TensorView dout, TensorView dout_peer, TensorView in, TensorView w, TensorView mean,
                             TensorView rstd, int N, int C, PeerRelease release, TensorView din_keep = {}) {
  if (dout_peer.empty() && !release) {
    be.layernorm_bwd(din_accum, dw, db, dsum, dout, in, w, mean, rstd, N, C, din_keep);
  } else {
    TRIDENT_CHECK(din_keep.empty(), "layernorm_bwd_tp: din_keep with a peer partial");
    peer_ops_of(be, "parallel.tp_fused_sum")
        .layernorm_bwd(din_accum, dw, db, dsum, dout, dout_peer, in, w, mean, rstd, N, C, release);
  }
}

inline void add_rmsnorm_fwd_tp(Backend& be, TensorView sum, TensorView out, TensorView rstd, TensorView a,
                               TensorView a_peer, TensorView residual, TensorView w, int N, int C, float eps,
                               PeerRelease release) {
  if (a_peer.empty() && !release)
    be.add_rmsnorm_fwd(sum, out, rstd, a, residual, w, N, C, eps);
  else
    peer_ops_of(be, "parallel.tp_fused_sum")
        .add_rmsnorm_fwd(sum, out, rstd, a, a_peer, residual, w, N, C, eps, release);
}

inline void rmsnorm_bwd_tp(Backend& be, TensorView din_accum, TensorView dw, TensorView dout, TensorView dout_peer,
                           TensorView in, TensorView w, TensorView rstd, int N, int C, PeerRelease release,
                           TensorView din_keep = {}) {
  if (dout_peer.empty() && !release) {
    be.rmsnorm_bwd(din_accum, dw, dout, in, w, rstd, N, C, din_keep);
  } else {
    TRIDENT_CHECK(din_keep.empty(), "rmsnorm_bwd_tp: din_keep with a peer partial");
    peer_ops_of(be, "parallel.tp_fused_sum").rmsnorm_bwd(din_accum, dw, dout, dout_peer, in, w, rstd, N, C, release);
  }
}

}  // namespace trident
