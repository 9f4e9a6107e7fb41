// Backend: memory, the compute stream and one method per op family. The model is written once
// against this interface; CpuBackend (fp32, the oracle) and CudaBackend (bf16 activations and
// parameters, fp32 gradients and optimizer state) implement it.
//
// Conventions (llm.c style):
//  - destination first; shapes as explicit ints: B batch, T time, C channels, NH heads,
//    HS head size, NKV key/value heads (grouped-query attention), F the SwiGLU width,
//    N = B*T rows, V vocabulary; K/M the inner/outer GEMM sizes.
//  - "act" tensors use compute_dtype(); "f32" tensors are always fp32.
//  - gradient contract: parameter gradients (f32) accumulate (+=) across micro-batches;
//    activation gradients are written (=), except arguments named *_accum, which accumulate.
//  - an empty TensorView means "not given" where an argument is optional.
//  - integer index arrays (tokens, targets, doc_start) live in backend memory.
//  - doc_start (B, T) int32, or nullptr: packed sequences (data.pack). Position t of sequence b
//    belongs to the document (packed record) that starts at position doc_start[b T + t] <= t of
//    the sequence; doc_start is nondecreasing along t. Positions restart at 0 in each document and
//    attention stays inside it. nullptr: every sequence is one document (position t is t).
//  - every op is queued on stream(); only copy_to_host and synchronize wait.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trident/core/error.hpp"
#include "trident/core/op_time.hpp"
#include "trident/core/stream.hpp"
#include "trident/core/tensor.hpp"

