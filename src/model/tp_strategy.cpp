// The TP strategies: plain all-reduces (also tp = 1), fused partial sums (parallel.tp_fused_sum,
// with parallel.tp_split_layernorm_bwd the norm backward on half the rows) and sequence
// parallelism (parallel.sequence_parallel), each with its whole-micro-batch forward.
#include "trident/model/tp_strategy.hpp"

#include <vector>

namespace trident {

TpStrategy::TpStrategy(Backend& be, Comm& tp, int tp_rank, int rows, int C, const TpOptions& o, bool split_rows)
    : be_(be), tp_(tp), rank_(tp_rank), N_(rows), C_(C), margin_(o.sm_margin), split_rows_(split_rows) {
  if (split_rows_) {
    rows_ = static_cast<size_t>(N_ / tp.size());
    row0_ = rows_ * static_cast<size_t>(tp_rank);
  }
}

Request TpStrategy::sum_over_tp(TensorView v) { return reduce_from_tp_region_fwd_async(tp_, v, be_.stream()); }

TpSum TpStrategy::start_sum(TensorView v) { return TpSum::start(tp_, v, false, be_.stream()); }

TpSum TpStrategy::start_row_sum(TensorView v, size_t rows) {
  return TpSum(tp_.reduce_scatter_async(v.data, rows * C_, v.dtype, be_.stream()));
}

void TpStrategy::mlp_out_backward(Request& gather, const std::function<void(const RowView&, int)>& op) {
  finish_grad_gather(gather);
  op([](TensorView v, size_t) { return v; }, N_);
}

void TpStrategy::start_grad_gather(Request& gather, TensorView dres) {
  TRIDENT_CHECK(!gather, "a residual-gradient gather was left unfinished");
  gather = tp_.all_gather_async(dres.data, rows_ * C_, dres.dtype, be_.stream());
}

void TpStrategy::finish_grad_gather(Request& gather) {
  if (!gather) return;
  gather->wait(be_.stream());
  gather.reset();
}

namespace {

// Megatron's tensor parallelism as all-reduces (none with tp = 1): the forward is
// block_forward's, and each norm's input gradient is all-reduced beside the weight-gradient GEMMs
// of its part, which leave parallel.tp_sm_margin SMs to the all-reduce's CTAs.
class PlainTp : public TpStrategy {
 public:
  using TpStrategy::TpStrategy;

  // Each block's output add is fused into the next block's first norm (the last block of the
  // stage completes its own), its TP sum finished by that norm (TpSum).
  TensorView forward(BlockPass& pass) override {
    const int B = pass.micro_batch();
    TensorView x = pass.input(0), pending;
    TpSum x_sum;   // of x: the previous block's MLP sum, finished by this block's first norm
    BlockShape shape = pass.shape(N_);
    shape.fused_sum = fused_sums();
    for (int i = 0; i < pass.n_blocks(); ++i) {
      const bool last = i + 1 == pass.n_blocks();
      pass.need(i);
      auto attention = [&](const BlockActs& a) {
        pass.prefetch_after(i);
        pass.attend(a, B, 0);
      };
      const BlockActs a = pass.acts(i);
      x_sum = block_forward(be_, tp_, pass.weights(i), a, x, std::move(x_sum), shape, attention, pending, last);
      x = a.x3;
      // A recomputed block's x2 is in the shared activations: the next block reads it first thing.
      pending = last ? TensorView{} : a.x2;
    }
    return x;
  }

  void recompute(BlockPass& pass, int i, const BlockActs& a, TensorView x) override {
    const int B = pass.micro_batch();
    auto attention = [&](const BlockActs& acts) { pass.attend(acts, B, 0); };
    const BlockShape shape = pass.shape(N_);
    TpSum x_sum;
    TpSum x2_sum = block_attention_fwd(be_, tp_, pass.weights(i), a, x, x_sum, shape, attention, TensorView{});
    block_mlp_in_fwd(be_, pass.weights(i), a, x, x2_sum, shape);
  }

