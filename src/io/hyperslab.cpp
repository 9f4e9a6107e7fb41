// Row-major range -> box decomposition, and clipping of a shard's boxes to the global tensor.
#include "trident/io/hyperslab.hpp"

#include <algorithm>

#include "trident/core/error.hpp"

namespace trident {
namespace {

int64_t product(const std::vector<int64_t>& s, size_t from) {
  int64_t n = 1;
  for (size_t k = from; k < s.size(); ++k) n *= s[k];
  return n;
}

// Boxes of [lo, hi) inside the sub-tensor of dims [k, d), with the outer indices fixed to prefix.
void decompose(const std::vector<int64_t>& shape, size_t k, std::vector<int64_t> prefix, int64_t lo, int64_t hi,
               std::vector<Box>& out) {
  if (lo >= hi) return;
  const size_t d = shape.size();
  auto emit = [&](int64_t first_row, int64_t rows) {
    Box b;
    b.start = prefix;
    b.count.assign(prefix.size(), 1);
    b.start.push_back(first_row);
    b.count.push_back(rows);
    for (size_t j = k + 1; j < d; ++j) {
      b.start.push_back(0);
      b.count.push_back(shape[j]);
    }
    out.push_back(std::move(b));
  };
  if (k + 1 == d) return emit(lo, hi - lo);
  const int64_t inner = product(shape, k + 1);
  auto row = [&](int64_t r, int64_t a, int64_t b) {
    std::vector<int64_t> p = prefix;
    p.push_back(r);
    decompose(shape, k + 1, p, a, b, out);
  };
  int64_t r_lo = lo / inner;
  const int64_t r_last = (hi - 1) / inner;
  if (r_lo == r_last && (lo % inner != 0 || hi % inner != 0)) return row(r_lo, lo - r_lo * inner, hi - r_lo * inner);
  if (lo % inner != 0) {
    row(r_lo, lo % inner, inner);
    ++r_lo;
  }
  const int64_t r_full_end = hi / inner;
  if (r_lo < r_full_end) emit(r_lo, r_full_end - r_lo);
  if (hi % inner != 0) row(r_full_end, 0, hi % inner);
}

}  // namespace

std::vector<Box> decompose_range(const std::vector<int64_t>& shape, int64_t lo, int64_t hi) {
  TRIDENT_CHECK(!shape.empty() && lo >= 0 && hi <= product(shape, 0), str("range [", lo, ", ", hi, ")"));
  std::vector<Box> out;
  decompose(shape, 0, {}, lo, hi, out);
  return out;
}

ShardBoxes shard_boxes(const ParamInfo& p, int64_t lo, int64_t hi) {
  ShardBoxes sb;
  for (Box& b : decompose_range(p.local_shape(), lo, hi)) {
    Box g = b;
    if (p.split_dim >= 0) {
      const int s = p.split_dim;
      const int64_t first = b.start[s] + p.split_begin;
      const int64_t end = std::min(first + b.count[s], p.global_shape[s]);
      if (end <= first) continue;   // only padding rows
      g.start[s] = first;
      g.count[s] = b.count[s] = end - first;
    }
    sb.elements += product(b.count, 0);
    sb.local.push_back(std::move(b));
    sb.global.push_back(std::move(g));
  }
  return sb;
}

}  // namespace trident
