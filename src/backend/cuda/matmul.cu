// cuBLASLt GEMMs for row-major trident tensors, with descriptors, layouts and the heuristic's
// algorithm built once per shape; the bias gradient is our own deterministic column sum.
#include <algorithm>
#include <cstdlib>

#include "elementwise.cuh"
#include "matmul.cuh"
#include "reduce.cuh"

namespace trident::gpu {
namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;  // what cuBLASLt's Hopper kernels ask for

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
                      static_cast<long long>(k.epilogue), static_cast<long long>(k.alignment)})
    h = h * 1000003u ^ std::hash<long long>()(v);
  return h;
}

Matmul::Matmul() {
  // TRIDENT_GEMM_AUTOTUNE=1: time the heuristic's best candidates for each forward and
  // input-gradient GEMM shape on first use (the choice can then differ between runs).
  const char* tune = std::getenv("TRIDENT_GEMM_AUTOTUNE");
  autotune_ = tune && *tune && *tune != '0';
  CUBLAS_CHECK(cublasLtCreate(&handle_));
  CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
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

const Matmul::Plan& Matmul::plan(const Key& key, const Operands& ops, cudaStream_t stream) {
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
  const uint64_t workspace_bytes = kWorkspaceBytes;
  const uint32_t align = static_cast<uint32_t>(key.alignment);
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                                    sizeof(workspace_bytes)));
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align)));
  cublasLtMatmulHeuristicResult_t results[kAutotuneCandidates] = {};
  int n_results = 0;
  const int wanted = autotune_ && key.kind != Kind::kWeightGrad ? kAutotuneCandidates : 1;
  // NOT_SUPPORTED with no result is an answer (no algorithm for this case), not an error.
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.d, p.d, pref, wanted, results, &n_results);
  CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
  if (status != CUBLAS_STATUS_NOT_SUPPORTED) CUBLAS_CHECK(status);
  p.found = status == CUBLAS_STATUS_SUCCESS && n_results > 0;
  if (p.found) p.algo = n_results > 1 ? fastest(p, results, n_results, ops, stream) : results[0].algo;
  return plans_.emplace(key, p).first->second;
}

// Times each candidate on this call's operands (beta = 0, so it only writes the outputs that
// the real call then overwrites) and returns the fastest.
cublasLtMatmulAlgo_t Matmul::fastest(Plan& p, const cublasLtMatmulHeuristicResult_t* results, int n,
                                     const Operands& ops, cudaStream_t stream) {
  cudaEvent_t start = nullptr, stop = nullptr;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  const float alpha = 1.0f, beta = 0.0f;
  int best = -1;
  float best_ms = 0;
  for (int i = 0; i < n; ++i) {
    if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
    auto once = [&] {
      return cublasLtMatmul(handle_, p.desc, &alpha, ops.a, p.a, ops.b, p.b, &beta, ops.d, p.d, ops.d, p.d,
                            &results[i].algo, workspace_, kWorkspaceBytes, stream);
    };
    if (once() != CUBLAS_STATUS_SUCCESS) continue;   // warm-up; a candidate that fails is skipped
    CUDA_CHECK(cudaEventRecord(start, stream));
    for (int r = 0; r < 3; ++r) CUBLAS_CHECK(once());
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (best < 0 || ms < best_ms) best = i, best_ms = ms;
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  return results[best < 0 ? 0 : best].algo;
}

void Matmul::run(const Plan& p, const Operands& ops, float beta, cudaStream_t stream) {
  const float alpha = 1.0f;
  CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &alpha, ops.a, p.a, ops.b, p.b, &beta, ops.d, p.d, ops.d, p.d, &p.algo,
                              workspace_, kWorkspaceBytes, stream));
}

bool Matmul::try_gemm(Kind kind, int N, int K, int M, cublasLtEpilogue_t epilogue, const Operands& ops, float beta,
                      cudaStream_t stream) {
  int alignment = std::min(alignment_of(ops.a), std::min(alignment_of(ops.b), alignment_of(ops.d)));
  if (has_bias(epilogue)) alignment = std::min(alignment, alignment_of(ops.bias));
  if (has_aux(epilogue)) alignment = std::min(alignment, alignment_of(ops.aux));
  const Plan& p = plan(Key{kind, N, K, M, epilogue, alignment}, ops, stream);
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
