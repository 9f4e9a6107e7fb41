// parallel.tp_overlap: the forward of a micro-batch as two staggered halves, so that every TP
// collective of one half runs beside the other half's GEMMs, over plain or fused sums
// (HalvesForward) or under sequence parallelism (SequenceHalvesForward).
#include "trident/model/tp_strategy.hpp"

namespace trident {

namespace {

// The micro-batch as two halves of B/2 sequences, one part of a block (attention or MLP, see
// block_forward) at a time and half after half, so that each TP all-reduce runs beside the other
// half's part instead of holding the stream:
//   attn(A) attn(B) | wait A: mlp(A) | wait B: mlp(B) | wait A: attn'(A) | wait B: attn'(B) ...
// Every op is row-wise or per sequence, so the halves compute exactly what the whole does; only
// the GEMMs' shapes (N/2 rows) differ.
class HalvesForward final : public TpForward {
 public:
  explicit HalvesForward(TpStrategy& tp) : tp_(tp) {}

  TensorView forward(BlockPass& pass) override {
    Backend& be = tp_.backend();
    Comm& comm = tp_.comm();
    const BlockDims& d = pass.dims();
    const int NHl = d.NHl, half_b = pass.micro_batch() / 2;
    const size_t rows = static_cast<size_t>(half_b) * pass.seq_len(), C = d.C;
    BlockShape shape = pass.shape(static_cast<int>(rows));
    shape.fused_sum = tp_.fused_sums();
    // Every GEMM here runs beside the other half's TP sum: an NCCL all-reduce, whose CTAs the
    // margin leaves SMs to, or with fused sums a copy-engine transfer, which needs none.
    be.set_gemm_sm_margin(tp_.margin_beside_sums());
    TpSum mlp_sum[2];
    for (int i = 0; i < pass.n_blocks(); ++i) {
      pass.need(i);
      // Each half's activations and block input (rows [h * rows, (h + 1) * rows)).
      BlockActs a[2];
      TensorView x[2];
      for (int h = 0; h < 2; ++h) {
        a[h] = block_rows(pass.saved(i), h * rows, rows, d, NHl);
        x[h] = pass.input(i).slice(h * rows * C, rows * C);
      }
      TpSum attn_sum[2];
      for (int h = 0; h < 2; ++h) {
        TensorView pending = i == 0 ? TensorView{} : pass.saved(i - 1).x2.slice(h * rows * C, rows * C);
        auto attention = [&](const BlockActs& part) {
          pass.prefetch_after(i);
          pass.attend(part, half_b, h * rows);
        };
        attn_sum[h] = block_attention_fwd(be, comm, pass.weights(i), a[h], x[h], mlp_sum[h], shape, attention,
                                          pending);
      }
      for (int h = 0; h < 2; ++h)
        mlp_sum[h] = block_mlp_fwd(be, comm, pass.weights(i), a[h], x[h], attn_sum[h], shape);
    }
    // The last block completes its own output (the others' is added by the next block's LN1).
    const BlockActs& out = pass.saved(pass.n_blocks() - 1);
    for (int h = 0; h < 2; ++h) {
      const BlockActs part = block_rows(out, h * rows, rows, d, NHl);
      add_block_output(be, part.x3, part.x3, mlp_sum[h], part.x2);
    }
    be.set_gemm_sm_margin(0);
    return out.x3;
  }

