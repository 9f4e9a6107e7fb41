// One transformer block's forward, GPT-2 or Llama, shared by training (full causal attention
// over the micro-batch) and generation (attention over a KV cache): only the attention step
// differs. What the architectures do differently (the norm, the MLP activation, the biases, the
// position step) is BlockDims::arch (block_arch.hpp); these ops are the same for both.
#pragma once

#include <functional>

#include "trident/backend/backend.hpp"
#include "trident/config/run_config.hpp"
#include "trident/core/arena.hpp"
#include "trident/model/block_arch.hpp"
#include "trident/model/tp_regions.hpp"
#include "trident/parallel/comm.hpp"

namespace trident {

// A block's parameters on this TP rank; Llama's are empty where it has none (the biases but
// qkv_b with model.qkv_bias, the norms' b). Llama's qkv_w is q|k|v and fc_w gate|up, each packed
// (ParamLayout), fcproj_w is its down projection.
struct BlockTensors {
  TensorView ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fcproj_w, fcproj_b;
};

// Widths of a block's activations on one TP rank (NHl = NH/tp query heads, NKVl key/value heads).
struct BlockDims {
  const BlockArch* arch = nullptr;   // block_arch of the model
  int NHl = 0, NKVl = 0, HS = 0;
  size_t C = 0;       // the residual stream (whole on every rank)
  size_t qkv = 0;     // (NHl + 2 NKVl) HS
  size_t att = 0;     // NHl HS: the attention output, the row-parallel proj's input
  size_t fc = 0;      // the MLP's up projection: 4 C/tp (gpt2) or 2 F/tp, rows [gate | up] (llama)
  size_t fc_act = 0;  // its activation, the row-parallel down projection's input: 4 C/tp or F/tp
};
BlockDims block_dims(const ModelConfig& m, int tp);

// Activations of one block for N = B*T rows (widths from BlockDims).
struct BlockActs {
  TensorView ln1, ln1_mean, ln1_rstd;  // (N, C), (N) (LayerNorm only), (N)
  TensorView qkv;                      // (B, T, NHl + 2 NKVl, HS); llama: q and k rotated in place
  TensorView atty;                     // (B, T, NHl, HS)
  TensorView lse;                      // (B, NHl, T) f32 (training only)
  TensorView x2;                       // (N, C) residual after attention
  TensorView ln2, ln2_mean, ln2_rstd;  // (N, C), (N) (LayerNorm only), (N)
  TensorView fch, fcg;                 // (N, fc) before and (N, fc_act) after the MLP activation
  TensorView x3;                       // (N, C) block output; may alias the input x
};

// Which of a block's activations plan_block_acts plans, and the rows of the residual-stream ones.
struct BlockActsPlan {
  size_t lse_elems = 0;           // the attention statistics; 0 leaves them out (decoding)
  bool output = true;             // x3; false for callers that write the block output over its input
  bool norm_outputs = true;       // ln1, ln2; false where they are recomputed (selective recompute)
  bool mlp_activation = true;     // fcg; false where it is recomputed
  size_t residual_rows = 0;       // rows of x2, x3 and the norms' outputs and statistics (0: N); sequence
                                  // parallelism keeps only this rank's N/tp of them
};

// Plans the activations `p` names of a block for N rows (act the compute dtype) into `a`; the
// others stay empty views.
void plan_block_acts(ArenaLayout& a, BlockActs& acts, DType act, size_t N, const BlockDims& d,
                     const BlockActsPlan& p);

struct BlockShape {
  int N, C, Cl;   // rows, channels, channels of this TP shard (gpt2)
  float eps;
  bool bias_here; // TP rank 0 adds the row-parallel biases (once, before the reduction)
  bool fused_sum = false;   // parallel.tp_fused_sum: the TP sums as partials the next op adds (TpSum)
  BlockDims d;
};

// The block's norms (BlockArch's, with the shape's C and eps), in the forms the TP regions use (a
// partial of the other TP rank added inside, see TpSum).
void norm_fwd(Backend& be, const BlockShape& s, TensorView out, TensorView mean, TensorView rstd, TensorView in,
              TensorView w, TensorView b, int rows);
void add_norm_fwd_tp(Backend& be, const BlockShape& s, TensorView sum, TensorView out, TensorView mean,
                     TensorView rstd, TensorView a, TensorView a_peer, TensorView residual, TensorView w, TensorView b,
                     int rows, PeerRelease release);
void norm_bwd_tp(Backend& be, const BlockShape& s, TensorView din_accum, TensorView dw, TensorView db, TensorView dsum,
                 TensorView dout, TensorView dout_peer, TensorView in, TensorView w, TensorView mean, TensorView rstd,
                 int rows, PeerRelease release, TensorView din_keep = {});

// The MLP's up projection and activation of `rows` rows of `in` into a.fch, a.fcg (BlockArch::mlp_fwd).
void mlp_activation_fwd(Backend& be, const BlockShape& s, const BlockTensors& p, const BlockActs& a, TensorView in,
                        int rows);

// A separate MLP activation (BlockArch::separate_activation) of a.fch into a.fcg, `rows` rows:
// what mlp_activation_fwd applies after its GEMM and selective recompute redoes.
void mlp_activation(Backend& be, const BlockShape& s, const BlockActs& a, int rows);

// Fills a.atty (and a.lse where used) from a.qkv (after BlockArch::position_fwd on its q and k).
using AttentionStep = std::function<void(const BlockActs& a)>;

// x3 = x2 + reduce_tp(fcproj(act(fc(copy_tp(ln2(x2))))))   with   x2 = x + reduce_tp(proj(attn(qkv(copy_tp(ln1(x))))))
// (act GELU or SwiGLU)
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
// The MLP part up to its activation (a.x2 completed, ln2, fch, fcg), without the down projection:
// block_mlp_fwd's start, and all that recomputing a block's activations needs of the MLP.
void block_mlp_in_fwd(Backend& be, const BlockTensors& p, const BlockActs& a, TensorView x, TpSum& x2_sum,
                      const BlockShape& s);
// x3 = (partial + sum's other-rank partial, where the sum is fused) + x2, `sum` finished: the
// output add of a block whose x3 no next block completes (partial the MLP branch, summed in place
// by the sum: x3 itself, or under sequence parallelism this rank's rows of the partial buffer).
void add_block_output(Backend& be, TensorView x3, TensorView partial, TpSum& sum, TensorView x2);
// The activations of rows [row0, row0 + rows) of a block's (whole sequences: rows = b*T); lse
// (B, NHl, T) by the same sequences (lse_per_row = NHl), empty where a has none.
BlockActs block_rows(const BlockActs& a, size_t row0, size_t rows, const BlockDims& d, size_t lse_per_row);

}  // namespace trident