  // Both GEMMs of the part run beside the sum: those that read dres before the norm backward
  // updates it, and the other one.
  void norm_backward(const NormBwdPart& part, TensorView dln, TensorView, Request&) override {
    Stream st = be_.stream();
    TpSum sum = start_sum(dln);
    const bool margin = sum && !fused_sums();   // beside an NCCL all-reduce
    if (margin) be_.set_gemm_sm_margin(margin_);
    part.reads_dres();
    part.other();
    if (margin) be_.set_gemm_sm_margin(0);
    const TensorView peer = sum.wait(st);
    part.norm_bwd(peer, sum.release_in_op());
    sum.done(st);
  }
};

// parallel.tp_fused_sum (tp = 2): the sums a norm reads are exchanged as partials (on GPUs by the
// copy engines, no SM, so no margin) and added inside the norm. With the split norm backward
// (parallel.tp_split_layernorm_bwd) each rank runs the backward's norms on its half of the rows,
// receiving the other's partial of those rows only, and gathers the other half of the updated
// residual gradient beside the next GEMMs.
class FusedTp final : public PlainTp {
 public:
  using PlainTp::PlainTp;
  bool fused_sums() const override { return true; }
  int margin_beside_sums() const override { return 0; }

  TpSum start_sum(TensorView v) override {
    return TpSum::start(tp_, split_rows_ ? peer_rows(v, C_) : v, true, be_.stream());
  }

  // Split: the gather of dres's other rows (started by the norm above) runs beside the fcproj
  // input gradient of this rank's rows; the other rows follow once they are in.
  void mlp_out_backward(Request& gather, const std::function<void(const RowView&, int)>& op) override {
    if (!split_rows_ || !gather) return TpStrategy::mlp_out_backward(gather, op);
    const int rows = static_cast<int>(rows_);
    op([this](TensorView v, size_t w) { return my_rows(v, w); }, rows);
    finish_grad_gather(gather);
    op([this](TensorView v, size_t w) { return peer_rows(v, w); }, rows);
  }

  // Split: after the MLP's norm (LN2) the gather of dres's rows runs beside the fc weight gradient
  // (the proj input gradient after it reads dres whole); after the attention's (LN1) beside the
  // next block's first GEMM, on this rank's rows (mlp_out_backward), or the stage's end waits.
  void norm_backward(const NormBwdPart& part, TensorView dln, TensorView dres, Request& gather) override {
    if (!split_rows_) return PlainTp::norm_backward(part, dln, dres, gather);
    Stream st = be_.stream();
    TpSum sum = start_sum(dln);
    part.reads_dres();
    if (part.site == NormSite::attention) part.other();
    const TensorView peer = sum.wait(st);
    part.norm_bwd(peer, sum.release_in_op());
    sum.done(st);
    start_grad_gather(gather, dres);
    if (part.site == NormSite::mlp) part.other();
  }
};

// parallel.sequence_parallel (Megatron's sequence parallelism, Korthikanti et al. 2022): the
// residual stream x, x2, x3 is held as this rank's own rows only; the norms (and the residual
// adds fused into them) run on those rows, their outputs are all-gathered for the
// column-parallel GEMMs, and the row-parallel GEMMs' partial sums are reduce-scattered into own
// rows of pass.partial(), which the next norm adds to the residual. The bytes moved equal those
// of the all-reduces they replace. With parallel.tp_fused_sum the reduce-scatter is an exchange of
// rows, forward and backward: each rank sends every other rank that rank's rows of a partial on
// the copy engines, and the norm of its own rows adds the partials it received (with tp = 2 the
// reduce-scatter's sum, so the same bits; with more ranks their partials are first added up in
// rank order); its all-gathers go over the copy engines too (NcclComm's gathers over its pair
// links), so no collective of the pass takes an SM.
class SequenceTp final : public TpStrategy {
 public:
  SequenceTp(Backend& be, Comm& tp, int tp_rank, int rows, int C, const TpOptions& o)
      : TpStrategy(be, tp, tp_rank, rows, C, o, true), fused_(o.fused_sum) {}
  bool own_rows_forward() const override { return true; }

  Request sum_over_tp(TensorView v) override {
    return tp_.reduce_scatter_async(v.data, rows_ * C_, v.dtype, be_.stream());
  }
  void gather_rows(TensorView v) override { tp_.all_gather(v.data, rows_ * C_, v.dtype, be_.stream()); }
  TpSum start_sum(TensorView v) override { return start_row_sum(v, rows_); }
  TpSum start_row_sum(TensorView v, size_t rows) override {
    if (!fused_) return TpStrategy::start_row_sum(v, rows);
    return TpSum::start_rows(tp_, be_, v, rows * C_, be_.stream());
  }
  int margin_beside_sums() const override { return fused_ ? 0 : margin_; }
  bool exchanges_rows() const override { return fused_; }

