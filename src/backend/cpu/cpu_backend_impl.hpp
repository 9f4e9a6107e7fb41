// CpuBackend: the fp32 reference implementation of Backend and its PeerOps. Each op family lives
// in its own .cpp file in this folder; this private header only declares the class.
#pragma once

#include <mutex>
#include <unordered_map>

#include "trident/backend/peer_ops.hpp"

namespace trident {

class CpuBackend final : public Backend, public PeerOps {
 public:
  std::string name() const override { return "cpu"; }
  DType compute_dtype() const override { return DType::F32; }
  bool is_device() const override { return false; }

  void* alloc(size_t bytes) override;
  void release(void* p) override;
  void zero(TensorView t) override;
  void copy_to_host(void* dst, TensorView src) override;
  void copy_from_host(TensorView dst, const void* src) override;
  void copy(TensorView dst, TensorView src) override;
  Stream stream() override { return Stream{}; }
  void synchronize() override {}
  size_t peak_bytes() const override;
  // Host memory is all there is: the transfers are copies made at once.
  void* alloc_host(size_t bytes) override;
  void release_host(void* p) override;
  Stream transfer_stream() override { return Stream{}; }
  void copy_to_host_async(void* dst, TensorView src) override { copy_to_host(dst, src); }
  void copy_from_host_async(TensorView dst, const void* src) override { copy_from_host(dst, src); }
  void join_transfers() override {}

  void encoder_fwd(TensorView out, const int32_t* tokens, TensorView wte, TensorView wpe,
                   int B, int T, int C, int vocab_start, int v_local, const int32_t* doc_start) override;
  void encoder_bwd(TensorView dwte, TensorView dwpe, TensorView dout, const int32_t* tokens,
                   int B, int T, int C, int vocab_start, int v_local, const int32_t* doc_start) override;

  void layernorm_fwd(TensorView out, TensorView mean, TensorView rstd, TensorView in,
                     TensorView w, TensorView b, int N, int C, float eps) override;
  using Backend::add_layernorm_fwd;
  void add_layernorm_fwd(TensorView sum, TensorView out, TensorView mean, TensorView rstd, TensorView a,
                         TensorView a_peer, TensorView residual, TensorView w, TensorView b, int N, int C, float eps,
                         PeerRelease release) override;
  void layernorm_bwd(TensorView din_accum, TensorView dw, TensorView db, TensorView dsum, TensorView dout,
                     TensorView in, TensorView w, TensorView mean, TensorView rstd, int N, int C,
                     TensorView din_keep = {}) override {
    keep_before_update(din_keep, din_accum, "layernorm_bwd");
    layernorm_bwd(din_accum, dw, db, dsum, dout, TensorView{}, in, w, mean, rstd, N, C, PeerRelease{});
  }
  void layernorm_bwd(TensorView din_accum, TensorView dw, TensorView db, TensorView dsum, TensorView dout,
                     TensorView dout_peer, TensorView in, TensorView w, TensorView mean, TensorView rstd, int N,
                     int C, PeerRelease release) override;

  void rmsnorm_fwd(TensorView out, TensorView rstd, TensorView in, TensorView w, int N, int C, float eps) override;
  using Backend::add_rmsnorm_fwd;
  void add_rmsnorm_fwd(TensorView sum, TensorView out, TensorView rstd, TensorView a, TensorView a_peer,
                       TensorView residual, TensorView w, int N, int C, float eps, PeerRelease release) override;
  void rmsnorm_bwd(TensorView din_accum, TensorView dw, TensorView dout, TensorView in, TensorView w, TensorView rstd,
                   int N, int C, TensorView din_keep = {}) override;
  void rmsnorm_bwd(TensorView din_accum, TensorView dw, TensorView dout, TensorView dout_peer, TensorView in,
                   TensorView w, TensorView rstd, int N, int C, PeerRelease release) override;

  void sum_partials(TensorView out, const std::vector<TensorView>& parts) override;
  void add(TensorView out, TensorView a, TensorView b) override;
  void gelu_fwd(TensorView out, TensorView in) override;
  void gelu_bwd(TensorView din, TensorView dout, TensorView pre) override;
  void swiglu_fwd(TensorView out, TensorView in, int N, int F) override;
  void swiglu_bwd(TensorView din, TensorView dout, TensorView in, int N, int F) override;

  void matmul_fwd(TensorView out, TensorView in, TensorView w, TensorView bias,
                  int N, int K, int M) override;
  void matmul_bwd(TensorView din, TensorView dw, TensorView dbias, TensorView dout,
                  TensorView in, TensorView w, int N, int K, int M) override;

