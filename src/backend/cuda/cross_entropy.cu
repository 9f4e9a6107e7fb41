// Cross-entropy kernels: one block per row of logits, fp32 math, fixed-order block reductions,
// 16-byte loads and stores where the rows allow.
#include "cross_entropy.cuh"

namespace trident::gpu {
namespace {

constexpr int kThreads = 512;

// Column of this row's target inside the shard, or -1 when another rank holds it.
__device__ __forceinline__ int local_target(const int32_t* targets, int row, int v_valid, int vocab_start) {
  const int t = targets[row] - vocab_start;
  return t >= 0 && t < v_valid ? t : -1;
}

// Columns [0, n_vec) of a row go in 16-byte pieces (n_vec = 0 when the rows are not 16-byte
// aligned), the rest one by one; every thread covers a fixed set of columns, so the block
// reductions add in the same order on every run.
__global__ void xent_max_kernel(float* rowmax, const bf16* logits, int v_local, int v_valid, int n_vec) {
  __shared__ float shared[32];
  const bf16* x = logits + static_cast<size_t>(blockIdx.x) * v_local;
  float m = -INFINITY;
  for (int j = threadIdx.x * kVec; j < n_vec; j += blockDim.x * kVec) {
    float v[kVec];
    load_vec(v, x + j);
#pragma unroll
    for (int k = 0; k < kVec; ++k) m = fmaxf(m, v[k]);
  }
  for (int j = n_vec + threadIdx.x; j < v_valid; j += blockDim.x) m = fmaxf(m, to_float(x[j]));
  m = block_max(m, shared);
  if (threadIdx.x == 0) rowmax[blockIdx.x] = m;
}

__global__ void xent_stats_kernel(float* stats, const bf16* logits, const float* rowmax, const int32_t* targets,
                                  int v_local, int v_valid, int n_vec, int vocab_start) {
  __shared__ float shared[32];
  const int row = blockIdx.x;
  const bf16* x = logits + static_cast<size_t>(row) * v_local;
  const float m = rowmax[row], offset = m * kLog2e;
  float s = 0.0f;
  for (int j = threadIdx.x * kVec; j < n_vec; j += blockDim.x * kVec) {
    float v[kVec];
    load_vec(v, x + j);
#pragma unroll
    for (int k = 0; k < kVec; ++k) s += fast_exp2(fmaf(v[k], kLog2e, -offset));
  }
  for (int j = n_vec + threadIdx.x; j < v_valid; j += blockDim.x) s += fast_exp2(fmaf(to_float(x[j]), kLog2e, -offset));
  s = block_sum(s, shared);
  if (threadIdx.x == 0) {
    const int t = local_target(targets, row, v_valid, vocab_start);
    stats[2 * row] = s;
    stats[2 * row + 1] = t >= 0 ? to_float(x[t]) : 0.0f;
  }
}

// A row's sum of e = exp(x - m) and of e (x - m) over valid columns, m the reduced rowmax.
__global__ void xent_entropy_sums_kernel(float* sums, const bf16* logits, const float* rowmax, int v_local,
                                         int v_valid, int n_vec) {
  __shared__ float shared[32];
  const int row = blockIdx.x;
  const bf16* x = logits + static_cast<size_t>(row) * v_local;
  const float m = rowmax[row];
  float s0 = 0.0f, s1 = 0.0f;
  auto add = [&](float v) {
    const float d = v - m, e = fast_exp2(d * kLog2e);
    s0 += e;
    s1 += e * d;
  };
  for (int j = threadIdx.x * kVec; j < n_vec; j += blockDim.x * kVec) {
    float v[kVec];
    load_vec(v, x + j);
#pragma unroll
    for (int k = 0; k < kVec; ++k) add(v[k]);
  }
  for (int j = n_vec + threadIdx.x; j < v_valid; j += blockDim.x) add(to_float(x[j]));
  s0 = block_sum(s0, shared);
  s1 = block_sum(s1, shared);
  if (threadIdx.x == 0) {
    sums[2 * row] = s0;
    sums[2 * row + 1] = s1;
  }
}

// Calls fn(v, j) on this thread's 16-byte pieces of a row, in column order: columns
// j = threadIdx.x kVec, + blockDim.x kVec, ... below n, two loads in flight at a time (with one,
// the 2 x 1024 threads of a multiprocessor keep too few bytes in flight to cover the memory
// latency). With kStore each piece is written back after fn.
template <bool kStore, class Fn>
__device__ __forceinline__ void for_each_piece(bf16* x, int n, Fn&& fn) {
  const int stride = blockDim.x * kVec;
  int j = threadIdx.x * kVec;
  for (; j + stride < n; j += 2 * stride) {
    float v0[kVec], v1[kVec];
    load_vec(v0, x + j);
    load_vec(v1, x + j + stride);
    fn(v0, j);
    fn(v1, j + stride);
    if constexpr (kStore) {
      store_vec(x + j, v0);
      store_vec(x + j + stride, v1);
    }
  }
  if (j < n) {
    float v[kVec];
    load_vec(v, x + j);
    fn(v, j);
    if constexpr (kStore) store_vec(x + j, v);
  }
}

// Overwrites a row of logits x with dloss * (softmax - onehot(t)) from its max and 1 / sum of
// exponentials; columns [v_valid, v_local) are padding and get 0. Columns [0, n_vec) go in
// 16-byte pieces (n_vec covers the padding too), the rest one by one. Pieces wholly inside the
// vocabulary without the target (all but the target's and the padding's) skip the per-column
// tests.
__device__ __forceinline__ void write_xent_grads(bf16* x, int v_local, int v_valid, int n_vec, int t, float row_max,
                                                 float inv_sum, float dloss) {
  const float offset = row_max * kLog2e, scale = dloss * inv_sum;
  auto grad = [&](float logit, int j) {
    return j < v_valid ? fast_exp2(fmaf(logit, kLog2e, -offset)) * scale - (j == t ? dloss : 0.0f) : 0.0f;
  };
  auto piece = [&](float(&v)[kVec], int j) {
    if (j + kVec <= v_valid && (t < j || t >= j + kVec)) {
#pragma unroll
      for (int k = 0; k < kVec; ++k) v[k] = fast_exp2(fmaf(v[k], kLog2e, -offset)) * scale;
    } else {
#pragma unroll
      for (int k = 0; k < kVec; ++k) v[k] = grad(v[k], j + k);
    }
  };
  for_each_piece<true>(x, n_vec, piece);
  for (int j = n_vec + threadIdx.x; j < v_local; j += blockDim.x) x[j] = to_bf16(grad(to_float(x[j]), j));
}

// The gradient row of an ignored target: zeros, in 16-byte pieces over [0, n_vec), then one by one.
__device__ __forceinline__ void zero_row(bf16* x, int v_local, int n_vec) {
  const float zeros[kVec] = {};
  for (int j = threadIdx.x * kVec; j < n_vec; j += blockDim.x * kVec) store_vec(x + j, zeros);
  for (int j = n_vec + threadIdx.x; j < v_local; j += blockDim.x) x[j] = to_bf16(0.0f);
}

__global__ void xent_bwd_kernel(float* losses, bf16* logits, const float* rowmax, const float* stats,
                                const int32_t* targets, int v_local, int v_valid, int n_vec, int vocab_start,
                                float dloss) {
  const int row = blockIdx.x;
  bf16* x = logits + static_cast<size_t>(row) * v_local;
  if (targets[row] < 0) {   // an ignored target: no loss, no gradient
    if (losses && threadIdx.x == 0) losses[row] = 0.0f;
    zero_row(x, v_local, n_vec);
    return;
  }
  const float m = rowmax[row], sum = stats[2 * row];
  if (losses && threadIdx.x == 0) losses[row] = logf(sum) + m - stats[2 * row + 1];
  write_xent_grads(x, v_local, v_valid, n_vec,
                   local_target(targets, row, v_valid, vocab_start), m, 1.0f / sum, dloss);
}

// Online softmax statistics: the running max m and s = sum of exp(x - m), rescaled whenever m
// grows (once per group of kWidth values), then combined over the block in a fixed order.
template <int kWidth>
__device__ __forceinline__ void online_add(float& m, float& s, const float (&v)[kWidth]) {
  float mc = v[0];
#pragma unroll
  for (int k = 1; k < kWidth; ++k) mc = fmaxf(mc, v[k]);
  if (mc > m) {
    s = m == -INFINITY ? 0.0f : s * fast_exp2((m - mc) * kLog2e);
    m = mc;
  }
  const float offset = m * kLog2e;
#pragma unroll
  for (int k = 0; k < kWidth; ++k) s += fast_exp2(fmaf(v[k], kLog2e, -offset));
}

constexpr int kFusedThreads = 1024;

__global__ void __launch_bounds__(kFusedThreads, 2)
    xent_fused_kernel(float* losses, bf16* logits, const int32_t* targets, int v_local, int v_valid, int n_vec_valid,
                      int n_vec_all, float dloss) {
  __shared__ float shared[32];
  const int row = blockIdx.x;
  bf16* x = logits + static_cast<size_t>(row) * v_local;
  // The branch is uniform over the block (one row per block), so no thread skips a barrier.
  if (targets[row] < 0) {   // an ignored target: no loss, no gradient
    if (losses && threadIdx.x == 0) losses[row] = 0.0f;
    zero_row(x, v_local, n_vec_all);
    return;
  }
  float m = -INFINITY, s = 0.0f;
  for_each_piece<false>(x, n_vec_valid, [&](float(&v)[kVec], int) { online_add(m, s, v); });
  for (int j = n_vec_valid + threadIdx.x; j < v_valid; j += blockDim.x) {
    float v[1] = {to_float(x[j])};
    online_add(m, s, v);
  }
  const float row_max = block_max(m, shared);
  const float sum = block_sum(m == -INFINITY ? 0.0f : s * fast_exp2((m - row_max) * kLog2e), shared);
  const int t = local_target(targets, row, v_valid, 0);
  // Every thread reads the target logit before any thread overwrites the row.
  const float target_logit = t >= 0 ? to_float(x[t]) : 0.0f;
  __syncthreads();
  if (losses && threadIdx.x == 0) losses[row] = logf(sum) + row_max - target_logit;
  write_xent_grads(x, v_local, v_valid, n_vec_all, t, row_max, 1.0f / sum, dloss);
}

// Columns [0, n) of every row in 16-byte pieces when the rows allow it, else none.
int vector_columns(const bf16* logits, int v_local, int n) {
  return v_local % kVec == 0 && aligned16(logits) ? n / kVec * kVec : 0;
}

}  // namespace

void xent_max(float* rowmax, const bf16* logits, int N, int v_local, int v_valid, cudaStream_t stream) {
  if (N == 0) return;
  xent_max_kernel<<<N, kThreads, 0, stream>>>(rowmax, logits, v_local, v_valid,
                                              vector_columns(logits, v_local, v_valid));
  CUDA_CHECK_LAUNCH("xent_max_kernel");
}

void xent_stats(float* stats, const bf16* logits, const float* rowmax, const int32_t* targets, int N, int v_local,
                int v_valid, int vocab_start, cudaStream_t stream) {
  if (N == 0) return;
  xent_stats_kernel<<<N, kThreads, 0, stream>>>(stats, logits, rowmax, targets, v_local, v_valid,
                                                vector_columns(logits, v_local, v_valid), vocab_start);
  CUDA_CHECK_LAUNCH("xent_stats_kernel");
}

void xent_entropy_sums(float* sums, const bf16* logits, const float* rowmax, int N, int v_local, int v_valid,
                       cudaStream_t stream) {
  if (N == 0) return;
  xent_entropy_sums_kernel<<<N, kThreads, 0, stream>>>(sums, logits, rowmax, v_local, v_valid,
                                                        vector_columns(logits, v_local, v_valid));
  CUDA_CHECK_LAUNCH("xent_entropy_sums_kernel");
}

void xent_bwd(float* losses, bf16* logits, const float* rowmax, const float* stats, const int32_t* targets, int N,
              int v_local, int v_valid, int vocab_start, float dloss, cudaStream_t stream) {
  if (N == 0) return;
  xent_bwd_kernel<<<N, kThreads, 0, stream>>>(losses, logits, rowmax, stats, targets, v_local, v_valid,
                                              vector_columns(logits, v_local, v_local), vocab_start, dloss);
  CUDA_CHECK_LAUNCH("xent_bwd_kernel");
}

void xent_fused(float* losses, bf16* logits, const int32_t* targets, int N, int v_local, int v_valid, float dloss,
                cudaStream_t stream) {
  if (N == 0) return;
  // 1024 threads and at most two blocks per multiprocessor keep about 2 x 132 rows in flight
  // (26 MB of GPT-2 logits), so the second read of a row finds it in L2.
  xent_fused_kernel<<<N, kFusedThreads, 0, stream>>>(losses, logits, targets, v_local, v_valid,
                                                vector_columns(logits, v_local, v_valid),
                                                vector_columns(logits, v_local, v_local), dloss);
  CUDA_CHECK_LAUNCH("xent_fused_kernel");
}

}  // namespace trident::gpu