namespace trident {

class PeerOps;

struct AdamWArgs {
  float lr = 0;
  float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;
  float weight_decay = 0;     // decoupled: master *= 1 - lr*weight_decay
  float grad_scale = 1;       // gradients are multiplied by this first (clipping, loss scale)
  float bias_correction1 = 1; // 1 - beta1^t
  float bias_correction2 = 1; // 1 - beta2^t
};

// Direct preference optimisation (Rafailov et al.) with cDPO's label smoothing, or IPO (Azar et
// al.), for dpo_loss.
enum class DpoLoss : int32_t { Sigmoid, Ipo };
struct DpoArgs {
  float beta = 0.1f;              // strength of the implicit KL penalty
  float label_smoothing = 0;      // eps: the share of pairs taken to be mislabelled (sigmoid only)
  float scale = 1;                // the row weights are d(scale * sum of pair losses)/d(sequence NLL)
  DpoLoss loss = DpoLoss::Sigmoid;
};

// Online RL's clipped policy-ratio objective with a KL penalty (task grpo), for policy_loss.
struct PolicyArgs {
  float clip_eps = 0.2f;   // the ratio is clipped to [1 - clip_eps, 1 + clip_eps]
  float kl_beta = 0;       // weight of the k3 KL estimate to the reference
  float scale = 1;         // the weights are d(scale * loss)/d(token NLL)
};

// PPO's clipped value loss (task ppo's value model), for value_fwd.
struct ValueArgs {
  float clip = 0.2f;       // a value moves at most this far from its rollout-time value before the clipped branch
  float scale = 1;         // dvalues are d(scale * loss)/d(value)
};

// Floats per row of sample_shard's stats.
constexpr int kSampleStats = 5;

// The target id of a position the cross-entropy ignores (loss 0, gradient 0); any negative id is.
constexpr int32_t kIgnoredTarget = -1;

// One entry of a multi-tensor op's table (sum_squares_multi, adamw_multi), a piece of a tensor:
// n elements at offset `flat` of the parameter and gradient buffers and at offset `state` of the
// optimizer state; decay != 0 when weight decay applies. Tables of pieces live in backend memory as I32 tensors of
// kPieceWords words per piece (written once with copy_from_host).
struct MultiTensorEntry {
  int64_t flat, state, n, decay;
};
constexpr size_t kPieceWords = sizeof(MultiTensorEntry) / sizeof(int32_t);

// The pieces of such a table, checked to be I32 words in whole pieces; their number is
// table.numel / kPieceWords. `op` names the caller in the error.
inline const MultiTensorEntry* pieces_in(TensorView table, const char* op) {
  TRIDENT_CHECK(table.dtype == DType::I32 && table.numel % kPieceWords == 0,
                str(op, ": pieces must be an I32 table of ", kPieceWords, " words per piece"));
  return table.as<MultiTensorEntry>();
}

// The rotary table of rope_fwd/rope_bwd, built once on the host and uploaded (so every backend
// reads the same values): cos_sin (T, HS) f32, row t = [cos(t f_i) for i < HS/2 | sin(t f_i)],
// f_i = 1 / theta^(2i / HS), with f_i and the angle t f_i rounded to fp32 as Hugging Face's
// LlamaRotaryEmbedding computes them. HS must be even.
void rope_table(float* cos_sin, int T, int HS, float theta);

// The argument checks every backend's rope_fwd/rope_bwd makes (`op` names the caller): an even
// head size, heads to rotate, and table rows for positions pos0 .. pos0 + T - 1.
inline void check_rope_args(TensorView rope, int T, int NH, int NKV, int HS, int pos0, const char* op) {
  TRIDENT_CHECK(HS > 0 && HS % 2 == 0 && NH > 0 && NKV > 0,
                str(op, ": needs an even head size and NH, NKV > 0 (HS ", HS, ", NH ", NH, ", NKV ", NKV, ")"));
  TRIDENT_CHECK(rope.dtype == DType::F32, str(op, ": the rope table is ", dtype_name(rope.dtype), ", expected f32"));
  TRIDENT_CHECK(pos0 >= 0 && rope.numel % HS == 0 && rope.numel / HS >= static_cast<size_t>(pos0) + T,
                str(op, ": the rope table (", rope.numel, " floats) has no ", HS, "-wide rows for positions ", pos0,
                    "..", pos0 + T - 1));
}

// The check every backend's layernorm_bwd/rmsnorm_bwd makes of a given din_keep: a separate buffer
// of din_accum's size (`op` names the caller).
inline void check_din_keep(TensorView din_keep, TensorView din_accum, const char* op) {
  TRIDENT_CHECK(din_keep.data != din_accum.data && din_keep.numel == din_accum.numel,
                str(op, ": din_keep must be a separate buffer of din_accum's size"));
}

// What a steady-state training step must not do, counted since the backend was made: device
// allocations (including op scratch growth), GEMM plans (cuBLASLt descriptors and algorithm
// searches) built, and host waits for the device. `trident bench` prints the timed steps' share.
struct BackendCounters {
  long allocations = 0, gemm_plans = 0, host_waits = 0;
};

// SM clock, power and temperature of a backend's device over a stretch of work, sampled in the
// background (GPU backends, through NVML). Under a power cap the clock, and so every rate, moves
// with power and temperature: two busy GPUs of one H200 node at its 700 W cap clocked 1.4-2.8%
// lower than one alone. count is the number of clock samples, 0 where nothing
// was sampled (note says why); power_w_median is 0 where the device reports no power.
struct GpuTelemetry {
  int count = 0;
  double sm_mhz_median = 0, sm_mhz_min = 0, power_w_median = 0, temp_c_max = 0;
  std::string note;
};

// Runs a callable that queues the same ops with the same arguments on every call (only the
// contents of the memory they use change between calls). The CUDA backend runs the first call as
// it is (GEMM plans are built and scratch grows outside any capture), captures the second into a
// CUDA graph and launches that graph from then on: one launch instead of one per op. Backends
// without graphs run the callable every time. A replay must not outlive what its ops use.
class StreamReplay {
 public:
  virtual ~StreamReplay() = default;
  virtual void run(const std::function<void()>& queue_ops) = 0;
};

// The replay of a backend without graphs: each call queues the ops again.
class PlainReplay final : public StreamReplay {
 public:
  void run(const std::function<void()>& queue_ops) override { queue_ops(); }
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;
  virtual DType compute_dtype() const = 0;
  virtual bool is_device() const = 0;   // memory is not host-addressable

  // ---- memory and stream
  virtual void* alloc(size_t bytes) = 0;   // zero-filled; fatal() when out of memory
  virtual void release(void* p) = 0;
  virtual void zero(TensorView t) = 0;
  virtual void copy_to_host(void* dst, TensorView src) = 0;       // waits for queued work
  // src may be reused or freed as soon as this returns (the device copy is ordered on the stream).
  virtual void copy_from_host(TensorView dst, const void* src) = 0;
  // dst = src elementwise (same numel); converts when dtypes differ (fp32 <-> bf16).
  virtual void copy(TensorView dst, TensorView src) = 0;
  virtual Stream stream() = 0;
  virtual void synchronize() = 0;
  virtual size_t peak_bytes() const = 0;  // high-water mark of alloc()

