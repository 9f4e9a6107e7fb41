// The two block architectures: GPT-2 (LayerNorm, GELU in the fc GEMM's epilogue, learned
// positions, biases everywhere) and Llama (RMSNorm, SwiGLU, RoPE, biases only on qkv if asked).
#include "trident/model/block_arch.hpp"

#include "trident/model/block.hpp"
#include "trident/model/tp_regions.hpp"

namespace trident {

namespace {

class Gpt2Block final : public BlockArch {
 public:
  bool norm_centers() const override { return true; }
  void norm_fwd(Backend& be, TensorView out, TensorView mean, TensorView rstd, TensorView in, TensorView w,
                TensorView b, int rows, int C, float eps) const override {
    be.layernorm_fwd(out, mean, rstd, in, w, b, rows, C, eps);
  }
  void add_norm_fwd(Backend& be, TensorView sum, TensorView out, TensorView mean, TensorView rstd, TensorView a,
                    TensorView a_peer, TensorView residual, TensorView w, TensorView b, int rows, int C, float eps,
                    PeerRelease release) const override {
    add_layernorm_fwd_tp(be, sum, out, mean, rstd, a, a_peer, residual, w, b, rows, C, eps, release);
  }
  void norm_bwd(Backend& be, TensorView din_accum, TensorView dw, TensorView db, TensorView dsum, TensorView dout,
                TensorView dout_peer, TensorView in, TensorView w, TensorView mean, TensorView rstd, int rows, int C,
                PeerRelease release, TensorView din_keep) const override {
    layernorm_bwd_tp(be, din_accum, dw, db, dsum, dout, dout_peer, in, w, mean, rstd, rows, C, release, din_keep);
  }

  bool separate_activation() const override { return false; }
  size_t fc_width(size_t fc_act) const override { return fc_act; }
  void mlp_fwd(Backend& be, TensorView fch, TensorView fcg, TensorView in, TensorView fc_w, TensorView fc_b, int rows,
               int C, int fc, int) const override {
    be.matmul_gelu_fwd(fcg, fch, in, fc_w, fc_b, rows, C, fc);
  }
  void mlp_activation(Backend&, TensorView, TensorView, int, int) const override {
    TRIDENT_FATAL("mlp_activation: GPT-2's GELU runs in the fc GEMM's epilogue");
  }
  void mlp_bwd(Backend& be, TensorView dfch, TensorView, TensorView dw, TensorView db, TensorView dres, TensorView fcg,
               TensorView fcproj_w, TensorView fch, int rows, int fc_act, int C) const override {
    be.matmul_gelu_bwd(dfch, dw, db, dres, fcg, fcproj_w, fch, rows, fc_act, C);
  }

  bool rotary() const override { return false; }
  void position_fwd(Backend&, TensorView, TensorView, int, int, int, int, int, const int32_t*) const override {}
  bool qkv_bias_in_attention_bwd() const override { return true; }

  BlockTensors block_tensors(const ParamSpan& at, const std::string& b, const ModelConfig&) const override {
    auto v = [&](const std::string& name) { return at(b + name, b + name); };
    return {v("ln1.weight"), v("ln1.bias"), v("attn.qkv.weight"), v("attn.qkv.bias"),
            v("attn.proj.weight"), v("attn.proj.bias"), v("ln2.weight"), v("ln2.bias"),
            v("mlp.fc.weight"), v("mlp.fc.bias"), v("mlp.proj.weight"), v("mlp.proj.bias")};
  }
};

class LlamaBlock final : public BlockArch {
 public:
  bool norm_centers() const override { return false; }
  void norm_fwd(Backend& be, TensorView out, TensorView, TensorView rstd, TensorView in, TensorView w, TensorView,
                int rows, int C, float eps) const override {
    be.rmsnorm_fwd(out, rstd, in, w, rows, C, eps);
  }
  void add_norm_fwd(Backend& be, TensorView sum, TensorView out, TensorView, TensorView rstd, TensorView a,
                    TensorView a_peer, TensorView residual, TensorView w, TensorView, int rows, int C, float eps,
                    PeerRelease release) const override {
    add_rmsnorm_fwd_tp(be, sum, out, rstd, a, a_peer, residual, w, rows, C, eps, release);
  }
  void norm_bwd(Backend& be, TensorView din_accum, TensorView dw, TensorView db, TensorView dsum, TensorView dout,
                TensorView dout_peer, TensorView in, TensorView w, TensorView, TensorView rstd, int rows, int C,
                PeerRelease release, TensorView din_keep) const override {
    TRIDENT_CHECK(db.empty() && dsum.empty(), "RMSNorm backward: Llama's norms and the layers before them have no bias");
    rmsnorm_bwd_tp(be, din_accum, dw, dout, dout_peer, in, w, rstd, rows, C, release, din_keep);
  }

  bool separate_activation() const override { return true; }
  size_t fc_width(size_t fc_act) const override { return 2 * fc_act; }   // [gate | up]
  void mlp_fwd(Backend& be, TensorView fch, TensorView fcg, TensorView in, TensorView fc_w, TensorView fc_b, int rows,
               int C, int fc, int fc_act) const override {
    be.matmul_fwd(fch, in, fc_w, fc_b, rows, C, fc);
    mlp_activation(be, fcg, fch, rows, fc_act);
  }
  void mlp_activation(Backend& be, TensorView fcg, TensorView fch, int rows, int fc_act) const override {
    const size_t n = static_cast<size_t>(rows), fa = static_cast<size_t>(fc_act);
    be.swiglu_fwd(fcg.slice(0, n * fa), fch.slice(0, n * 2 * fa), rows, fc_act);
  }
  // down's input gradient, then SwiGLU's backward into [dgate | dup].
  void mlp_bwd(Backend& be, TensorView dfch, TensorView dfcg, TensorView dw, TensorView db, TensorView dres,
               TensorView fcg, TensorView fcproj_w, TensorView fch, int rows, int fc_act, int C) const override {
    TRIDENT_CHECK(db.empty(), "Llama's down projection has no bias");
    be.matmul_bwd(dfcg, dw, TensorView{}, dres, fcg, fcproj_w, rows, fc_act, C);
    be.swiglu_bwd(dfch, dfcg, fch, rows, fc_act);
  }

  bool rotary() const override { return true; }
  void position_fwd(Backend& be, TensorView qkv, TensorView rope, int B, int T, int NH, int NKV, int HS,
                    const int32_t* doc_start) const override {
    be.rope_fwd(qkv, rope, B, T, NH, NKV, HS, 0, doc_start);
  }
  bool qkv_bias_in_attention_bwd() const override { return false; }

  // q|k|v and gate|up are packed (ParamLayout): one view from the first's start over the group.
  BlockTensors block_tensors(const ParamSpan& at, const std::string& b, const ModelConfig& m) const override {
    auto v = [&](const std::string& name) { return at(b + name, b + name); };
    BlockTensors t;
    t.ln1_w = v("ln1.weight");
    t.qkv_w = at(b + "attn.q.weight", b + "attn.v.weight");
    if (m.qkv_bias) t.qkv_b = at(b + "attn.q.bias", b + "attn.v.bias");
    t.proj_w = v("attn.proj.weight");
    t.ln2_w = v("ln2.weight");
    t.fc_w = at(b + "mlp.gate.weight", b + "mlp.up.weight");
    t.fcproj_w = v("mlp.down.weight");
    return t;
  }
};

}  // namespace

const BlockArch& block_arch(const ModelConfig& m) {
  static const Gpt2Block gpt2;
  static const LlamaBlock llama;
  if (m.llama()) return llama;
  return gpt2;
}

}  // namespace trident
