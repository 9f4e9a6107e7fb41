// The block forward as a flat list of calls, with Megatron's TP communication pairs.
#include "trident/model/block.hpp"

namespace trident {

BlockDims block_dims(const ModelConfig& m, int tp) {
  BlockDims d;
  d.arch = &block_arch(m);
  d.NHl = m.n_head / tp;
  d.NKVl = m.kv_heads_per_rank(tp);
  d.HS = m.head_size();
  d.C = static_cast<size_t>(m.n_embd);
  d.qkv = static_cast<size_t>(d.NHl + 2 * d.NKVl) * d.HS;
  d.att = static_cast<size_t>(d.NHl) * d.HS;
  d.fc_act = static_cast<size_t>(m.ffn() / tp);
  d.fc = d.arch->fc_width(d.fc_act);
  return d;
}

void plan_block_acts(ArenaLayout& a, BlockActs& l, DType act, size_t N, const BlockDims& d,
                     const BlockActsPlan& p) {
  const size_t C = d.C, R = p.residual_rows ? p.residual_rows : N;
  if (p.norm_outputs) a.want(&l.ln1, act, R * C);
  if (d.arch->norm_centers()) a.want(&l.ln1_mean, DType::F32, R);
  a.want(&l.ln1_rstd, DType::F32, R);
  a.want(&l.qkv, act, N * d.qkv);
  a.want(&l.atty, act, N * d.att);
  if (p.lse_elems) a.want(&l.lse, DType::F32, p.lse_elems);
  a.want(&l.x2, act, R * C);
  if (p.norm_outputs) a.want(&l.ln2, act, R * C);
  if (d.arch->norm_centers()) a.want(&l.ln2_mean, DType::F32, R);
  a.want(&l.ln2_rstd, DType::F32, R);
  a.want(&l.fch, act, N * d.fc);
  if (p.mlp_activation) a.want(&l.fcg, act, N * d.fc_act);
  if (p.output) a.want(&l.x3, act, R * C);
}

void norm_fwd(Backend& be, const BlockShape& s, TensorView out, TensorView mean, TensorView rstd, TensorView in,
              TensorView w, TensorView b, int rows) {
  s.d.arch->norm_fwd(be, out, mean, rstd, in, w, b, rows, s.C, s.eps);
}

void add_norm_fwd_tp(Backend& be, const BlockShape& s, TensorView sum, TensorView out, TensorView mean,
                     TensorView rstd, TensorView a, TensorView a_peer, TensorView residual, TensorView w, TensorView b,
                     int rows, PeerRelease release) {
  s.d.arch->add_norm_fwd(be, sum, out, mean, rstd, a, a_peer, residual, w, b, rows, s.C, s.eps, release);
}

void norm_bwd_tp(Backend& be, const BlockShape& s, TensorView din_accum, TensorView dw, TensorView db, TensorView dsum,
                 TensorView dout, TensorView dout_peer, TensorView in, TensorView w, TensorView mean, TensorView rstd,
                 int rows, PeerRelease release, TensorView din_keep) {
  s.d.arch->norm_bwd(be, din_accum, dw, db, dsum, dout, dout_peer, in, w, mean, rstd, rows, s.C, release, din_keep);
}

void mlp_activation_fwd(Backend& be, const BlockShape& s, const BlockTensors& p, const BlockActs& a, TensorView in,
                        int rows) {
  s.d.arch->mlp_fwd(be, a.fch, a.fcg, in, p.fc_w, p.fc_b, rows, s.C, static_cast<int>(s.d.fc),
                    static_cast<int>(s.d.fc_act));
}

void mlp_activation(Backend& be, const BlockShape& s, const BlockActs& a, int rows) {
  s.d.arch->mlp_activation(be, a.fcg, a.fch, rows, static_cast<int>(s.d.fc_act));
}

TpSum block_forward(Backend& be, Comm& tp, const BlockTensors& p, const BlockActs& a, TensorView x, TpSum x_sum,
                    const BlockShape& s, const AttentionStep& attention, TensorView pending, bool add_output) {
  TpSum x2_sum = block_attention_fwd(be, tp, p, a, x, x_sum, s, attention, pending);
  TpSum x3_sum = block_mlp_fwd(be, tp, p, a, x, x2_sum, s);
  if (!add_output) return x3_sum;
  add_block_output(be, a.x3, a.x3, x3_sum, a.x2);
  return TpSum{};
}

TpSum block_attention_fwd(Backend& be, Comm& tp, const BlockTensors& p, const BlockActs& a, TensorView x,
                          TpSum& x_sum, const BlockShape& s, const AttentionStep& attention, TensorView pending) {
  Stream st = be.stream();
  const TensorView x_peer = x_sum.wait(st);
  if (pending.empty()) {
    TRIDENT_CHECK(x_peer.empty(), "block_attention_fwd: a partial x needs its pending residual");
    norm_fwd(be, s, a.ln1, a.ln1_mean, a.ln1_rstd, x, p.ln1_w, p.ln1_b, s.N);
  } else {
    add_norm_fwd_tp(be, s, x, a.ln1, a.ln1_mean, a.ln1_rstd, x, x_peer, pending, p.ln1_w, p.ln1_b, s.N,
                    x_sum.release_in_op());
  }
  x_sum.done(st);
  be.matmul_fwd(a.qkv, a.ln1, p.qkv_w, p.qkv_b, s.N, s.C, static_cast<int>(s.d.qkv));
  attention(a);
  be.matmul_fwd(a.x2, a.atty, p.proj_w, s.bias_here ? p.proj_b : TensorView{}, s.N, static_cast<int>(s.d.att), s.C);
  return TpSum::start(tp, a.x2, s.fused_sum, st);
}

void block_mlp_in_fwd(Backend& be, const BlockTensors& p, const BlockActs& a, TensorView x, TpSum& x2_sum,
                      const BlockShape& s) {
  Stream st = be.stream();
  const TensorView x2_peer = x2_sum.wait(st);
  add_norm_fwd_tp(be, s, a.x2, a.ln2, a.ln2_mean, a.ln2_rstd, a.x2, x2_peer, x, p.ln2_w, p.ln2_b, s.N,
                  x2_sum.release_in_op());
  x2_sum.done(st);
  mlp_activation_fwd(be, s, p, a, a.ln2, s.N);
}

TpSum block_mlp_fwd(Backend& be, Comm& tp, const BlockTensors& p, const BlockActs& a, TensorView x, TpSum& x2_sum,
                    const BlockShape& s) {
  Stream st = be.stream();
  block_mlp_in_fwd(be, p, a, x, x2_sum, s);
  be.matmul_fwd(a.x3, a.fcg, p.fcproj_w, s.bias_here ? p.fcproj_b : TensorView{}, s.N, static_cast<int>(s.d.fc_act),
                s.C);
  return TpSum::start(tp, a.x3, s.fused_sum, st);
}

void add_block_output(Backend& be, TensorView x3, TensorView partial, TpSum& sum, TensorView x2) {
  Stream st = be.stream();
  const TensorView peer = sum.wait(st);
  // The pair's sum, rounded before x2 is added, as the all-reduce or reduce-scatter leaves it.
  if (!peer.empty()) be.add(partial, partial, peer);
  sum.done(st);
  be.add(x3, partial, x2);
}

BlockActs block_rows(const BlockActs& a, size_t row0, size_t rows, const BlockDims& d, size_t lse_per_row) {
  const size_t C = d.C;
  auto part = [&](TensorView v, size_t per_row) { return v.empty() ? v : v.slice(row0 * per_row, rows * per_row); };
  BlockActs r;
  r.ln1 = part(a.ln1, C);
  r.ln1_mean = part(a.ln1_mean, 1);
  r.ln1_rstd = part(a.ln1_rstd, 1);
  r.qkv = part(a.qkv, d.qkv);
  r.atty = part(a.atty, d.att);
  r.lse = part(a.lse, lse_per_row);
  r.x2 = part(a.x2, C);
  r.ln2 = part(a.ln2, C);
  r.ln2_mean = part(a.ln2_mean, 1);
  r.ln2_rstd = part(a.ln2_rstd, 1);
  r.fch = part(a.fch, d.fc);
  r.fcg = part(a.fcg, d.fc_act);
  r.x3 = part(a.x3, C);
  return r;
}

}  // namespace trident