  // ---- host memory and transfers beside the compute stream (parallel.offload_optimizer)
  // Host memory, zero-filled, that the transfers below move without a staging copy (page-locked
  // on GPUs; ordinary memory on a host backend). Not counted in peak_bytes().
  virtual void* alloc_host(size_t bytes) = 0;
  virtual void release_host(void* p) = 0;   // waits for the transfers queued so far
  // The queue of the transfers, for a communicator's CommWork::wait to order it after a collective.
  virtual Stream transfer_stream() = 0;
  // Queue a copy between backend memory and alloc_host() memory on the transfer queue, after the
  // work queued on stream() so far, and return at once (a host backend copies now). The host may
  // read dst (write src) once join_transfers() and a host wait on stream() followed.
  virtual void copy_to_host_async(void* dst, TensorView src) = 0;
  virtual void copy_from_host_async(TensorView dst, const void* src) = 0;
  // Orders the work queued on stream() from now on after every transfer queued so far.
  virtual void join_transfers() = 0;

  // ---- embedding (vocab-parallel: this rank holds rows [vocab_start, vocab_start + v_local))
  // out (B,T,C) act = wte[tok - vocab_start] if the token is local, else 0; + wpe[p] if wpe given,
  // p the position in the document (t, or t - doc_start[b T + t] with doc_start).
  virtual void encoder_fwd(TensorView out, const int32_t* tokens, TensorView wte, TensorView wpe,
                           int B, int T, int C, int vocab_start, int v_local, const int32_t* doc_start) = 0;
  // dwte (v_local,C) f32 += rows of local tokens; dwpe (T,C) f32 += the rows of each position p
  // (if given). Deterministic: no atomics whose order changes the result.
  virtual void encoder_bwd(TensorView dwte, TensorView dwpe, TensorView dout, const int32_t* tokens,
                           int B, int T, int C, int vocab_start, int v_local, const int32_t* doc_start) = 0;

  // ---- LayerNorm
  // out (N,C) act; mean, rstd (N) f32; w, b (C) act.
  virtual void layernorm_fwd(TensorView out, TensorView mean, TensorView rstd, TensorView in,
                             TensorView w, TensorView b, int N, int C, float eps) = 0;
  // The residual add fused with the LayerNorm that follows it: sum (N,C) act = a + residual (sum
  // may alias a), then out = LayerNorm(sum). Backends may fuse; the default composes.
  virtual void add_layernorm_fwd(TensorView sum, TensorView out, TensorView mean, TensorView rstd, TensorView a,
                                 TensorView residual, TensorView w, TensorView b, int N, int C, float eps) {
    add(sum, a, residual);
    layernorm_fwd(out, mean, rstd, sum, w, b, N, C, eps);
  }
  // din_accum (N,C) act += dL/din (the residual stream's gradient); dw, db (C) f32 +=. dsum (C)
  // f32, if given, += column sums of din_accum after the update: the bias gradient of the linear
  // layer whose output gradient the residual stream's is, summed while the rows are on chip.
  // din_keep (N,C) act, if given (not aliasing din_accum), gets din_accum as it was before the
  // update, written as the rows are read: the residual gradient a deferred weight pass still needs.
  virtual void layernorm_bwd(TensorView din_accum, TensorView dw, TensorView db, TensorView dsum, TensorView dout,
                             TensorView in, TensorView w, TensorView mean, TensorView rstd, int N, int C,
                             TensorView din_keep = {}) = 0;

  // ---- RMSNorm (Llama): out = in * rstd * w, rstd = 1 / sqrt(mean(in^2) + eps) in fp32 (Hugging
  // Face's LlamaRMSNorm, computed in fp32 and rounded to act once).
  // out (N,C) act; rstd (N) f32; in (N,C) act; w (C) act.
  virtual void rmsnorm_fwd(TensorView out, TensorView rstd, TensorView in, TensorView w, int N, int C,
                           float eps) = 0;
  // The residual add fused with the RMSNorm that follows it: sum (N,C) act = a + residual (sum may
  // alias a), then out = RMSNorm(sum). Backends may fuse; the default composes.
  virtual void add_rmsnorm_fwd(TensorView sum, TensorView out, TensorView rstd, TensorView a, TensorView residual,
                               TensorView w, int N, int C, float eps) {
    add(sum, a, residual);
    rmsnorm_fwd(out, rstd, sum, w, N, C, eps);
  }
  // din_accum (N,C) act += dL/din (the residual stream's gradient); dw (C) f32 +=. in is the
  // forward's input (add_rmsnorm_fwd's sum), rstd its saved statistics. din_keep as for
  // layernorm_bwd.
  virtual void rmsnorm_bwd(TensorView din_accum, TensorView dw, TensorView dout, TensorView in, TensorView w,
                           TensorView rstd, int N, int C, TensorView din_keep = {}) = 0;