  TensorView forward(BlockPass& pass) override {
    const int B = pass.micro_batch();
    const bool bias_here = pass.shape(N_).bias_here;   // the row-parallel biases, once before the reduce-scatter
    const TensorView partial = pass.partial();
    TensorView x = pass.input(0), pending;
    TpSum x_sum;   // the previous block's MLP branch, summed into own rows of the partial
    for (int i = 0; i < pass.n_blocks(); ++i) {
      const bool last = i + 1 == pass.n_blocks();
      const BlockActs a = pass.acts(i);
      const BlockActs& kept = pass.saved(i);
      const BlockTensors& w = pass.weights(i);
      pass.need(i);
      auto attention = [&](const BlockActs& acts) {
        pass.prefetch_after(i);
        pass.attend(acts, B, 0);
      };
      TpSum x2_sum = attention_fwd(pass, i, a, x, pending, x_sum, attention);
      if (!kept.ln1.empty()) be_.copy(kept.ln1, my_rows(a.ln1, C_));
      mlp_in_fwd(pass, i, a, x, x2_sum);
      if (!kept.ln2.empty()) be_.copy(kept.ln2, my_rows(a.ln2, C_));
      const size_t FA = pass.dims().fc_act;
      x_sum = row_gemms(partial, [&](size_t r0, int n) {
        be_.matmul_fwd(partial.slice(r0 * C_, n * C_), a.fcg.slice(r0 * FA, n * FA), w.fcproj_w,
                       bias_here ? w.fcproj_b : TensorView{}, n, static_cast<int>(FA), C_);
      });
      // Each block's output add is fused into the next block's first norm (the last block of the
      // stage completes its own).
      if (last) add_block_output(be_, a.x3, my_rows(partial, C_), x_sum, a.x2);
      x = a.x3;
      pending = last ? TensorView{} : a.x2;
    }
    return x;
  }

  void recompute(BlockPass& pass, int i, const BlockActs& a, TensorView x) override {
    const int B = pass.micro_batch();
    auto attention = [&](const BlockActs& acts) { pass.attend(acts, B, 0); };
    TpSum x_sum;
    TpSum x2_sum = attention_fwd(pass, i, a, x, TensorView{}, x_sum, attention);
    mlp_in_fwd(pass, i, a, x, x2_sum);
  }

  // The sum of dln is a reduce-scatter into own rows beside the GEMMs that read dres; the
  // all-gather of the updated dres rows (which the next GEMMs read whole) beside the other GEMM:
  // both NCCL kernels that the margin leaves SMs to, or with fused sums copy-engine transfers.
  void norm_backward(const NormBwdPart& part, TensorView dln, TensorView dres, Request& gather) override {
    Stream st = be_.stream();
    TpSum sum = start_sum(dln);
    const bool margin = sum && !fused_;
    if (margin) be_.set_gemm_sm_margin(margin_);
    part.reads_dres();
    if (margin) be_.set_gemm_sm_margin(0);
    const TensorView peer = sum.wait(st);
    part.norm_bwd(peer, sum.release_in_op());
    sum.done(st);
    start_grad_gather(gather, dres);
    if (!fused_) be_.set_gemm_sm_margin(margin_);
    part.other();
    if (!fused_) be_.set_gemm_sm_margin(0);
  }

 private:
  // The parts of a block's forward (as block_attention_fwd and block_mlp_in_fwd), a.ln1 and a.ln2
  // whole (N, C), a's residual rows this rank's. Attention: x completed, when `pending` is given,
  // from the previous block's MLP branch (x_sum: its sum into own rows of the partial, finished
  // here) and x2, fused with LN1 on own rows; LN1 gathered, qkv, attention, proj into the
  // partial, whose sum it returns started. MLP: a.x2 = that branch (x2_sum finished) + x with LN2
  // on own rows, gathered, fc and activation.
  TpSum attention_fwd(BlockPass& pass, int i, const BlockActs& a, TensorView x, TensorView pending, TpSum& x_sum,
                      const AttentionStep& attention) {
    const BlockTensors& p = pass.weights(i);
    const int rows = own_row_count();
    const BlockShape shape = pass.shape(N_);
    const TensorView partial = pass.partial();
    Stream st = be_.stream();
    if (pending.empty()) {
      norm_fwd(be_, shape, my_rows(a.ln1, C_), a.ln1_mean, a.ln1_rstd, x, p.ln1_w, p.ln1_b, rows);
    } else {
      const TensorView peer = x_sum.wait(st);
      add_norm_fwd_tp(be_, shape, x, my_rows(a.ln1, C_), a.ln1_mean, a.ln1_rstd, my_rows(partial, C_), peer,
                      pending, p.ln1_w, p.ln1_b, rows, x_sum.release_in_op());
      x_sum.done(st);
    }
    const size_t QKV = pass.dims().qkv, ATT = pass.dims().att;
    column_gemms(a.ln1, [&](size_t r0, int n) {
      be_.matmul_fwd(a.qkv.slice(r0 * QKV, n * QKV), a.ln1.slice(r0 * C_, n * C_), p.qkv_w, p.qkv_b, n, C_,
                     static_cast<int>(QKV));
    });
    attention(a);
    return row_gemms(partial, [&](size_t r0, int n) {
      be_.matmul_fwd(partial.slice(r0 * C_, n * C_), a.atty.slice(r0 * ATT, n * ATT), p.proj_w,
                     shape.bias_here ? p.proj_b : TensorView{}, n, static_cast<int>(ATT), C_);
    });
  }