  void attention_fwd(TensorView out, TensorView lse, TensorView qkv, int B, int T, int NH, int NKV,
                     int HS, const int32_t* doc_start) override;
  void attention_decode(TensorView out, TensorView k_cache, TensorView v_cache, TensorView qkv, const int32_t* rows,
                        int N, int S, int Tmax, int NH, int NKV, int HS) override;
  void sample_shard(TensorView stats, TensorView logits, const int32_t* keys, uint64_t seed, float temperature, int N,
                    int v_local, int v_valid, int vocab_start) override;
  void attention_bwd(TensorView dqkv, TensorView dbias, TensorView dout, TensorView qkv, TensorView out,
                     TensorView lse, int B, int T, int NH, int NKV, int HS, const int32_t* doc_start,
                     TensorView rope = {}) override;
  void rope_fwd(TensorView qkv, TensorView rope, int B, int T, int NH, int NKV, int HS, int pos0,
                const int32_t* doc_start) override;
  void rope_bwd(TensorView dqkv, TensorView rope, int B, int T, int NH, int NKV, int HS, int pos0,
                const int32_t* doc_start) override;

  void xent_max(TensorView rowmax, TensorView logits, int N, int v_local, int v_valid) override;
  void xent_stats(TensorView stats, TensorView logits, TensorView rowmax, const int32_t* targets,
                  int N, int v_local, int v_valid, int vocab_start) override;
  void xent_bwd(TensorView losses, TensorView logits, TensorView rowmax, TensorView stats,
                const int32_t* targets, int N, int v_local, int v_valid, int vocab_start,
                float dloss) override;
  void xent_entropy_sums(TensorView entropy_sums, TensorView logits, TensorView rowmax, int N, int v_local,
                         int v_valid) override;

  void segment_sum(TensorView out, TensorView in, int S, int len) override;
  void scale_rows(TensorView x, TensorView w, int rows, int cols) override;
  void dpo_loss(TensorView acc, TensorView row_weights, TensorView policy_nll, TensorView ref_nll,
                const int32_t* targets, int pairs, int T, const DpoArgs& a) override;
  void policy_loss(TensorView acc, TensorView weights, TensorView nll, TensorView old_logp, TensorView coef,
                   TensorView coef_adv, TensorView ref_nll, TensorView entropy_sums, int N,
                   const PolicyArgs& a) override;
  void reward_fwd(TensorView scores, TensorView dscores, TensorView stats, TensorView lnf, TensorView w,
                  const int32_t* targets, int B, int T, int C, float dloss) override;
  void reward_bwd(TensorView dlnf, TensorView dw, TensorView dscores, TensorView lnf, TensorView w,
                  const int32_t* targets, int B, int T, int C) override;
  void value_fwd(TensorView values, TensorView dvalues, TensorView acc, TensorView lnf, TensorView w,
                 TensorView old_values, TensorView returns, TensorView coef, int N, int C, const ValueArgs& a) override;
  void value_bwd(TensorView dlnf, TensorView dw, TensorView dvalues, TensorView lnf, TensorView w, int N,
                 int C) override;

  void sum_squares(TensorView acc, TensorView x) override;
  void sum(TensorView acc, TensorView x) override;
  void scale(TensorView x, float s) override;
  void accumulate(TensorView acc, TensorView x) override;
  void adamw(TensorView param, TensorView master, TensorView m, TensorView v, TensorView grad,
             const AdamWArgs& a) override;
  void sum_squares_multi(TensorView acc, TensorView x, TensorView pieces) override;
  void adamw_multi(TensorView param, TensorView master, TensorView m, TensorView v, TensorView grad,
                   TensorView pieces, const AdamWArgs& a, TensorView norm_sq, float clip) override;

  PeerOps* peer_ops() override { return this; }

 private:
  // The norm backwards' din_keep: din_accum's values before the update (a plain copy here).
  void keep_before_update(TensorView din_keep, TensorView din_accum, const char* op) {
    if (din_keep.empty()) return;
    check_din_keep(din_keep, din_accum, op);
    copy(din_keep, din_accum);
  }

  // alloc() may be called from several host threads (e.g. a comm thread); the size table
  // behind peak_bytes() is guarded.
  mutable std::mutex mutex_;
  std::unordered_map<void*, size_t> sizes_;
  size_t live_bytes_ = 0;
  size_t peak_bytes_ = 0;
};

}  // namespace trident
