// The host AdamW of the optimizer offload: fixed chunks over OpenMP threads, a vectorised loop each.
#include "trident/train/host_adamw.hpp"

#include <omp.h>

#include <algorithm>

#include "trident/backend/adamw_math.hpp"

namespace trident {

namespace {

// Elements per chunk: large enough that a thread's loop outlasts its scheduling, small enough to
// spread a bucket over many threads.
constexpr size_t kChunk = size_t(1) << 15;

struct Chunk {
  size_t offset, n;
  bool decay;
};

template <class Out, class Convert>
void update_chunk(const Chunk& c, float* master, float* m, float* v, const float* grad, Out* out, const AdamWArgs& a,
                  const AdamWTerms& k, Convert convert) {
  float* w = master + c.offset;
  float* m1 = m + c.offset;
  float* m2 = v + c.offset;
  const float* g = grad + c.offset;
  Out* p = out + c.offset;
#pragma omp simd
  for (size_t i = 0; i < c.n; ++i) p[i] = convert(adamw_element(w[i], m1[i], m2[i], g[i], a, k));
}

}  // namespace

void host_adamw(const std::vector<AdamWRange>& ranges, float* master, float* m, float* v, const float* grad, void* out,
                DType out_dtype, const AdamWArgs& a, int threads) {
  TRIDENT_CHECK(out_dtype == DType::F32 || out_dtype == DType::BF16,
                str("host_adamw: parameters of ", dtype_name(out_dtype), ", expected fp32 or bf16"));
  std::vector<Chunk> chunks;
  for (const AdamWRange& r : ranges)
    for (size_t k = 0; k < r.n; k += kChunk) chunks.push_back({r.offset + k, std::min(kChunk, r.n - k), r.decay});
  AdamWArgs decayed = a, plain = a;
  plain.weight_decay = 0;
  const AdamWTerms with_decay(decayed), without_decay(plain);
  const long count = static_cast<long>(chunks.size());
  const int n_threads = threads > 0 ? threads : omp_get_max_threads();
#pragma omp parallel for schedule(static) num_threads(n_threads) if (count > 1)
  for (long i = 0; i < count; ++i) {
    const Chunk& c = chunks[i];
    const AdamWArgs& args = c.decay ? decayed : plain;
    const AdamWTerms& k = c.decay ? with_decay : without_decay;
    if (out_dtype == DType::F32)
      update_chunk(c, master, m, v, grad, static_cast<float*>(out), args, k, [](float x) { return x; });
    else
      update_chunk(c, master, m, v, grad, static_cast<uint16_t*>(out), args, k,
                   [](float x) { return float_to_bf16(x); });
  }
}

}  // namespace trident
