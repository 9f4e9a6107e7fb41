// cuBLASLt GEMMs for row-major trident tensors, with descriptors, layouts and the algorithm
// chosen once per shape (the fastest of those that match the heuristic's first choice bit for
// bit); the bias gradient is our own deterministic column sum.
#include <algorithm>
#include <cstdio>
#include <type_traits>

#include "elementwise.cuh"
#include "matmul.cuh"
#include "reduce.cuh"
#include "trident/backend/cuda_backend.hpp"

namespace trident::gpu {
namespace {

// Largest power of two up to 16 that divides the address.
int alignment_of(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  int al = 16;
  while (al > 1 && a % al != 0) al /= 2;
  return al;
}

bool has_bias(cublasLtEpilogue_t e) { return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS; }
bool has_aux(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DGELU;
}

template <class T>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value) {
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

}  // namespace

size_t Matmul::KeyHash::operator()(const Key& k) const {
  size_t h = static_cast<size_t>(k.kind);
  for (long long v : {static_cast<long long>(k.N), static_cast<long long>(k.K), static_cast<long long>(k.M),
                      static_cast<long long>(k.epilogue), static_cast<long long>(k.alignment),
                      static_cast<long long>(k.sm_target)})
    h = h * 1000003u ^ std::hash<long long>()(v);
  return h;
}

Matmul::Matmul(bool autotune, bool log) : autotune_(autotune), log_(log) {
  CUBLAS_CHECK(cublasLtCreate(&handle_));
  CUDA_CHECK(cudaMalloc(&workspace_, kGemmWorkspaceBytes));
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device));
}

void Matmul::set_sm_margin(int sms) {
  TRIDENT_CHECK(sms >= 0 && sms < sm_count_,
                str("matmul: an SM margin of ", sms, " leaves no SM of the device's ", sm_count_));
  sm_target_ = sms == 0 ? 0 : sm_count_ - sms;
}

Matmul::~Matmul() {
  // Destructors must not abort: teardown errors are ignored (the process is ending or the
  // backend is going away; nothing can be recovered).
  for (auto& entry : plans_) {
    Plan& p = entry.second;
    static_cast<void>(cublasLtMatrixLayoutDestroy(p.a));
    static_cast<void>(cublasLtMatrixLayoutDestroy(p.b));
    static_cast<void>(cublasLtMatrixLayoutDestroy(p.d));
    static_cast<void>(cublasLtMatmulDescDestroy(p.desc));
  }
  static_cast<void>(cudaFree(workspace_));
  static_cast<void>(cublasLtDestroy(handle_));
}

const Matmul::Plan& Matmul::plan(const Key& key, const Operands& ops, float beta, cudaStream_t stream) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;

  // A row-major (R, C) matrix is a column-major (C, R) one with the same leading dimension, so
  // each GEMM is set up as its transpose: out^T (M,N) = op(w) (M,K) . in^T (K,N), etc.
  const int N = key.N, K = key.K, M = key.M;
  // (rows, cols) of A, B and D as cuBLASLt stores them (column-major, dense: ld = rows), and
  // the transposes.
  struct Mat {
    int rows, cols;
  } a{}, b{}, d{};
  cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
  cudaDataType_t d_type = CUDA_R_16BF;
  switch (key.kind) {
    case Kind::kForward:  // out^T (M,N) = A^T (M,K) . in^T (K,N); A = w, stored (K,M)
      a = {K, M}, b = {K, N}, d = {M, N}, trans_a = CUBLAS_OP_T;
      break;
    case Kind::kInputGrad:  // din^T (K,N) = w (K,M) . dout^T (M,N)
      a = {K, M}, b = {M, N}, d = {K, N};
      break;
    case Kind::kWeightGrad:  // dw^T (K,M) = in^T (K,N) . B^T (N,M); B = dout^T, stored (M,N)
      a = {K, N}, b = {M, N}, d = {K, M}, trans_b = CUBLAS_OP_T, d_type = CUDA_R_32F;
      break;
  }

  Plan p;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set_desc(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(trans_a));
  set_desc(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(trans_b));
  set_desc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<uint32_t>(key.epilogue));
  if (key.sm_target > 0) set_desc(p.desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, static_cast<int32_t>(key.sm_target));
  // The heuristic reads the bias and aux addresses (not their data) to judge alignment.
  if (has_bias(key.epilogue)) set_desc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, ops.bias);
  if (has_aux(key.epilogue)) {
    set_desc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, ops.aux);
    // The aux matrix (GELU input) has D's shape.
    set_desc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, static_cast<int64_t>(d.rows));
  }
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, a.rows, a.cols, a.rows));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, b.rows, b.cols, b.rows));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.d, d_type, d.rows, d.cols, d.rows));

  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t workspace_bytes = kGemmWorkspaceBytes;
  const uint32_t align = static_cast<uint32_t>(key.alignment);
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                                    sizeof(workspace_bytes)));
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align)));
  cublasLtMatmulHeuristicResult_t results[kAutotuneCandidates] = {};
  int n_results = 0;
  const int wanted = autotune_ ? kAutotuneCandidates : 1;
  // NOT_SUPPORTED with no result is an answer (no algorithm for this case), not an error.
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.d, p.d, pref, wanted, results, &n_results);
  CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
  if (status != CUBLAS_STATUS_NOT_SUPPORTED) CUBLAS_CHECK(status);
  p.found = status == CUBLAS_STATUS_SUCCESS && n_results > 0;
  if (p.found) p.algo = n_results > 1 ? fastest(key, p, results, n_results, ops, beta, stream) : results[0].algo;
  return plans_.emplace(key, p).first->second;
}