  // ---- elementwise
  virtual void add(TensorView out, TensorView a, TensorView b) = 0;      // out = a + b (act)
  virtual void gelu_fwd(TensorView out, TensorView in) = 0;              // tanh approximation
  virtual void gelu_bwd(TensorView din, TensorView dout, TensorView pre) = 0;  // din = dout*gelu'(pre)

  // SwiGLU over the fused gate/up projection: in (N, 2F) act holds each row as [gate (F) | up (F)]
  // (the fused GEMM's weight stacks W_gate over W_up; under TP each rank's shard stacks its own
  // slices the same way), out (N,F) act = silu(gate) * up.
  virtual void swiglu_fwd(TensorView out, TensorView in, int N, int F) = 0;
  // din (N, 2F) act = [dgate | dup] from dout (N,F) and the forward's in; din may alias in.
  virtual void swiglu_bwd(TensorView din, TensorView dout, TensorView in, int N, int F) = 0;

  // ---- GEMMs (nn.Linear convention: w is (out_features, in_features))
  // out (N,M) act = in (N,K) @ w (M,K)^T + bias (M) if given.
  virtual void matmul_fwd(TensorView out, TensorView in, TensorView w, TensorView bias,
                          int N, int K, int M) = 0;
  // pre (N,M) = in @ w^T + bias; out = gelu(pre). Backends may fuse; the default composes.
  virtual void matmul_gelu_fwd(TensorView out, TensorView pre, TensorView in, TensorView w,
                               TensorView bias, int N, int K, int M) {
    matmul_fwd(pre, in, w, bias, N, K, M);
    gelu_fwd(out, pre);
  }
  // din (N,K) act = dout @ w; dw (M,K) f32 += dout^T @ in; dbias (M) f32 += sum over rows (each if given).
  virtual void matmul_bwd(TensorView din, TensorView dw, TensorView dbias, TensorView dout,
                          TensorView in, TensorView w, int N, int K, int M) = 0;
  // As matmul_bwd through a GELU: din (N,K) = (dout @ w) * gelu'(pre), pre (N,K) the GELU's
  // input (din may not alias pre). Backends may fuse; the default composes.
  virtual void matmul_gelu_bwd(TensorView din, TensorView dw, TensorView dbias, TensorView dout, TensorView in,
                               TensorView w, TensorView pre, int N, int K, int M) {
    matmul_bwd(din, dw, dbias, dout, in, w, N, K, M);
    gelu_bwd(din, din, pre);
  }

  // ---- causal self-attention, softmax scale 1/sqrt(HS), multi-head (NKV = NH) or grouped-query
  // qkv (B, T, NH + 2 NKV, HS) act: per position NH query heads, then NKV key heads, then NKV value
  // heads (GPT-2's (B, T, 3, NH, HS) is the case NKV = NH); NKV divides NH and query head h reads
  // key/value head h / (NH / NKV). out (B,T,NH,HS) act; lse (B,NH,T) f32 = logsumexp of each score row.
  // With doc_start (see the conventions), query t attends keys doc_start[b T + t] .. t only
  // (document masking: block-diagonal causal attention); nullptr takes the unpacked path.
  virtual void attention_fwd(TensorView out, TensorView lse, TensorView qkv, int B, int T, int NH, int NKV,
                             int HS, const int32_t* doc_start) = 0;
  // dqkv (same layout as qkv) act = gradient of the loss w.r.t. qkv, from dout (B,T,NH,HS), the
  // key/value gradients summed over each group's query heads; dbias ((NH + 2 NKV) HS) f32, if
  // given, += column sums of dqkv over the B T rows: the gradient of a bias added to qkv, which a
  // backend can sum while dqkv is still on chip. doc_start as the forward's. With rope (a
  // rope_table, T rows at least), the q and k gradients leave rotated back as rope_bwd (pos0 = 0)
  // after this call would leave them: the backward of rope_fwd before the attention, fused where
  // the backend can (rotated in fp32 before the one rounding); not with dbias.
  virtual void attention_bwd(TensorView dqkv, TensorView dbias, TensorView dout, TensorView qkv, TensorView out,
                             TensorView lse, int B, int T, int NH, int NKV, int HS, const int32_t* doc_start,
                             TensorView rope = {}) = 0;

