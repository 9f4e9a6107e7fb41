// Reductions without atomics: every element is assigned to a partial sum by its index alone,
// and the partials are added in a fixed order, so the bits never change from run to run.
#include "reduce.cuh"

namespace trident::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxPartials = 1024;  // one per block of the first pass; the second pass is one block

template <class T, bool kSquare>
__global__ void partial_sums_kernel(float* partials, const T* x, size_t n) {
  __shared__ float shared[32];
  float acc = 0.0f;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float v = to_float(x[i]);
    acc += kSquare ? v * v : v;
  }
  acc = block_sum(acc, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

__global__ void add_partials_kernel(float* acc, const float* partials, int n_partials) {
  __shared__ float shared[32];
  float v = 0.0f;
  for (int i = threadIdx.x; i < n_partials; i += blockDim.x) v += partials[i];
  v = block_sum(v, shared);
  if (threadIdx.x == 0) acc[0] += v;
}

template <class T, bool kSquare>
void launch_sum(float* acc, const T* x, size_t n, Scratch& scratch, cudaStream_t stream) {
  if (n == 0) return;
  const int blocks = grid_for(n, kThreads, kMaxPartials);
  float* partials = static_cast<float*>(scratch.get(blocks * sizeof(float), stream));
  partial_sums_kernel<T, kSquare><<<blocks, kThreads, 0, stream>>>(partials, x, n);
  CUDA_CHECK_LAUNCH("partial_sums_kernel");
  add_partials_kernel<<<1, kMaxPartials, 0, stream>>>(acc, partials, blocks);
  CUDA_CHECK_LAUNCH("add_partials_kernel");
}

// Partial column sums of x (N, C) over the rows of chunk blockIdx.y.
__global__ void column_partials_kernel(float* partials, const bf16* x, int N, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int r0 = blockIdx.y * kRowsPerPartial, r1 = min(N, r0 + kRowsPerPartial);
  float s = 0.0f;
  for (int r = r0; r < r1; ++r) s += to_float(x[static_cast<size_t>(r) * C + c]);
  partials[static_cast<size_t>(blockIdx.y) * C + c] = s;
}

__global__ void add_column_partials_kernel(float* dst, const float* partials, int n_chunks, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float acc = 0.0f;
  for (int k = 0; k < n_chunks; ++k) acc += partials[static_cast<size_t>(k) * C + c];
  dst[c] += acc;
}

}  // namespace

void sum_squares(float* acc, const float* x, size_t n, Scratch& scratch, cudaStream_t stream) {
  launch_sum<float, true>(acc, x, n, scratch, stream);
}

void sum_squares(float* acc, const bf16* x, size_t n, Scratch& scratch, cudaStream_t stream) {
  launch_sum<bf16, true>(acc, x, n, scratch, stream);
}

void sum(float* acc, const float* x, size_t n, Scratch& scratch, cudaStream_t stream) {
  launch_sum<float, false>(acc, x, n, scratch, stream);
}

int column_chunks(int N, const char* op) {
  const int n_chunks = ceil_div(N, kRowsPerPartial);
  TRIDENT_CHECK(n_chunks <= 65535, str(op, ": N=", N, " rows need more than 65535 chunks of ", kRowsPerPartial));
  return n_chunks;
}

void add_column_sums(float* dst, const bf16* x, int N, int C, Scratch& scratch, cudaStream_t stream) {
  if (N == 0 || C == 0) return;
  const int n_chunks = column_chunks(N, "add_column_sums");
  float* partials = static_cast<float*>(scratch.get(static_cast<size_t>(n_chunks) * C * sizeof(float), stream));
  column_partials_kernel<<<dim3(ceil_div(C, kThreads), n_chunks), kThreads, 0, stream>>>(partials, x, N, C);
  CUDA_CHECK_LAUNCH("column_partials_kernel");
  add_column_partials(dst, partials, n_chunks, C, stream);
}

void add_column_partials(float* dst, const float* partials, int n_chunks, int C, cudaStream_t stream) {
  if (C == 0) return;
  add_column_partials_kernel<<<ceil_div(C, kThreads), kThreads, 0, stream>>>(dst, partials, n_chunks, C);
  CUDA_CHECK_LAUNCH("add_column_partials_kernel");
}

}  // namespace trident::gpu
