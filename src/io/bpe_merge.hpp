// Byte-pair merging over token ids: the merge table and the merge loop of GPT-2's BPE.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace trident {

class MergeTable {
 public:
  struct Merge {
    int32_t rank;     // lower merges first
    int32_t merged;   // id of the concatenation
  };

  // A pair listed again takes the later rank, as Python's dict(zip(merges, range(n))) does.
  void add(int32_t left, int32_t right, int32_t rank, int32_t merged) {
    table_[key(left, right)] = Merge{rank, merged};
  }
  const Merge* find(int32_t left, int32_t right) const {
    const auto it = table_.find(key(left, right));
    return it == table_.end() ? nullptr : &it->second;
  }
  void reserve(size_t n) { table_.reserve(n); }

 private:
  static uint64_t key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  std::unordered_map<uint64_t, Merge> table_;
};

// Merges `symbols` in place exactly as GPT-2's bpe(): repeatedly take the lowest-ranked adjacent
// pair and merge all its occurrences left to right, until no adjacent pair has a rank.
// O(n log n) in the word length, so long runs (pages of "=====") stay fast.
void bpe_merge(std::vector<int32_t>& symbols, const MergeTable& merges);

}  // namespace trident
