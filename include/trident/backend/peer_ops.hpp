// PeerOps: the ops of the two-rank fast path that read the other rank's partial sum, an optional
// extension of a Backend (Backend::peer_ops(), null where a backend has none). Only that path
// uses it: fused TP sums (parallel.tp_fused_sum, the LayerNorms and RMSNorms, and the sum of the
// other ranks' partials beyond tp = 2). Conventions as in backend.hpp;
// each op with an empty peer is its Backend namesake.
#pragma once

#include <vector>

#include "trident/backend/backend.hpp"
#include "trident/peer/peer_release.hpp"

namespace trident {

class PeerOps {
 public:
  virtual ~PeerOps() = default;

  // Backend::add_layernorm_fwd where a_peer, if given, is the other TP rank's partial of a:
  // sum = (a + a_peer) + residual, the pair's sum rounded to act first, as the all-reduce it
  // replaces leaves it. With `release` (from TpSum::release_in_op, device backends only) the op
  // also frees a_peer once it has read it.
  virtual void add_layernorm_fwd(TensorView sum, TensorView out, TensorView mean, TensorView rstd, TensorView a,
                                 TensorView a_peer, TensorView residual, TensorView w, TensorView b, int N, int C,
                                 float eps, PeerRelease release = {}) = 0;
  // Backend::layernorm_bwd where dout_peer, if given, is the other TP rank's partial of dout: the
  // gradient is dout + dout_peer rounded to act (as add_layernorm_fwd's a_peer), and `release`
  // as there.
  virtual void layernorm_bwd(TensorView din_accum, TensorView dw, TensorView db, TensorView dsum, TensorView dout,
                             TensorView dout_peer, TensorView in, TensorView w, TensorView mean, TensorView rstd,
                             int N, int C, PeerRelease release = {}) = 0;

  // The same two for RMSNorm (Llama): Backend::add_rmsnorm_fwd with a_peer, Backend::rmsnorm_bwd
  // with dout_peer, each pair's sum rounded to act first, and `release` as above.
  virtual void add_rmsnorm_fwd(TensorView sum, TensorView out, TensorView rstd, TensorView a, TensorView a_peer,
                               TensorView residual, TensorView w, int N, int C, float eps,
                               PeerRelease release = {}) = 0;
  virtual void rmsnorm_bwd(TensorView din_accum, TensorView dw, TensorView dout, TensorView dout_peer, TensorView in,
                           TensorView w, TensorView rstd, int N, int C, PeerRelease release = {}) = 0;

  // The partials of more than one other rank (fused row sums beyond tp = 2) as one peer partial
  // for the ops above: out = (parts[0] + parts[1]) + parts[2] ..., each add rounded to act, in one
  // pass (at most kMaxPartials parts, each of out's size; out may be parts[0]).
  static constexpr int kMaxPartials = 8;
  virtual void sum_partials(TensorView out, const std::vector<TensorView>& parts) = 0;
};

// be's PeerOps; fatal where it has none (`what` names the path that needs them).
inline PeerOps& peer_ops_of(Backend& be, const char* what) {
  PeerOps* ops = be.peer_ops();
  TRIDENT_CHECK(ops != nullptr, str(what, ": the ", be.name(), " backend has no ops that read a peer's partial"));
  return *ops;
}

}  // namespace trident