namespace {

__device__ uint64_t mix64(uint64_t x) {   // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// acc += sum over the 2-byte units i of mix64(i, unit i): a fingerprint of the bytes that does
// not depend on the order in which the sum is taken.
__global__ void fingerprint_kernel(unsigned long long* acc, const uint16_t* units, size_t n) {
  uint64_t h = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    h += mix64(i * 0x9e3779b97f4a7c15ull + units[i]);
  for (int off = 16; off > 0; off /= 2) h += __shfl_xor_sync(0xffffffffu, h, off);
  if (threadIdx.x % 32 == 0) atomicAdd(acc, static_cast<unsigned long long>(h));
}

uint64_t fingerprint(const void* p, size_t bytes, unsigned long long* acc, cudaStream_t stream) {
  CUDA_CHECK(cudaMemsetAsync(acc, 0, sizeof(*acc), stream));
  fingerprint_kernel<<<1024, 256, 0, stream>>>(acc, static_cast<const uint16_t*>(p), bytes / 2);
  CUDA_CHECK_LAUNCH("fingerprint_kernel");
  unsigned long long h = 0;
  CUDA_CHECK(cudaMemcpyAsync(&h, acc, sizeof(h), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return h;
}

// A fixed pseudo-random pattern in [-1, 1): the stand-in bias and accumulator of the trials.
template <class T>
__global__ void fill_pattern_kernel(T* p, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float v = static_cast<float>(mix64(i + 0x5851f42d4c957f2dull) >> 40) * (2.0f / 16777216.0f) - 1.0f;
    if constexpr (std::is_same_v<T, float>) {
      p[i] = v;
    } else {
      p[i] = __float2bfloat16(v);
    }
  }
}

template <class T>
void fill_pattern(T* p, size_t n, cudaStream_t stream) {
  fill_pattern_kernel<<<256, 256, 0, stream>>>(p, n);
  CUDA_CHECK_LAUNCH("fill_pattern_kernel");
}

// Device memory for the trials; a failed allocation leaves it empty (no tuning, not an error).
struct TrialBuffer {
  void* p = nullptr;
  explicit TrialBuffer(size_t bytes) {
    if (bytes > 0 && cudaMalloc(&p, bytes) != cudaSuccess) {
      static_cast<void>(cudaGetLastError());
      p = nullptr;
    }
  }
  ~TrialBuffer() {
    if (p) static_cast<void>(cudaFree(p));
  }
  TrialBuffer(const TrialBuffer&) = delete;
  TrialBuffer& operator=(const TrialBuffer&) = delete;
};

template <class T>
T algo_config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T v{};
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof(v), &written) != CUBLAS_STATUS_SUCCESS) return T{};
  return v;
}

// How an algorithm splits K and reduces the pieces: this decides the order in which each dot
// product is summed, so only candidates that split like the first one can match its result.
bool splits_alike(const cublasLtMatmulAlgo_t& a, const cublasLtMatmulAlgo_t& b) {
  return algo_config<int32_t>(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM) ==
             algo_config<int32_t>(b, CUBLASLT_ALGO_CONFIG_SPLITK_NUM) &&
         algo_config<uint32_t>(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME) ==
             algo_config<uint32_t>(b, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME);
}

}  // namespace

