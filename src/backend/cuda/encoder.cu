// Embedding kernels; the backward pass is deterministic: (token, position) pairs are sorted with
// cub's stable radix sort, then one block sums all rows of a token in position order.
#include <cub/device/device_radix_sort.cuh>

#include "encoder.cuh"

namespace trident::gpu {
namespace {

constexpr int kThreads = 256;

__global__ void encoder_fwd_kernel(bf16* out, const int32_t* tokens, const bf16* wte, const bf16* wpe,
                                   const int32_t* doc_start, int T, int C, int vocab_start, int v_local) {
  const int n = blockIdx.x;  // one block per (b, t) row
  const int local = tokens[n] - vocab_start;
  const bf16* e = local >= 0 && local < v_local ? wte + static_cast<size_t>(local) * C : nullptr;
  const int pos = n % T - (doc_start ? doc_start[n] : 0);
  const bf16* p = wpe ? wpe + static_cast<size_t>(pos) * C : nullptr;
  bf16* o = out + static_cast<size_t>(n) * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float v = e ? to_float(e[c]) : 0.0f;
    if (p) v += to_float(p[c]);
    o[c] = to_bf16(v);
  }
}

// Sort keys: the local row of each token; tokens of other ranks get v_local and sort last.
__global__ void token_keys_kernel(unsigned* keys, int* rows, const int32_t* tokens, int N, int vocab_start,
                                  int v_local) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  const int local = tokens[n] - vocab_start;
  keys[n] = local >= 0 && local < v_local ? static_cast<unsigned>(local) : static_cast<unsigned>(v_local);
  rows[n] = n;
}

// Sort keys of packed sequences' position rows: each row's position in its document.
__global__ void position_keys_kernel(unsigned* keys, int* rows, const int32_t* doc_start, int N, int T) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  keys[n] = static_cast<unsigned>(n % T - doc_start[n]);
  rows[n] = n;
}

// One block per sorted position; only the first position of each run of equal keys works,
// summing the run's dout rows in increasing position (the sort is stable). Keys >= v_local
// (another rank's tokens) are skipped.
__global__ void dwte_kernel(float* dwte, const bf16* dout, const unsigned* keys, const int* rows, int N, int C,
                            int v_local) {
  const int i = blockIdx.x;
  const unsigned key = keys[i];
  if (key >= static_cast<unsigned>(v_local) || (i > 0 && keys[i - 1] == key)) return;
  float* d = dwte + static_cast<size_t>(key) * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float acc = 0.0f;
    for (int j = i; j < N && keys[j] == key; ++j) acc += to_float(dout[static_cast<size_t>(rows[j]) * C + c]);
    d[c] += acc;
  }
}

// dwpe[t] += sum over b of dout[b, t]: one thread per (t, c), b in order.
__global__ void dwpe_kernel(float* dwpe, const bf16* dout, int B, int T, int C) {
  const int t = blockIdx.y;
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float acc = 0.0f;
  for (int b = 0; b < B; ++b) acc += to_float(dout[(static_cast<size_t>(b) * T + t) * C + c]);
  dwpe[static_cast<size_t>(t) * C + c] += acc;
}

// Bits that hold every key 0..v_local: fewer radix passes than sorting all 32 bits.
int key_bits(int v_local) {
  int bits = 1;
  while (bits < 31 && (1u << bits) <= static_cast<unsigned>(v_local)) ++bits;
  return bits;
}

// The sort's buffers in scratch: carved once to measure, once for real.
struct SortBuffers {
  unsigned* keys_in = nullptr;
  unsigned* keys = nullptr;  // sorted
  int* rows_in = nullptr;
  int* rows = nullptr;   // positions n = b*T + t, in key order
  void* temp = nullptr;  // cub's temporary storage

  void carve(Carver& c, int N, size_t temp_bytes) {
    keys_in = c.take<unsigned>(N);
    keys = c.take<unsigned>(N);
    rows_in = c.take<int>(N);
    rows = c.take<int>(N);
    temp = c.take<char>(temp_bytes);
  }
};

// d (n_keys, C) += the dout rows of each key, from make_keys(keys, rows) launched on the stream:
// rows sorted by key (stable), then summed one block per key.
template <class MakeKeys>
void sum_rows_by_key(float* d, const bf16* dout, int N, int C, int n_keys, const MakeKeys& make_keys,
                     Scratch& scratch, cudaStream_t stream) {
  const int end_bit = key_bits(n_keys);
  size_t sort_bytes = 0;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<const unsigned*>(nullptr),
                                             static_cast<unsigned*>(nullptr), static_cast<const int*>(nullptr),
                                             static_cast<int*>(nullptr), N, 0, end_bit, stream));
  SortBuffers buf;
  Carver measure;
  buf.carve(measure, N, sort_bytes);
  Carver carver(scratch.get(measure.used(), stream));
  buf.carve(carver, N, sort_bytes);

  make_keys(buf.keys_in, buf.rows_in);
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(buf.temp, sort_bytes, buf.keys_in, buf.keys, buf.rows_in, buf.rows, N, 0,
                                             end_bit, stream));
  dwte_kernel<<<N, kThreads, 0, stream>>>(d, dout, buf.keys, buf.rows, N, C, n_keys);
  CUDA_CHECK_LAUNCH("dwte_kernel");
}

}  // namespace

void encoder_fwd(bf16* out, const int32_t* tokens, const bf16* wte, const bf16* wpe, const int32_t* doc_start, int B,
                 int T, int C, int vocab_start, int v_local, cudaStream_t stream) {
  if (B * T == 0 || C == 0) return;
  encoder_fwd_kernel<<<B * T, kThreads, 0, stream>>>(out, tokens, wte, wpe, doc_start, T, C, vocab_start, v_local);
  CUDA_CHECK_LAUNCH("encoder_fwd_kernel");
}

void encoder_bwd(float* dwte, float* dwpe, const bf16* dout, const int32_t* tokens, const int32_t* doc_start, int B,
                 int T, int C, int vocab_start, int v_local, Scratch& scratch, cudaStream_t stream) {
  if (B * T == 0 || C == 0) return;
  const int N = B * T;
  if (v_local > 0)
    sum_rows_by_key(dwte, dout, N, C, v_local, [&](unsigned* keys, int* rows) {
      token_keys_kernel<<<ceil_div(N, kThreads), kThreads, 0, stream>>>(keys, rows, tokens, N, vocab_start, v_local);
      CUDA_CHECK_LAUNCH("token_keys_kernel");
    }, scratch, stream);
  if (dwpe && doc_start) {   // a position's rows lie anywhere in the batch: sorted like the tokens'
    sum_rows_by_key(dwpe, dout, N, C, T, [&](unsigned* keys, int* rows) {
      position_keys_kernel<<<ceil_div(N, kThreads), kThreads, 0, stream>>>(keys, rows, doc_start, N, T);
      CUDA_CHECK_LAUNCH("position_keys_kernel");
    }, scratch, stream);
  } else if (dwpe) {
    TRIDENT_CHECK(T <= 65535, str("encoder_bwd: T=", T, " exceeds the grid's y dimension"));
    dwpe_kernel<<<dim3(ceil_div(C, kThreads), T), kThreads, 0, stream>>>(dwpe, dout, B, T, C);
    CUDA_CHECK_LAUNCH("dwpe_kernel");
  }
}

}  // namespace trident::gpu
