// The syntax of data.train and data.val: one dataset prefix, or a weighted blend
// "W1 PREFIX1 W2 PREFIX2 ..." as in Megatron-LM's --data-path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trident {

// A blend repeats every (sum of weights) samples; the io layer keeps one period's table in memory.
constexpr uint64_t kMaxBlendPeriod = uint64_t(1) << 20;

struct BlendPart {
  std::string prefix;
  uint64_t weight;   // integer share: the weights of one spec are coprime and sum to at most kMaxBlendPeriod
};

// Weights are read as exact decimals ("0.3 a 0.7 b" is 3:7, "1 a 2 b" is 1:2), so the blend is
// exactly the ratio written. One prefix alone has weight 1; an empty spec gives no parts.
// Throws InputError naming `option` for an odd word count, a weight that is not a positive decimal,
// or weights too finely divided for one period.
std::vector<BlendPart> parse_blend_spec(const std::string& option, const std::string& spec);

}  // namespace trident
