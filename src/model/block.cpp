// The block forward as a flat list of calls, with Megatron's TP communication pairs.
#include "trident/model/block.hpp"

namespace trident {

void plan_block_acts(ArenaLayout& a, BlockActs& l, DType act, size_t N, size_t C, size_t Cl, size_t lse_elems,
                     bool with_output) {
  a.want(&l.ln1, act, N * C);
  a.want(&l.ln1_mean, DType::F32, N);
  a.want(&l.ln1_rstd, DType::F32, N);
  a.want(&l.qkv, act, N * 3 * Cl);
  a.want(&l.atty, act, N * Cl);
  if (lse_elems) a.want(&l.lse, DType::F32, lse_elems);
  a.want(&l.x2, act, N * C);
  a.want(&l.ln2, act, N * C);
  a.want(&l.ln2_mean, DType::F32, N);
  a.want(&l.ln2_rstd, DType::F32, N);
  a.want(&l.fch, act, N * 4 * Cl);
  a.want(&l.fcg, act, N * 4 * Cl);
  if (with_output) a.want(&l.x3, act, N * C);
}

TpSum block_forward(Backend& be, Comm& tp, const BlockTensors& p, const BlockActs& a, TensorView x, TpSum x_sum,
                    const BlockShape& s, const AttentionStep& attention, TensorView pending, bool add_output) {
  TpSum x2_sum = block_attention_fwd(be, tp, p, a, x, x_sum, s, attention, pending);
  TpSum x3_sum = block_mlp_fwd(be, tp, p, a, x, x2_sum, s);
  if (!add_output) return x3_sum;
  add_block_output(be, a, x3_sum);
  return TpSum{};
}

TpSum block_attention_fwd(Backend& be, Comm& tp, const BlockTensors& p, const BlockActs& a, TensorView x,
                          TpSum& x_sum, const BlockShape& s, const AttentionStep& attention, TensorView pending) {
  Stream st = be.stream();
  const TensorView x_peer = x_sum.wait(st);
  if (pending.empty()) {
    TRIDENT_CHECK(x_peer.empty(), "block_attention_fwd: a partial x needs its pending residual");
    be.layernorm_fwd(a.ln1, a.ln1_mean, a.ln1_rstd, x, p.ln1_w, p.ln1_b, s.N, s.C, s.eps);
  } else {
    add_layernorm_fwd_tp(be, x, a.ln1, a.ln1_mean, a.ln1_rstd, x, x_peer, pending, p.ln1_w, p.ln1_b, s.N, s.C,
                         s.eps, x_sum.release_in_op());
  }
  x_sum.done(st);
  be.matmul_fwd(a.qkv, a.ln1, p.qkv_w, p.qkv_b, s.N, s.C, 3 * s.Cl);
  attention(a);
  be.matmul_fwd(a.x2, a.atty, p.proj_w, s.bias_here ? p.proj_b : TensorView{}, s.N, s.Cl, s.C);
  return TpSum::start(tp, a.x2, s.fused_sum, st);
}

TpSum block_mlp_fwd(Backend& be, Comm& tp, const BlockTensors& p, const BlockActs& a, TensorView x, TpSum& x2_sum,
                    const BlockShape& s) {
  Stream st = be.stream();
  const TensorView x2_peer = x2_sum.wait(st);
  add_layernorm_fwd_tp(be, a.x2, a.ln2, a.ln2_mean, a.ln2_rstd, a.x2, x2_peer, x, p.ln2_w, p.ln2_b, s.N, s.C,
                       s.eps, x2_sum.release_in_op());
  x2_sum.done(st);
  be.matmul_gelu_fwd(a.fcg, a.fch, a.ln2, p.fc_w, p.fc_b, s.N, s.C, 4 * s.Cl);
  be.matmul_fwd(a.x3, a.fcg, p.fcproj_w, s.bias_here ? p.fcproj_b : TensorView{}, s.N, 4 * s.Cl, s.C);
  return TpSum::start(tp, a.x3, s.fused_sum, st);
}

void add_block_output(Backend& be, const BlockActs& a, TpSum& x3_sum) {
  Stream st = be.stream();
  const TensorView x3_peer = x3_sum.wait(st);
  if (!x3_peer.empty()) be.add(a.x3, a.x3, x3_peer);   // the pair's sum, rounded as the all-reduce's
  x3_sum.done(st);
  be.add(a.x3, a.x3, a.x2);
}

BlockActs block_rows(const BlockActs& a, size_t row0, size_t rows, size_t C, size_t Cl, size_t lse_per_row) {
  auto part = [&](TensorView v, size_t per_row) { return v.empty() ? v : v.slice(row0 * per_row, rows * per_row); };
  BlockActs r;
  r.ln1 = part(a.ln1, C);
  r.ln1_mean = part(a.ln1_mean, 1);
  r.ln1_rstd = part(a.ln1_rstd, 1);
  r.qkv = part(a.qkv, 3 * Cl);
  r.atty = part(a.atty, Cl);
  r.lse = part(a.lse, lse_per_row);
  r.x2 = part(a.x2, C);
  r.ln2 = part(a.ln2, C);
  r.ln2_mean = part(a.ln2_mean, 1);
  r.ln2_rstd = part(a.ln2_rstd, 1);
  r.fch = part(a.fch, 4 * Cl);
  r.fcg = part(a.fcg, 4 * Cl);
  r.x3 = part(a.x3, C);
  return r;
}

}  // namespace trident