  // ---- rotary position embedding (Hugging Face rotate_half convention: the two halves of a head
  // are rotated against each other, element d with d + HS/2, not interleaved pairs).
  // In place on the q and k heads of qkv (B, T, NH + 2 NKV, HS) act (NH query heads, then NKV
  // key heads, then NKV value heads per position; value heads are untouched), at positions
  // pos0 .. pos0 + T - 1 (with doc_start, row t is at position pos0 + t - doc_start[b T + t]).
  // rope (T_table, HS) f32 is a table from rope_table(), T_table >= pos0 + T.
  virtual void rope_fwd(TensorView qkv, TensorView rope, int B, int T, int NH, int NKV, int HS, int pos0,
                        const int32_t* doc_start) = 0;
  // The inverse rotation, in place on the q and k parts of the gradient dqkv (same layout).
  virtual void rope_bwd(TensorView dqkv, TensorView rope, int B, int T, int NH, int NKV, int HS, int pos0,
                        const int32_t* doc_start) = 0;

  // ---- incremental decoding with a KV cache (generation)
  // qkv (N, NH + 2 NKV, HS) act holds N new tokens; token i belongs to cache slot rows[2i] at
  // position rows[2i + 1] (rows (N, 2) I32 in backend memory; no two tokens share a slot and a
  // position). Every token's key and value are stored into k_cache, v_cache (S, NKV, Tmax, HS) act
  // first; then out (N, NH, HS) act is causal attention of each token's query over its slot's
  // positions [0, its position], which the slot's sequence must have written (now or before). So
  // the new tokens of many sequences of different lengths, several per sequence (a prompt) or one
  // (a step), go in one call. The arithmetic matches attention_fwd, so decoding with the cache
  // reproduces a full forward. A token at slot -1 is padding (a decode step run on a fixed row
  // count): nothing is stored and its out row is zero.
  virtual void attention_decode(TensorView out, TensorView k_cache, TensorView v_cache, TensorView qkv,
                                const int32_t* rows, int N, int S, int Tmax, int NH, int NKV, int HS) = 0;

  // ---- sampling (generation) from a vocab-parallel shard of logits (N, v_local) act, whose first
  // v_valid local columns are the vocabulary ids vocab_start + j. Row i is sequence keys[2i] at
  // position keys[2i + 1] (keys (N, 2) I32 in backend memory). A token's score is logit /
  // temperature + gumbel_at(seed, sequence, position, id) (rng.hpp), whose argmax over the
  // vocabulary is a draw from softmax(logits / temperature) that depends on those keys only; with
  // temperature 0 the score is the logit (greedy). stats (N, kSampleStats) f32 = [max logit,
  // sum exp(logit - max), best score, its id, its logit], the best the highest score with ties to
  // the lowest id ([-inf, 0, -inf, -1, 0] for a shard without a valid column). The model
  // combines the TP shards' rows (combine_sample_stats, generator.hpp).
  virtual void sample_shard(TensorView stats, TensorView logits, const int32_t* keys, uint64_t seed, float temperature,
                            int N, int v_local, int v_valid, int vocab_start) = 0;

