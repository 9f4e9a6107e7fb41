// GPT-2's BPE merge loop over a linked list of symbols with a heap of candidate pairs.
#include "bpe_merge.hpp"

#include <algorithm>
#include <functional>

namespace trident {
namespace {

// A pair (node `left`, its successor) as it was when pushed; stale once either side changed.
struct Candidate {
  int32_t rank;
  int32_t left;
  int32_t left_sym, right_sym;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
};

// Buffers reused across calls on a thread: most words are short, and allocating these five
// arrays per word would cost more than merging it.
struct Scratch {
  std::vector<int32_t> sym, next, prev;
  std::vector<Candidate> heap, fresh;
};

}  // namespace

void bpe_merge(std::vector<int32_t>& symbols, const MergeTable& merges) {
  const int32_t n = static_cast<int32_t>(symbols.size());
  if (n < 2) return;
  thread_local Scratch s;
  // Node i starts as symbol i; a merge keeps the left node and unlinks the right one (sym -1).
  std::vector<int32_t>& sym = s.sym;
  std::vector<int32_t>& next = s.next;
  std::vector<int32_t>& prev = s.prev;
  sym.assign(symbols.begin(), symbols.end());
  next.resize(n);
  prev.resize(n);
  for (int32_t i = 0; i < n; ++i) next[i] = i + 1, prev[i] = i - 1;
  next[n - 1] = -1;

  // A min-heap on (rank, position) in the reused vector.
  std::vector<Candidate>& heap = s.heap;
  std::vector<Candidate>& fresh = s.fresh;
  const auto heap_push = [&](const Candidate& c) {
    heap.push_back(c);
    std::push_heap(heap.begin(), heap.end(), std::greater<Candidate>());
  };
  const auto heap_pop = [&] {
    std::pop_heap(heap.begin(), heap.end(), std::greater<Candidate>());
    const Candidate c = heap.back();
    heap.pop_back();
    return c;
  };
  const auto consider = [&](int32_t left, std::vector<Candidate>& out) {
    if (left < 0 || next[left] < 0) return;
    if (const MergeTable::Merge* m = merges.find(sym[left], sym[next[left]]))
      out.push_back({m->rank, left, sym[left], sym[next[left]]});
  };
  heap.clear();
  for (int32_t i = 0; i + 1 < n; ++i) consider(i, heap);
  std::make_heap(heap.begin(), heap.end(), std::greater<Candidate>());

  while (!heap.empty()) {
    // One round merges every current occurrence of the lowest-ranked pair, left to right (heap
    // order breaks rank ties by position). Pairs the round creates join the heap only after it,
    // as in the reference, even where a merges file ranks them lower.
    const int32_t rank = heap.front().rank;
    fresh.clear();
    while (!heap.empty() && heap.front().rank == rank) {
      const Candidate c = heap_pop();
      const int32_t right = next[c.left];
      if (sym[c.left] != c.left_sym || right < 0 || sym[right] != c.right_sym) continue;
      sym[c.left] = merges.find(c.left_sym, c.right_sym)->merged;
      sym[right] = -1;
      next[c.left] = next[right];
      if (next[right] >= 0) prev[next[right]] = c.left;
      consider(prev[c.left], fresh);
      consider(c.left, fresh);
    }
    for (const Candidate& c : fresh) heap_push(c);
  }

  symbols.clear();
  for (int32_t i = 0; i >= 0; i = next[i]) symbols.push_back(sym[i]);
}

}  // namespace trident