  void mlp_in_fwd(BlockPass& pass, int i, const BlockActs& a, TensorView x, TpSum& x2_sum) {
    const BlockTensors& p = pass.weights(i);
    const BlockShape shape = pass.shape(N_);
    Stream st = be_.stream();
    const TensorView peer = x2_sum.wait(st);
    add_norm_fwd_tp(be_, shape, a.x2, my_rows(a.ln2, C_), a.ln2_mean, a.ln2_rstd, my_rows(pass.partial(), C_), peer,
                    x, p.ln2_w, p.ln2_b, own_row_count(), x2_sum.release_in_op());
    x2_sum.done(st);
    // The MLP's activations of whole rows (block_rows of them only: a's residual rows are own rows).
    BlockActs whole;
    whole.fch = a.fch;
    whole.fcg = a.fcg;
    column_gemms(a.ln2, [&](size_t r0, int n) {
      mlp_activation_fwd(be_, pass.shape(n), p, block_rows(whole, r0, n, pass.dims(), pass.dims().NHl),
                         a.ln2.slice(r0 * C_, n * C_), n);
    });
  }

  // The column-parallel GEMMs op(row0, rows) of an all-gathered norm output v, (N, C). With fused
  // sums op runs on this rank's rows beside the gathers of the others' rows, then on each other
  // rank's rows as they land (ranks rank + 1, rank + 2, ...); else after the gather, on all rows.
  void column_gemms(TensorView v, const std::function<void(size_t, int)>& op) {
    if (!fused_) {
      gather_rows(v);
      op(0, N_);
      return;
    }
    Stream st = be_.stream();
    std::vector<Request> each = tp_.pair_exchange()->gather_each_async(v.data, rows_ * C_, v.dtype, st);
    const int rows = static_cast<int>(rows_);
    op(row0_, rows);
    for (int k = 1; k < tp_.size(); ++k) {
      const int r = (rank_ + k) % tp_.size();
      each[r]->wait(st);
      op(static_cast<size_t>(r) * rows_, rows);
    }
  }

  // The row-parallel GEMMs op(row0, rows) into the partial (N, C) whose rows their ranks sum,
  // the sum returned started. With fused sums op runs on each other rank's rows, sent as soon as
  // they are done (ranks rank + 1, rank + 2, ...), then on this rank's; else on all rows, then the
  // reduce-scatter.
  TpSum row_gemms(TensorView partial, const std::function<void(size_t, int)>& op) {
    if (!fused_) {
      op(0, N_);
      return start_sum(partial);
    }
    Stream st = be_.stream();
    const int rows = static_cast<int>(rows_);
    TpSum sum = TpSum::rows(tp_, be_, partial, rows_ * C_);
    for (int k = 1; k < tp_.size(); ++k) {
      const int r = (rank_ + k) % tp_.size();
      op(static_cast<size_t>(r) * rows_, rows);
      sum.send(r, st);
    }
    op(row0_, rows);
    return sum;
  }

  const bool fused_;   // parallel.tp_fused_sum: the pair's row sums as exchanged partials
};

}  // namespace

std::unique_ptr<TpStrategy> make_tp_strategy(Backend& be, Comm& tp, int tp_rank, int rows, int C,
                                             const TpOptions& o) {
  if (o.sequence_parallel) return std::make_unique<SequenceTp>(be, tp, tp_rank, rows, C, o);
  if (o.fused_sum) return std::make_unique<FusedTp>(be, tp, tp_rank, rows, C, o, o.split_norm_bwd);
  return std::make_unique<PlainTp>(be, tp, tp_rank, rows, C, o, false);
}

}  // namespace trident
