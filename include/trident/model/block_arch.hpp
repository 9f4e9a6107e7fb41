// What a GPT-2 block and a Llama block do differently, behind one interface chosen once from the
// ModelConfig (block_arch): the norm, the MLP activation, the position step before attention and
// the parameters' names. The rest of a block (attention, the TP regions, the memory plan) is shared.
#pragma once

#include <functional>
#include <string>

#include "trident/backend/backend.hpp"
#include "trident/config/run_config.hpp"
#include "trident/peer/peer_release.hpp"

namespace trident {

struct BlockTensors;

// One of a stage's parameters (or a packed group of them, first..last) by name: a view in the
// parameter or gradient buffer.
using ParamSpan = std::function<TensorView(const std::string& first, const std::string& last)>;

class BlockArch {
 public:
  virtual ~BlockArch() = default;

  // The norm. LayerNorm (true) subtracts the row mean, kept per row beside rstd, and adds a bias;
  // RMSNorm (false) has neither, and its mean views stay empty.
  virtual bool norm_centers() const = 0;
  virtual void norm_fwd(Backend& be, TensorView out, TensorView mean, TensorView rstd, TensorView in, TensorView w,
                        TensorView b, int rows, int C, float eps) const = 0;
  // sum = a + a_peer + residual (a_peer the other TP rank's partial of a fused sum, or empty), and
  // its norm; `release` frees a_peer from inside the op (TpSum::release_in_op).
  virtual void add_norm_fwd(Backend& be, TensorView sum, TensorView out, TensorView mean, TensorView rstd,
                            TensorView a, TensorView a_peer, TensorView residual, TensorView w, TensorView b,
                            int rows, int C, float eps, PeerRelease release) const = 0;
  // din_accum += the input gradient of dout + dout_peer; dw, db += the weight and bias gradients,
  // dsum += the column sums of the updated din_accum (the row-parallel bias gradient before it).
  // din_keep, if given, gets din_accum as it was before (Backend::layernorm_bwd; not with a peer).
  virtual void norm_bwd(Backend& be, TensorView din_accum, TensorView dw, TensorView db, TensorView dsum,
                        TensorView dout, TensorView dout_peer, TensorView in, TensorView w, TensorView mean,
                        TensorView rstd, int rows, int C, PeerRelease release, TensorView din_keep) const = 0;

  // The MLP: up projection (fc_act wide after the activation, fc_width(fc_act) before it) and
  // activation into fch, fcg. A separate activation (SwiGLU, true) is its own op after the GEMM,
  // which selective recompute redoes from fch and whose backward reads each pair of fch before it
  // writes their gradients (so it may write over fch); GELU (false) runs in the fc GEMM's
  // epilogue on the fp32 accumulator, which a redo from the rounded fch would not reproduce bit for
  // bit on a GPU.
  virtual bool separate_activation() const = 0;
  virtual size_t fc_width(size_t fc_act) const = 0;
  virtual void mlp_fwd(Backend& be, TensorView fch, TensorView fcg, TensorView in, TensorView fc_w, TensorView fc_b,
                       int rows, int C, int fc, int fc_act) const = 0;
  // The separate activation alone (fcg from fch); fatal for an activation in the GEMM's epilogue.
  virtual void mlp_activation(Backend& be, TensorView fcg, TensorView fch, int rows, int fc_act) const = 0;
  // The down projection's input gradient through the activation: dfch (rows, fc) from dres
  // (rows, C); dw, db += down's weight and bias gradients where given; dfcg (rows, fc_act) is
  // scratch for a separate activation's input gradient.
  virtual void mlp_bwd(Backend& be, TensorView dfch, TensorView dfcg, TensorView dw, TensorView db, TensorView dres,
                       TensorView fcg, TensorView fcproj_w, TensorView fch, int rows, int fc_act, int C) const = 0;

  // Positions: learned rows added by the embedding (false), or rotary embeddings (true) applied
  // in place to q and k before the attention and undone on their gradient by the attention's
  // backward (Backend::attention_bwd's rope).
  virtual bool rotary() const = 0;
  virtual void position_fwd(Backend& be, TensorView qkv, TensorView rope, int B, int T, int NH, int NKV, int HS,
                            const int32_t* doc_start) const = 0;
  // Where the qkv bias gradient is summed: in the attention backward while dqkv is on chip (true),
  // or in the qkv GEMM's backward after the position step's (a bias added before the rotation).
  virtual bool qkv_bias_in_attention_bwd() const = 0;

  // A block's parameters, `prefix` "blocks.<layer>.", from their names in ParamLayout; views are
  // empty where the architecture has none (Llama's biases but qkv_b with model.qkv_bias).
  virtual BlockTensors block_tensors(const ParamSpan& at, const std::string& prefix, const ModelConfig& m) const = 0;
};

// The architecture of model.arch (one shared instance each).
const BlockArch& block_arch(const ModelConfig& m);

}  // namespace trident