 private:
  TpStrategy& tp_;
};

// Under sequence parallelism: two halves whose steps interleave so that each half's all-gather
// and reduce-scatter run beside the other half's GEMMs. The rows stay where sequence parallelism
// keeps them (rank r owns rows [r N/tp, (r+1) N/tp)): half h is the h-th half of every rank's
// rows, M = N/(2 tp) rows of whole sequences each (B divides by 2 tp), so its reduce-scatter
// leaves every rank its own rows and its all-gather collects them into a contiguous (N/2, C) half
// of the whole ln1, ln2 or partial (rank c's at row c M). Its GEMMs and attention run on each
// rank's share in turn (tp calls of M rows), reading and writing the activations' natural rows,
// which the backward reads as without tp_overlap: every op is row-wise or per sequence, so the
// values are those of the sequence-parallel whole forward. A part of a block (attention or MLP,
// p = 2 i or 2 i + 1) of one half is three steps:
//   norm: wait the half's reduce-scatter, residual add and norm on own rows, start the gather;
//   in:   wait the gather, the column-parallel GEMM and the attention or MLP activation;
//   out:  the row-parallel GEMM into the half's partial sums, start their reduce-scatter;
// and part p runs as  norm(A,p) out(B,p-1) in(A,p) norm(B,p) out(A,p) in(B,p),  so that each
// collective has an `in` or `out` step beside it. Where need() ends the use of the previous
// block's parameters (ZeRO-3), out(B,p-1) of the previous block runs before the block's need()
// (its gather then has only the norm beside it).
class SequenceHalvesForward final : public TpForward {
 public:
  explicit SequenceHalvesForward(TpStrategy& tp) : tp_(tp) {}

