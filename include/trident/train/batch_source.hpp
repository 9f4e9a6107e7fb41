// BatchSource: where training samples come from, as the trainer sees it (file formats live in io).
#pragma once

#include <cstdint>

namespace trident {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Tokens of global samples [first, first + count), each seq_len + 1 tokens, into out (count, T+1).
  // A pure function of the sample index: any DP layout reading the same indices gets the same data.
  virtual void samples(int64_t first, int count, int32_t* out) = 0;
};

}  // namespace trident