  // ---- vocab-parallel cross-entropy over a shard of logits (N, v_local) act; only the first
  // v_valid local columns are real vocabulary (the rest is padding and is ignored).
  // The model reduces rowmax (Max) and stats (Sum) over TP between these calls.
  // A target < 0 (kIgnoredTarget: a masked position of supervised fine-tuning, or padding) is
  // ignored: its row's loss is 0 and its row of the gradient is 0 in every shard; rowmax and stats
  // are computed for it as for any row (and not used).
  // rowmax (N) f32 = max over valid local columns (-inf when there are none).
  virtual void xent_max(TensorView rowmax, TensorView logits, int N, int v_local, int v_valid) = 0;
  // stats (N,2) f32 = [sum_j exp(logit_j - rowmax), logit of the target if it is local else 0].
  virtual void xent_stats(TensorView stats, TensorView logits, TensorView rowmax, const int32_t* targets,
                          int N, int v_local, int v_valid, int vocab_start) = 0;
  // losses (N) f32 = log(stats0) + rowmax - stats1 (0 for an ignored target). Then logits are
  // overwritten with dloss * (softmax - onehot(target)) (0 in padding columns, and in every column
  // of an ignored target's row), in the logits' dtype.
  virtual void xent_bwd(TensorView losses, TensorView logits, TensorView rowmax, TensorView stats,
                        const int32_t* targets, int N, int v_local, int v_valid, int vocab_start,
                        float dloss) = 0;

  // The softmax's entropy -sum_j p_j log p_j (online RL's metric), vocab-parallel: entropy_sums
  // (N,2) f32 = [sum_j exp(z_j - rowmax), sum_j exp(z_j - rowmax) (z_j - rowmax)] over the valid
  // local columns, rowmax the whole vocabulary's (reduced over TP first); summed over TP, a row's
  // entropy is log(s0) - s1 / s0. The logits are left as they are.
  virtual void xent_entropy_sums(TensorView entropy_sums, TensorView logits, TensorView rowmax, int N, int v_local,
                                 int v_valid) = 0;

  // The three calls above in one for an unsharded vocabulary (tp = 1, vocab_start 0): rowmax and
  // stats are scratch of the composition. Backends may fuse; the default composes.
  virtual void xent_fused(TensorView losses, TensorView logits, TensorView rowmax, TensorView stats,
                          const int32_t* targets, int N, int v_local, int v_valid, float dloss) {
    xent_max(rowmax, logits, N, v_local, v_valid);
    xent_stats(stats, logits, rowmax, targets, N, v_local, v_valid, 0);
    xent_bwd(losses, logits, rowmax, stats, targets, N, v_local, v_valid, 0, dloss);
  }

  // ---- sequence-level losses over the token losses of the cross-entropy (preference optimisation)
  // out (S) f32 = the sums of the S consecutive groups of len values of in (S*len) f32.
  virtual void segment_sum(TensorView out, TensorView in, int S, int len) = 0;
  // x (rows, cols) act: row r *= w[r], w (rows) f32 (a cross-entropy gradient weighted per row).
  virtual void scale_rows(TensorView x, TensorView w, int rows, int cols) = 0;
  // DPO over `pairs` pairs. policy_nll and ref_nll (2*pairs) f32 hold each sequence's summed token
  // losses (negative log-probabilities of its trained targets) under the policy and the reference;
  // sequence 2i is pair i's chosen response, 2i + 1 its rejected one. With the implicit rewards
  // r = beta * (ref_nll - policy_nll) and z_i = r_2i - r_2i+1, the sigmoid loss of a pair is
  // -(1 - eps) log sigmoid(z) - eps log sigmoid(-z). IPO's is (h - 1/(2 beta))^2 with
  // h = (ref_nll - policy_nll)_2i / n_2i - (ref_nll - policy_nll)_2i+1 / n_2i+1, n_s the count of
  // sequence s's trained targets (targets (2*pairs*T) >= 0; at least 1), as TRL normalises it.
  // acc (5) f32 += [sum of pair losses, count of pairs with z > 0, sum of z, sum of chosen rewards,
  // sum of rejected rewards] (LossSums' order; the same metrics for both losses).
  // row_weights (2*pairs*T) f32 = for each sequence's T rows, d(scale * loss of its pair)/d(its
  // policy_nll): the weight of its tokens' cross-entropy gradients (not written when empty).
  virtual void dpo_loss(TensorView acc, TensorView row_weights, TensorView policy_nll, TensorView ref_nll,
                        const int32_t* targets, int pairs, int T, const DpoArgs& a) = 0;
  // GRPO/PPO's policy loss over N token positions. nll (N) f32 holds each position's token loss
  // under the policy (-logp of its target; 0 where ignored), old_logp (N) the generation-time
  // log-probabilities, coef (N) each token's weight in the batch's mean (0 outside the answers,
  // which add nothing), coef_adv (N) coef times the token's advantage A, and ref_nll (N), when
  // given (a.kl_beta > 0), the frozen reference's token losses. With rho = exp(-nll - old_logp) and
  // d = nll - ref_nll (log ref - log pi), an answer token's loss is
  //   coef * (-min(rho A, clip(rho, 1 - eps, 1 + eps) A) + beta (exp(d) - d - 1)).
  // entropy_sums (N,2) f32, when given, are each position's xent_entropy_sums (summed over TP).
  // acc (5) f32 += [sum of token losses, answer tokens whose minimum took the clipped branch, sum of
  // k3 = exp(d) - d - 1 over answer tokens, sum of the policy's entropies log(s0) - s1 / s0 over
  // answer tokens (0 without entropy_sums), 0]; weights (N) f32, if given, = a.scale * d(loss)/d(nll):
  // the weight of each position's cross-entropy gradient (the entropy is a metric, not in the loss).
  virtual void policy_loss(TensorView acc, TensorView weights, TensorView nll, TensorView old_logp, TensorView coef,
                           TensorView coef_adv, TensorView ref_nll, TensorView entropy_sums, int N,
                           const PolicyArgs& a) = 0;