  TensorView forward(BlockPass& pass) override {
    Backend& be = tp_.backend();
    Comm& comm = tp_.comm();
    const BlockDims& d = pass.dims();
    const int tp = comm.size(), rank = tp_.tp_rank(), n_parts = 2 * pass.n_blocks(),
              batch = pass.micro_batch() / (2 * tp);
    const size_t C = d.C, M = static_cast<size_t>(pass.micro_batch()) * pass.seq_len() / (2 * tp);
    const int Mi = static_cast<int>(M), Ci = static_cast<int>(C), QKV = static_cast<int>(d.qkv),
              ATT = static_cast<int>(d.att), FA = static_cast<int>(d.fc_act);
    const BlockShape shape = pass.shape(Mi);
    const DType act = be.compute_dtype();
    Stream st = be.stream();
    const TensorView partial_all = pass.partial();
    // Half h of a whole (N, width) buffer; rank c's share of such a half; this rank's rows of
    // half h in an own-rows activation (x, x2, x3, the norms' statistics, empty where none).
    auto half = [&](TensorView v, int h) { return v.slice(h * tp * M * C, tp * M * C); };
    auto share = [&](TensorView v, int c) { return v.slice(c * M * C, M * C); };
    auto own = [&](TensorView v, int h, size_t width) { return v.empty() ? v : v.slice(h * M * width, M * width); };
    // The whole-rows activations (qkv, atty, lse, fch, fcg) of rank c's share of half h.
    auto rows_of = [&](const BlockActs& a, int c, int h) {
      BlockActs whole;
      whole.qkv = a.qkv;
      whole.atty = a.atty;
      whole.lse = a.lse;
      whole.fch = a.fch;
      whole.fcg = a.fcg;
      return block_rows(whole, (2 * static_cast<size_t>(c) + h) * M, M, d, d.NHl);
    };
    // With fused sums (the rows exchanged between the pairs of ranks) the gathers and the sums go
    // by rank: a rank's share of the column-parallel GEMM waits only for that rank's rows (own
    // share first), and each share of the row-parallel GEMM is sent as soon as it is done.
    const bool by_rank = tp_.exchanges_rows();
    Request gather[2];
    std::vector<Request> gathered[2];
    TpSum sum[2];
    auto norm = [&](int h, int p) {
      const int i = p / 2;
      const BlockTensors& w = pass.weights(i);
      const BlockActs a = pass.acts(i);
      const TensorView x = own(pass.input(i), h, C), partial = share(half(partial_all, h), rank);
      const TensorView peer = sum[h].wait(st);
      const PeerRelease release = sum[h].release_in_op();
      const TensorView all = half(p % 2 == 0 ? a.ln1 : a.ln2, h), out = share(all, rank);
      if (p % 2 == 1)
        add_norm_fwd_tp(be, shape, own(a.x2, h, C), out, own(a.ln2_mean, h, 1), own(a.ln2_rstd, h, 1), partial,
                        peer, x, w.ln2_w, w.ln2_b, Mi, release);
      else if (i == 0)
        norm_fwd(be, shape, out, own(a.ln1_mean, h, 1), own(a.ln1_rstd, h, 1), x, w.ln1_w, w.ln1_b, Mi);
      else   // the previous block's output completed: its MLP branch's sums plus its x2
        add_norm_fwd_tp(be, shape, x, out, own(a.ln1_mean, h, 1), own(a.ln1_rstd, h, 1), partial, peer,
                        own(pass.saved(i - 1).x2, h, C), w.ln1_w, w.ln1_b, Mi, release);
      sum[h].done(st);
      const TensorView kept = p % 2 == 0 ? pass.saved(i).ln1 : pass.saved(i).ln2;
      if (!kept.empty()) be.copy(own(kept, h, C), out);
      if (by_rank)
        gathered[h] = comm.pair_exchange()->gather_each_async(all.data, M * C, act, st);
      else
        gather[h] = comm.all_gather_async(all.data, M * C, act, st);
    };
    auto in = [&](int h, int p) {
      const int i = p / 2;
      const BlockTensors& w = pass.weights(i);
      const BlockActs a = pass.acts(i);
      if (!by_rank) {
        gather[h]->wait(st);
        gather[h].reset();
      }
      if (p % 2 == 0 && h == 0) pass.prefetch_after(i);
      for (int k = 0; k < tp; ++k) {
        const int c = by_rank ? (rank + k) % tp : k;
        if (by_rank && c != rank) gathered[h][c]->wait(st);
        const BlockActs part = rows_of(a, c, h);
        if (p % 2 == 1) {
          mlp_activation_fwd(be, shape, w, part, share(half(a.ln2, h), c), Mi);
          continue;
        }
        be.matmul_fwd(part.qkv, share(half(a.ln1, h), c), w.qkv_w, w.qkv_b, Mi, Ci, QKV);
        pass.attend(part, batch, (2 * static_cast<size_t>(c) + h) * M);
      }
      gathered[h].clear();
    };
    auto out = [&](int h, int p) {
      const BlockTensors& w = pass.weights(p / 2);
      const BlockActs a = pass.acts(p / 2);
      const TensorView partial = half(partial_all, h);
      if (by_rank) sum[h] = TpSum::rows(comm, be, partial, M * C);
      for (int k = 0; k < tp; ++k) {
        const int c = by_rank ? (rank + k + 1) % tp : k;   // by rank: the others' shares first, own last
        const BlockActs part = rows_of(a, c, h);
        if (p % 2 == 0)
          be.matmul_fwd(share(partial, c), part.atty, w.proj_w, shape.bias_here ? w.proj_b : TensorView{}, Mi, ATT,
                        Ci);
        else
          be.matmul_fwd(share(partial, c), part.fcg, w.fcproj_w, shape.bias_here ? w.fcproj_b : TensorView{}, Mi,
                        FA, Ci);
        if (by_rank && c != rank) sum[h].send(c, st);
      }
      if (!by_rank) sum[h] = tp_.start_row_sum(partial, M);
    };
    // Every GEMM here runs beside one of the other half's collectives (the margin is 0 where fused
    // sums move them by copy engine).
    be.set_gemm_sm_margin(tp_.margin_beside_sums());
    for (int p = 0; p < n_parts; ++p) {
      const bool block_start = p % 2 == 0, out_first = p > 0 && block_start && pass.need_ends_use();
      if (out_first) out(1, p - 1);
      if (block_start) pass.need(p / 2);
      norm(0, p);
      if (p > 0 && !out_first) out(1, p - 1);
      in(0, p);
      norm(1, p);
      out(0, p);
      in(1, p);
    }
    out(1, n_parts - 1);
    // The last block completes its own output (the others' is added by the next block's LN1).
    const BlockActs& last = pass.saved(pass.n_blocks() - 1);
    for (int h = 0; h < 2; ++h)
      add_block_output(be, own(last.x3, h, C), share(half(partial_all, h), rank), sum[h], own(last.x2, h, C));
    be.set_gemm_sm_margin(0);
    return last.x3;
  }

 private:
  TpStrategy& tp_;
};

}  // namespace

std::unique_ptr<TpForward> make_overlap_forward(TpStrategy& tp) {
  if (tp.own_rows_forward()) return std::make_unique<SequenceHalvesForward>(tp);
  return std::make_unique<HalvesForward>(tp);
}

}  // namespace trident
