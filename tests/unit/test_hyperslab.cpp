// Box decomposition: boxes cover a flat range exactly, in order; shard boxes drop padding.
#include <gtest/gtest.h>

#include "trident/io/hyperslab.hpp"

namespace trident {
namespace {

// Flat indices listed by the boxes, in order.
std::vector<int64_t> listed(const std::vector<int64_t>& shape, const std::vector<Box>& boxes) {
  std::vector<int64_t> out;
  for (const Box& b : boxes)
    for_each_run(shape, shape, b, b, [&](int64_t g, int64_t, int64_t n) {
      for (int64_t i = 0; i < n; ++i) out.push_back(g + i);
    });
  return out;
}

TEST(Hyperslab, BoxesCoverEveryRangeExactlyInOrder) {
  for (std::vector<int64_t> shape : {std::vector<int64_t>{7}, {3, 5}, {2, 3, 4}, {3, 2, 2, 5}}) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    for (int64_t lo = 0; lo <= n; ++lo)
      for (int64_t hi = lo; hi <= n; ++hi) {
        std::vector<Box> boxes = decompose_range(shape, lo, hi);
        EXPECT_LE(boxes.size(), 2 * shape.size() - 1);
        std::vector<int64_t> want;
        for (int64_t i = lo; i < hi; ++i) want.push_back(i);
        ASSERT_EQ(listed(shape, boxes), want) << "lo " << lo << " hi " << hi;
      }
  }
}

TEST(Hyperslab, ShardBoxesMapToTheGlobalTensorAndSkipPadding) {
  ModelConfig m;
  m.n_layer = 2;
  m.n_head = 4;
  m.n_embd = 8;
  m.vocab_size = 200;   // padded to 256 at tp 2: the second shard has 72 padding rows
  m.seq_len = 4;
  ParamLayout layout(m, StageInfo::of(m, 0, 1), 2, 1, 1, 1 << 20);
  const ParamInfo& wte = layout.get("wte");
  ShardBoxes sb = shard_boxes(wte, 0, static_cast<int64_t>(wte.numel));
  EXPECT_EQ(sb.elements, (200 - 128) * 8);
  // Element by element: rows 128..199 of the global table, then -1 for the padding rows.
  for (size_t i = 0; i < wte.numel; ++i) {
    const int64_t r = static_cast<int64_t>(i / 8), c = static_cast<int64_t>(i % 8);
    EXPECT_EQ(wte.global_index(i), r < 72 ? (128 + r) * 8 + c : -1) << "local element " << i;
  }
  const ParamInfo& qkv = layout.get("blocks.1.attn.qkv.weight");   // [3, 4, 2, 8] split on heads
  sb = shard_boxes(qkv, 5, 77);
  int64_t count = 0;
  for (size_t i = 0; i < sb.local.size(); ++i)
    for_each_run(qkv.local_shape(), qkv.global_shape, sb.local[i], sb.global[i], [&](int64_t g, int64_t l, int64_t n) {
      for (int64_t k = 0; k < n; ++k) {
        EXPECT_EQ(qkv.global_index(static_cast<size_t>(l + k)), g + k);
        EXPECT_GE(l + k, 5);
        EXPECT_LT(l + k, 77);
        ++count;
      }
    });
  EXPECT_EQ(count, 72);
}

}  // namespace
}  // namespace trident
