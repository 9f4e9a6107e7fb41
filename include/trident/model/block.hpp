// One GPT-2 block's forward, shared by training (full causal attention over the micro-batch)
// and generation (attention over a KV cache): only the attention step differs.
#pragma once

#include <functional>

#include "trident/backend/backend.hpp"
#include "trident/core/arena.hpp"
#include "trident/model/tp_regions.hpp"
#include "trident/parallel/comm.hpp"

namespace trident {

struct BlockTensors {
  TensorView ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fcproj_w, fcproj_b;
};

// Activations of one block for N = B*T rows. Letters: Cl = C/tp, NHl = NH/tp.
struct BlockActs {
  TensorView ln1, ln1_mean, ln1_rstd;  // (N, C), (N), (N)
  TensorView qkv;                      // (B, T, 3, NHl, HS)
  TensorView atty;                     // (B, T, NHl, HS)
  TensorView lse;                      // (B, NHl, T) f32 (training only)
  TensorView x2;                       // (N, C) residual after attention
  TensorView ln2, ln2_mean, ln2_rstd;  // (N, C), (N), (N)
  TensorView fch, fcg;                 // (N, 4*Cl) pre-GELU and post-GELU
  TensorView x3;                       // (N, C) block output; may alias the input x
};

// Plans every activation of a block for N rows (C channels, Cl per TP shard; act the compute
// dtype) into `a`. lse_elems
// = 0 leaves out the attention statistics (decoding); with_output = false leaves out x3, for
// callers that write the block output over its input.
void plan_block_acts(ArenaLayout& a, BlockActs& acts, DType act, size_t N, size_t C, size_t Cl, size_t lse_elems,
                     bool with_output);

struct BlockShape {
  int N, C, Cl;   // rows, channels, channels of this TP shard
  float eps;
  bool bias_here; // TP rank 0 adds the row-parallel biases (once, before the reduction)
  bool fused_sum = false;   // parallel.tp_fused_sum: the TP sums as partials the next op adds (TpSum)
};

// Fills a.atty (and a.lse where used) from a.qkv.
using AttentionStep = std::function<void(const BlockActs& a)>;

// x3 = x2 + reduce_tp(fcproj(gelu(fc(copy_tp(ln2(x2))))))   with   x2 = x + reduce_tp(proj(attn(qkv(copy_tp(ln1(x))))))
//
// The residual add at a block's end can be fused with the next block's first LayerNorm: with
// add_output = false, x3 is left as the MLP branch alone, and the next call passes this block's
// x2 as `pending`; that call first completes x (x += pending, in place) fused with ln1. Either
// way every x3 ends up holding the full block output.
//
// Each TP sum is finished by the op that reads it (TpSum): x_sum is the sum of x still in
// flight from the previous block (empty when x is complete), and the returned TpSum that of
// this block's x3 when add_output is false (the next call's x_sum).
TpSum block_forward(Backend& be, Comm& tp, const BlockTensors& p, const BlockActs& a, TensorView x, TpSum x_sum,
                    const BlockShape& s, const AttentionStep& attention, TensorView pending = {},
                    bool add_output = true);
// block_forward in its two parts, each ending with its TP sum started (empty when tp = 1): the
// caller passes it to the next part, and may queue other work (another micro-batch's)
// meanwhile. block_forward is attention part, MLP part, output add.
// Attention part: x += x_sum's partial + pending (if any), ln1, qkv, attention, proj -> a.x2 (being summed).
TpSum block_attention_fwd(Backend& be, Comm& tp, const BlockTensors& p, const BlockActs& a, TensorView x,
                          TpSum& x_sum, const BlockShape& s, const AttentionStep& attention, TensorView pending);
// MLP part: a.x2 += x2_sum's partial + x with ln2, fc, GELU, fcproj -> a.x3 (being summed; the MLP
// branch alone).
TpSum block_mlp_fwd(Backend& be, Comm& tp, const BlockTensors& p, const BlockActs& a, TensorView x, TpSum& x2_sum,
                    const BlockShape& s);
// x3 = x3 + x3_sum's partial + x2: the output add of a block whose x3 no next block completes.
void add_block_output(Backend& be, const BlockActs& a, TpSum& x3_sum);
// The activations of rows [row0, row0 + rows) of a block's (whole sequences: rows = b*T); lse
// (B, NHl, T) by the same sequences (lse_per_row = NHl), empty where a has none.
BlockActs block_rows(const BlockActs& a, size_t row0, size_t rows, size_t C, size_t Cl, size_t lse_per_row);

}  // namespace trident