// Chooses among the heuristic's candidates those that compute exactly what its first choice
// computes, the fastest of them. Each candidate runs once on this call's operands, and its
// output must have the same fingerprint as the first candidate's (those that split K otherwise,
// and so sum in another order, are not tried); the ones that pass are timed over a few runs. The
// choice can differ between runs and ranks, but no result bit depends on it.
// So that every part of the epilogue shows in the fingerprint, the trials add a patterned bias
// (the model's biases start at zero) and, for the weight gradient, which accumulates (beta = 1),
// write onto a patterned temporary buffer instead of the real one. The forward and input
// gradient (beta = 0) write the call's own outputs, which the real call then overwrites. Where a
// trial buffer cannot be allocated the first choice is kept.
cublasLtMatmulAlgo_t Matmul::fastest(const Key& key, Plan& p, const cublasLtMatmulHeuristicResult_t* results, int n,
                                     const Operands& ops, float beta, cudaStream_t stream) {
  const bool weight_grad = key.kind == Kind::kWeightGrad;
  // D is (M, N) for the forward, (K, N) for the input gradient, (K, M) for the weight gradient.
  const size_t d_elems = static_cast<size_t>(key.kind == Kind::kForward ? key.M : key.K) *
                         static_cast<size_t>(weight_grad ? key.M : key.N);
  const size_t d_bytes = d_elems * (weight_grad ? sizeof(float) : sizeof(bf16));
  const bool writes_aux = key.epilogue == CUBLASLT_EPILOGUE_GELU_AUX || key.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  const bool bias = has_bias(key.epilogue);   // a bias of D's rows (M, forward only)
  TrialBuffer trial_d(beta != 0.0f ? d_bytes : 0), trial_bias(bias ? key.M * sizeof(bf16) : 0);
  if ((beta != 0.0f && !trial_d.p) || (bias && !trial_bias.p)) return results[0].algo;
  void* d = beta != 0.0f ? trial_d.p : ops.d;
  if (bias) {
    fill_pattern(static_cast<bf16*>(trial_bias.p), key.M, stream);
    set_desc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(trial_bias.p));
  }
  unsigned long long* acc = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  CUDA_CHECK(cudaMalloc(&acc, sizeof(*acc)));
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  const float alpha = 1.0f;
  auto once = [&](const cublasLtMatmulAlgo_t& algo) {
    return cublasLtMatmul(handle_, p.desc, &alpha, ops.a, p.a, ops.b, p.b, &beta, d, p.d, d, p.d, &algo, workspace_,
                          kGemmWorkspaceBytes, stream);
  };
  auto output_fingerprint = [&] {
    uint64_t f = fingerprint(d, d_bytes, acc, stream);
    if (writes_aux) f ^= fingerprint(ops.aux, d_elems * sizeof(bf16), acc, stream) * 0x9e3779b97f4a7c15ull;
    return f;
  };
  if (log_)
    std::fprintf(stderr, "gemm kind %d N %d K %d M %d epilogue %d alignment %d SMs %d: %d candidates\n",
                 static_cast<int>(key.kind), key.N, key.K, key.M, static_cast<int>(key.epilogue), key.alignment,
                 key.sm_target > 0 ? key.sm_target : sm_count_, n);
  auto time_ms = [&](const cublasLtMatmulAlgo_t& algo) {
    float ms = 0;
    CUDA_CHECK(cudaEventRecord(start, stream));
    for (int r = 0; r < 5; ++r) CUBLAS_CHECK(once(algo));
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return ms / 5;
  };
  uint64_t reference = 0;
  int reference_index = -1, best = 0;   // the reference is the first candidate that runs
  float best_ms = -1;
  for (int i = 0; i < n; ++i) {
    const cublasLtMatmulAlgo_t& algo = results[i].algo;
    const char* verdict = "timed";
    float ms = 0;
    if (weight_grad) fill_pattern(static_cast<float*>(d), d_elems, stream);   // C of the accumulation
    // With the log on, the candidates that cannot be used (another K split, other result bits)
    // are timed too, so that the log shows what keeping the results bitwise costs (for GPT-2
    // 124M's weight-gradient shapes at most 0.33 ms per step on H200).
    if (results[i].state != CUBLAS_STATUS_SUCCESS) {
      verdict = "not usable";
    } else if (!splits_alike(algo, results[0].algo)) {
      verdict = "splits K otherwise, not tried";
      if (log_ && once(algo) == CUBLAS_STATUS_SUCCESS) verdict = "splits K otherwise, not used", ms = time_ms(algo);
    } else if (once(algo) != CUBLAS_STATUS_SUCCESS) {
      verdict = "failed";
    } else {
      const uint64_t f = output_fingerprint();
      if (reference_index < 0) reference = f, reference_index = i;
      if (f != reference) {
        verdict = "different result, not used";
        if (log_) ms = time_ms(algo);
      } else {
        ms = time_ms(algo);
        if (best_ms < 0 || ms < best_ms) best = i, best_ms = ms;
      }
    }
    if (log_)
      std::fprintf(stderr, "  %d: algo %d tile %u stages %u split %d swizzle %u cluster %u: %s %.4f ms\n", i,
                   algo_config<int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID),
                   algo_config<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
                   algo_config<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID),
                   algo_config<int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                   algo_config<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
                   static_cast<unsigned>(algo_config<uint16_t>(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID)), verdict,
                   ms);
  }
  if (log_) std::fprintf(stderr, "  chosen: %d\n", best);
  // The trial buffers go before the real call: nothing may still be reading them.
  CUDA_CHECK(cudaStreamSynchronize(stream));
  if (bias) set_desc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, ops.bias);
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  CUDA_CHECK(cudaFree(acc));
  return results[best].algo;
}

