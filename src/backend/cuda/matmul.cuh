// GEMMs of nn.Linear layers through cuBLASLt (descriptors and algorithms cached per shape),
// plus the deterministic bias-gradient reduction.
#pragma once

#include <unordered_map>

#include "common.cuh"

namespace trident::gpu {

class Matmul {
 public:
  // On the current device. autotune: time cuBLASLt's candidates per shape (keeping only those
  // that give the heuristic's first choice's bits); log: print them and the choice.
  Matmul(bool autotune, bool log);
  ~Matmul();
  Matmul(const Matmul&) = delete;
  Matmul& operator=(const Matmul&) = delete;

  // out (N,M) = in (N,K) @ w (M,K)^T + bias (M) (bias may be null). With pre: pre = that sum
  // and out = gelu(pre), fused into the GEMM's epilogue where cuBLASLt allows it.
  void forward(bf16* out, bf16* pre, const bf16* in, const bf16* w, const bf16* bias, int N, int K, int M,
               cudaStream_t stream);

  // din (N,K) = dout @ w; dw (M,K) += dout^T @ in; dbias (M) += column sums of dout.
  // Null outputs are skipped. With pre (N,K), the GELU's input: din = (dout @ w) * gelu'(pre),
  // fused into the GEMM's epilogue where cuBLASLt allows it.
  long plans_built() const { return static_cast<long>(plans_.size()); }

  // GEMMs queued from now on run on all SMs but `sms` (0: all), which a collective running
  // beside them can then hold without delaying the GEMMs' persistent CTAs
  // (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET; each margin has its own plans).
  void set_sm_margin(int sms);

  void backward(bf16* din, float* dw, float* dbias, const bf16* dout, const bf16* in, const bf16* w, const bf16* pre,
                int N, int K, int M, Scratch& scratch, cudaStream_t stream);

 private:
  enum class Kind : uint8_t { kForward, kInputGrad, kWeightGrad };

  struct Key {
    Kind kind;
    int N, K, M;
    cublasLtEpilogue_t epilogue;
    int alignment;  // bytes that every operand's address is a multiple of (heuristics depend on it)
    int sm_target;  // CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET; 0: the whole device
    bool operator==(const Key& o) const {
      return kind == o.kind && N == o.N && K == o.K && M == o.M && epilogue == o.epilogue &&
             alignment == o.alignment && sm_target == o.sm_target;
    }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;  // d also serves as C
    cublasLtMatmulAlgo_t algo{};
    bool found = false;  // the heuristic returned an algorithm
  };
  // Operands of one call, in cuBLASLt's column-major terms.
  struct Operands {
    const void* a;
    const void* b;
    void* d;
    const void* bias;
    void* aux;
  };

  static constexpr int kAutotuneCandidates = 16;
  // The plan of `key`, built on first use from this call's operands (beta: the call's).
  const Plan& plan(const Key& key, const Operands& ops, float beta, cudaStream_t stream);
  cublasLtMatmulAlgo_t fastest(const Key& key, Plan& p, const cublasLtMatmulHeuristicResult_t* results, int n,
                               const Operands& ops, float beta, cudaStream_t stream);
  void run(const Plan& plan, const Operands& ops, float beta, cudaStream_t stream);
  // Runs the GEMM of `key`; false (nothing queued) when cuBLASLt offers no algorithm for it.
  bool try_gemm(Kind kind, int N, int K, int M, cublasLtEpilogue_t epilogue, const Operands& ops, float beta,
                cudaStream_t stream);
  void gemm(Kind kind, int N, int K, int M, cublasLtEpilogue_t epilogue, const Operands& ops, float beta,
            cudaStream_t stream);

  bool autotune_ = true;
  bool log_ = false;
  int sm_count_ = 0;    // the device's
  int sm_target_ = 0;   // of the GEMMs queued now (0: all SMs)
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::unordered_map<Key, Plan, KeyHash> plans_;
};

}  // namespace trident::gpu