  // ---- reward head (task reward): B sequences of T positions in pairs, sequence 2i the chosen
  // and 2i+1 the rejected answer of pair i. Sequence b is scored at its last token: position
  // p_b = min(t_b + 1, T - 1), t_b the last t with targets[b*T + t] >= 0 (the last trained
  // target, so token t_b + 1 ends the answer). A pair either of whose sequences has no trained
  // target is left out: it adds nothing and its gradients are 0. lnf (B*T, C) act holds the final
  // norm's output, w (C) act the score weight.
  // scores (B) f32 = lnf[b, p_b] . w (0 for a sequence without a trained target); stats (3) f32 += [sum over pairs of -log sigmoid(d_i), pairs
  // with d_i > 0, sum of d_i], d_i = scores[2i] - scores[2i+1]; dscores (B) f32, if given,
  // = dloss * d(-log sigmoid(d_i))/d(scores). B is even.
  virtual void reward_fwd(TensorView scores, TensorView dscores, TensorView stats, TensorView lnf, TensorView w,
                          const int32_t* targets, int B, int T, int C, float dloss) = 0;
  // dlnf (B*T, C) act = dscores[b] * w at row (b, p_b), 0 in every other row; dw (C) f32 +=
  // sum over b of dscores[b] * lnf[b, p_b].
  virtual void reward_bwd(TensorView dlnf, TensorView dw, TensorView dscores, TensorView lnf, TensorView w,
                          const int32_t* targets, int B, int T, int C) = 0;

  // ---- value head (task ppo's value model): a value at every one of N positions, v_n = lnf[n] . w,
  // lnf (N, C) act the final norm's output, w (C) act the score weight; values (N) f32. With coef
  // given (N f32: each position's weight in the batch's mean, 0 outside the answers, which add
  // nothing) and old_values, returns (N) f32 (the rollout's values and GAE returns), also PPO's
  // clipped value loss, per answer position
  //   coef * 0.5 max((v - R)^2, (v_old + clip(v - v_old, -a.clip, a.clip) - R)^2):
  // acc (5) f32 += [sum of position losses, answer positions whose maximum took the clipped branch
  // (the second square larger), sum of coef * (v - R)^2, 0, 0]; dvalues (N) f32, if given,
  // = a.scale * d(loss)/d(v) (0 through the clipped branch once |v - v_old| >= a.clip).
  virtual void value_fwd(TensorView values, TensorView dvalues, TensorView acc, TensorView lnf, TensorView w,
                         TensorView old_values, TensorView returns, TensorView coef, int N, int C,
                         const ValueArgs& a) = 0;
  // dlnf (N, C) act = dvalues[n] * w in row n; dw (C) f32 += sum over n of dvalues[n] * lnf[n].
  virtual void value_bwd(TensorView dlnf, TensorView dw, TensorView dvalues, TensorView lnf, TensorView w, int N,
                         int C) = 0;

