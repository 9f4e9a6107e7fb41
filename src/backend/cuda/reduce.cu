// Reductions without atomics: every element is assigned to a partial sum by its index (and the
// tensor's alignment) alone, and the partials are added in a fixed order, so the bits never
// change from run to run.
#include <algorithm>

#include "reduce.cuh"

namespace trident::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxPartials = 1024;  // one per block of the first pass; the second pass is one block

// Elements [0, n_vec) in pieces of kVec (16-byte accesses), the rest one by one.
template <class T, bool kSquare>
__global__ void partial_sums_kernel(float* partials, const T* x, size_t n, size_t n_vec) {
  __shared__ float shared[32];
  const size_t first = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x;
  float acc = 0.0f;
  for (size_t p = first; p < n_vec / kVec; p += step) {
    float v[kVec];
    load_vec(v, x + p * kVec);
#pragma unroll
    for (int k = 0; k < kVec; ++k) acc += kSquare ? v[k] * v[k] : v[k];
  }
  for (size_t i = n_vec + first; i < n; i += step) {
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

// One block per piece; the piece's alignment picks 16-byte or scalar loads.
__global__ void piece_squares_kernel(float* partials, const float* x, const MultiTensorEntry* pieces) {
  __shared__ float shared[32];
  const MultiTensorEntry piece = pieces[blockIdx.x];
  const float* p = x + piece.flat;
  const size_t n = static_cast<size_t>(piece.n);
  const size_t n_vec = reinterpret_cast<uintptr_t>(p) % 16 == 0 ? n / kVec * kVec : 0;
  float acc = 0.0f;
  for (size_t i = threadIdx.x * static_cast<size_t>(kVec); i < n_vec; i += blockDim.x * static_cast<size_t>(kVec)) {
    float v[kVec];
    load_vec(v, p + i);
#pragma unroll
    for (int k = 0; k < kVec; ++k) acc += v[k] * v[k];
  }
  for (size_t i = n_vec + threadIdx.x; i < n; i += blockDim.x) acc += p[i] * p[i];
  acc = block_sum(acc, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

template <class T, bool kSquare>
void launch_sum(float* acc, const T* x, size_t n, Scratch& scratch, cudaStream_t stream) {
  if (n == 0) return;
  const size_t n_vec = vector_prefix(n, x);
  // The grid depends on n and the alignment of x only, so the grouping of elements does too.
  const int blocks = grid_for(std::max(n_vec / kVec, n - n_vec), kThreads, kMaxPartials);
  float* partials = static_cast<float*>(scratch.get(blocks * sizeof(float), stream));
  partial_sums_kernel<T, kSquare><<<blocks, kThreads, 0, stream>>>(partials, x, n, n_vec);
  CUDA_CHECK_LAUNCH("partial_sums_kernel");
  add_partials_kernel<<<1, kMaxPartials, 0, stream>>>(acc, partials, blocks);
  CUDA_CHECK_LAUNCH("add_partials_kernel");
}

// Partial column sums of x (N, C) over the rows of chunk blockIdx.y; each thread owns kWidth
// adjacent columns.
template <int kWidth>
__global__ void column_partials_kernel(float* partials, const bf16* x, int N, int C) {
  const int c = (blockIdx.x * blockDim.x + threadIdx.x) * kWidth;
  if (c >= C) return;
  const int r0 = blockIdx.y * kRowsPerPartial, r1 = min(N, r0 + kRowsPerPartial);
  float s[kWidth] = {};
  for (int r = r0; r < r1; ++r) {
    float v[kWidth];
    load_vec(v, x + static_cast<size_t>(r) * C + c);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) s[k] += v[k];
  }
  store_vec(partials + static_cast<size_t>(blockIdx.y) * C + c, s);
}

// A block owns 32 columns (one per lane) of one partial array (blockIdx.y) and splits the chunks
// over its kChunkSlices warps: warp s sums chunks s, s + kChunkSlices, ... in order (eight loads
// in flight), then lane c of warp 0 adds the warps' sums in order. The grouping depends on the
// shape only. GPT-2's LayerNorm backward sums three arrays of 1,024 chunks x 768 columns per
// call: 72 blocks in one launch, each warp a chain of 32 loads.
constexpr int kChunkSlices = 32;
constexpr int kMaxPartialArrays = 3;

struct PartialTargets {
  float* dst[kMaxPartialArrays];
};

__global__ void __launch_bounds__(32 * kChunkSlices)
    add_column_partials_kernel(PartialTargets targets, const float* partials, int n_chunks, int C) {
  __shared__ float slice_sums[kChunkSlices][32];
  const int lane = threadIdx.x % 32, slice = threadIdx.x / 32, c = blockIdx.x * 32 + lane;
  const float* array = partials + static_cast<size_t>(blockIdx.y) * n_chunks * C;
  float acc = 0.0f;
  if (c < C) {
#pragma unroll 8
    for (int k = slice; k < n_chunks; k += kChunkSlices) acc += array[static_cast<size_t>(k) * C + c];
  }
  slice_sums[slice][lane] = acc;
  __syncthreads();
  if (slice == 0 && c < C) {
    float total = 0.0f;
    for (int s = 0; s < kChunkSlices; ++s) total += slice_sums[s][lane];
    targets.dst[blockIdx.y][c] += total;
  }
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
  const bool vec = C % kVec == 0 && aligned16(x);  // then every partial row is aligned too
  const auto kernel = vec ? column_partials_kernel<kVec> : column_partials_kernel<1>;
  kernel<<<dim3(ceil_div(C, kThreads * (vec ? kVec : 1)), n_chunks), kThreads, 0, stream>>>(partials, x, N, C);
  CUDA_CHECK_LAUNCH("column_partials_kernel");
  add_column_partials(dst, partials, n_chunks, C, stream);
}

void add_column_partials(std::initializer_list<float*> dsts, const float* partials, int n_chunks, int C,
                         cudaStream_t stream) {
  TRIDENT_CHECK(dsts.size() >= 1 && dsts.size() <= kMaxPartialArrays,
                str("add_column_partials: ", dsts.size(), " arrays (1 to ", kMaxPartialArrays, " supported)"));
  if (C == 0) return;
  PartialTargets targets{};
  int n = 0;
  for (float* d : dsts) targets.dst[n++] = d;
  add_column_partials_kernel<<<dim3(ceil_div(C, 32), n), 32 * kChunkSlices, 0, stream>>>(targets, partials, n_chunks,
                                                                                          C);
  CUDA_CHECK_LAUNCH("add_column_partials_kernel");
}

void add_column_partials(float* dst, const float* partials, int n_chunks, int C, cudaStream_t stream) {
  add_column_partials({dst}, partials, n_chunks, C, stream);
}

void sum_squares_multi(float* acc, const float* x, const MultiTensorEntry* pieces, int count, Scratch& scratch,
                       cudaStream_t stream) {
  if (count == 0) return;
  float* partials = static_cast<float*>(scratch.get(static_cast<size_t>(count) * sizeof(float), stream));
  piece_squares_kernel<<<count, kThreads, 0, stream>>>(partials, x, pieces);
  CUDA_CHECK_LAUNCH("piece_squares_kernel");
  add_partials_kernel<<<1, kMaxPartials, 0, stream>>>(acc, partials, count);
  CUDA_CHECK_LAUNCH("add_partials_kernel");
}

}  // namespace trident::gpu