void Matmul::run(const Plan& p, const Operands& ops, float beta, cudaStream_t stream) {
  const float alpha = 1.0f;
  CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &alpha, ops.a, p.a, ops.b, p.b, &beta, ops.d, p.d, ops.d, p.d, &p.algo,
                              workspace_, kGemmWorkspaceBytes, stream));
}

bool Matmul::try_gemm(Kind kind, int N, int K, int M, cublasLtEpilogue_t epilogue, const Operands& ops, float beta,
                      cudaStream_t stream) {
  int alignment = std::min(alignment_of(ops.a), std::min(alignment_of(ops.b), alignment_of(ops.d)));
  if (has_bias(epilogue)) alignment = std::min(alignment, alignment_of(ops.bias));
  if (has_aux(epilogue)) alignment = std::min(alignment, alignment_of(ops.aux));
  const Plan& p = plan(Key{kind, N, K, M, epilogue, alignment, sm_target_}, ops, beta, stream);
  if (!p.found) return false;
  // Cached descriptors carry the addresses of the call that built them; point them at this one's.
  if (has_bias(epilogue)) set_desc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, ops.bias);
  if (has_aux(epilogue)) set_desc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, ops.aux);
  run(p, ops, beta, stream);
  return true;
}

void Matmul::gemm(Kind kind, int N, int K, int M, cublasLtEpilogue_t epilogue, const Operands& ops, float beta,
                  cudaStream_t stream) {
  if (!try_gemm(kind, N, K, M, epilogue, ops, beta, stream))
    TRIDENT_FATAL(str("cuBLASLt has no algorithm for GEMM kind ", static_cast<int>(kind), " with N=", N, " K=", K,
                      " M=", M, " epilogue ", static_cast<int>(epilogue)));
}

void Matmul::forward(bf16* out, bf16* pre, const bf16* in, const bf16* w, const bf16* bias, int N, int K, int M,
                     cudaStream_t stream) {
  if (N == 0 || M == 0) return;
  TRIDENT_CHECK(K > 0, "matmul_fwd: K must be positive");
  if (pre) {
    // cuBLASLt's GELU epilogue is the tanh approximation (the one our gelu kernels use); its aux
    // output (pre) needs a leading dimension divisible by 8.
    const cublasLtEpilogue_t fused = bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    if (M % 8 == 0 && try_gemm(Kind::kForward, N, K, M, fused, Operands{w, in, out, bias, pre}, 0.0f, stream)) return;
    forward(pre, nullptr, in, w, bias, N, K, M, stream);
    gelu_fwd(out, pre, static_cast<size_t>(N) * M, stream);
    return;
  }
  const cublasLtEpilogue_t epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  gemm(Kind::kForward, N, K, M, epilogue, Operands{w, in, out, bias, nullptr}, 0.0f, stream);
}

void Matmul::backward(bf16* din, float* dw, float* dbias, const bf16* dout, const bf16* in, const bf16* w,
                      const bf16* pre, int N, int K, int M, Scratch& scratch, cudaStream_t stream) {
  if (N == 0 || K == 0 || M == 0) return;
  if (din) {
    // With pre, cuBLASLt's DGELU (the derivative of the tanh approximation, like gelu_bwd) where
    // its aux input's leading dimension allows it (divisible by 8); else the GEMM, then gelu_bwd.
    const bool fused = pre && K % 8 == 0 &&
                       try_gemm(Kind::kInputGrad, N, K, M, CUBLASLT_EPILOGUE_DGELU,
                                Operands{w, dout, din, nullptr, const_cast<bf16*>(pre)}, 0.0f, stream);
    if (!fused) {
      gemm(Kind::kInputGrad, N, K, M, CUBLASLT_EPILOGUE_DEFAULT, Operands{w, dout, din, nullptr, nullptr}, 0.0f, stream);
      if (pre) gelu_bwd(din, din, pre, static_cast<size_t>(N) * K, stream);
    }
  }
  // beta = 1: the weight gradient accumulates across micro-batches in fp32.
  if (dw)
    gemm(Kind::kWeightGrad, N, K, M, CUBLASLT_EPILOGUE_DEFAULT, Operands{in, dout, dw, nullptr, nullptr}, 1.0f, stream);
  if (dbias) add_column_sums(dbias, dout, N, M, scratch, stream);
}

}  // namespace trident::gpu