  // ---- reductions and optimizer
  virtual void sum_squares(TensorView acc, TensorView x) = 0;  // acc (1) f32 += sum(x^2)
  virtual void sum(TensorView acc, TensorView x) = 0;          // acc (1) f32 += sum(x), x f32
  virtual void scale(TensorView x, float s) = 0;               // x *= s (f32)
  virtual void accumulate(TensorView acc, TensorView x) = 0;   // acc += x (f32)
  // AdamW over n elements (PyTorch semantics): grad, master, m, v f32; param (act) = master
  // converted to the compute dtype when given.
  virtual void adamw(TensorView param, TensorView master, TensorView m, TensorView v, TensorView grad,
                     const AdamWArgs& a) = 0;

  // Multi-tensor forms (one pass over many tensors; `pieces` as described at MultiTensorEntry):
  // acc (1) f32 += sum of squares of x (f32) over every piece at its flat offset.
  virtual void sum_squares_multi(TensorView acc, TensorView x, TensorView pieces) = 0;
  // AdamW over every piece: param, grad at the flat offset, master, m, v at the state offset;
  // a.weight_decay applies to pieces with decay set. With norm_sq (1 f32, the squared global
  // gradient norm) and clip > 0, gradients are also scaled by min(1, clip / (sqrt(norm_sq) + 1e-6))
  // (torch.nn.utils.clip_grad_norm_), read on the device so the host need not wait for it.
  virtual void adamw_multi(TensorView param, TensorView master, TensorView m, TensorView v, TensorView grad,
                           TensorView pieces, const AdamWArgs& a, TensorView norm_sq, float clip) = 0;

  // The ops of the two-rank fused TP sums that read the other rank's partial (peer_ops.hpp), or
  // null where this backend has none.
  virtual PeerOps* peer_ops() { return nullptr; }

  // ---- concurrency: ops queued between side_begin() and side_end() go to a second queue that
  // starts after everything queued so far; the ops queued after side_end() may run beside them
  // until side_join(), after which every op waits for them. Side ops must not be GEMMs (they
  // share one cuBLASLt workspace), communication or host transfers, and must not touch what
  // the ops beside them write. Backends without concurrency run everything in order.
  virtual void side_begin() {}
  virtual void side_end() {}
  virtual void side_join() {}

  // GEMMs queued from now on leave `sms` streaming multiprocessors free (0: they use all) for a
  // collective that runs beside them. Each margin has its own (deterministic) algorithm choice,
  // which may round differently from another margin's. Backends without that control ignore it.
  virtual void set_gemm_sm_margin(int /*sms*/) {}

  // ---- replay: a fixed sequence of queued ops run again and again, only the contents of the
  // memory it reads changing (a decode step). make_replay() returns its runner (see StreamReplay).
  virtual std::unique_ptr<StreamReplay> make_replay() { return std::make_unique<PlainReplay>(); }

  // ---- profiling: while on, every op (and every wait of a communicator on this process's
  // GPU) is timed on the stream; take_profile() waits for them and returns the sums. Backends
  // without timers return nothing.
  virtual BackendCounters counters() const { return {}; }
  virtual void set_profiling(bool /*on*/) {}
  virtual std::vector<OpTime> take_profile() { return {}; }

  // ---- device telemetry: samples taken in the background from start to stop (GpuTelemetry).
  // Backends without a device return none.
  virtual void start_telemetry() {}
  virtual GpuTelemetry stop_telemetry() { return GpuTelemetry{0, 0, 0, 0, 0, "no device"}; }
};

// An owned allocation of a backend (one allocation per kind of memory): its memory (alloc), or
// host memory for its transfers (alloc_host) where `host` is set.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend& be, size_t bytes, bool host = false)
      : be_(&be), ptr_(bytes ? (host ? be.alloc_host(bytes) : be.alloc(bytes)) : nullptr), bytes_(bytes), host_(host) {}
  ~Buffer() { reset(); }
  Buffer(Buffer&& o) noexcept : be_(o.be_), ptr_(o.ptr_), bytes_(o.bytes_), host_(o.host_) { o.ptr_ = nullptr; }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      be_ = o.be_; ptr_ = o.ptr_; bytes_ = o.bytes_; host_ = o.host_;
      o.ptr_ = nullptr;
    }
    return *this;
  }
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  TensorView view(DType t) const { return TensorView(ptr_, t, bytes_ / dtype_size(t)); }

 private:
  void reset() {
    if (ptr_) host_ ? be_->release_host(ptr_) : be_->release(ptr_);
    ptr_ = nullptr;
  }
  Backend* be_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  bool host_ = false;
};

}  // namespace trident
