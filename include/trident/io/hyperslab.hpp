// Maps a range of a rank's local shard onto boxes (hyperslabs) of the global tensor, so any
// layout can write or read exactly its part of a checkpoint dataset.
#pragma once

#include <cstdint>
#include <vector>

#include "trident/model/layout.hpp"

namespace trident {

struct Box {
  std::vector<int64_t> start, count;   // in local coordinates of the shard
};

// Boxes covering the local row-major flat range [lo, hi) of a tensor of shape `shape`, in
// row-major order (at most 2*rank - 1 boxes).
std::vector<Box> decompose_range(const std::vector<int64_t>& shape, int64_t lo, int64_t hi);

// The boxes of [lo, hi) of parameter p's local shard with the padding (indices past the
// global extent along the split dimension) removed. Local and global boxes list the same
// elements in the same row-major order.
struct ShardBoxes {
  std::vector<Box> local, global;
  int64_t elements = 0;
};
ShardBoxes shard_boxes(const ParamInfo& p, int64_t lo, int64_t hi);

// Calls fn(global_flat, local_flat, n) for each run of n consecutive elements of a box pair.
template <class Fn>
void for_each_run(const std::vector<int64_t>& local_shape, const std::vector<int64_t>& global_shape,
                  const Box& local, const Box& global, Fn&& fn) {
  const size_t d = local_shape.size();
  std::vector<int64_t> idx(d, 0);
  const int64_t run = local.count[d - 1];
  if (run == 0) return;
  for (;;) {
    int64_t lf = 0, gf = 0;
    for (size_t k = 0; k < d; ++k) {
      lf = lf * local_shape[k] + local.start[k] + idx[k];
      gf = gf * global_shape[k] + global.start[k] + idx[k];
    }
    fn(gf, lf, run);
    int k = static_cast<int>(d) - 2;
    for (; k >= 0; --k) {
      if (++idx[k] < local.count[k]) break;
      idx[k] = 0;
    }
    if (k < 0) return;
  }
}

}  // namespace trident
