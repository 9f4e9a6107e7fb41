// ArenaPlan: offsets of named buffers inside one allocation, computed once from the config
// (one allocation per kind of memory, every tensor a view at a fixed offset).
#pragma once

#include <cstddef>
#include <vector>

#include "trident/core/dtype.hpp"
#include "trident/core/tensor.hpp"

namespace trident {

class ArenaPlan {
 public:
  static constexpr size_t kAlign = 256;  // bytes; keeps every view aligned for vector loads

  // Reserves n elements of type t and returns their byte offset.
  size_t add(DType t, size_t n) {
    size_t off = bytes_;
    bytes_ = round_up(bytes_ + n * dtype_size(t), kAlign);
    return off;
  }
  size_t bytes() const { return bytes_; }

  static size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

 private:
  size_t bytes_ = 0;
};

// Collects the views of one allocation while planning it, then points them at the memory.
// Planning alone (no bind) gives the exact byte count, e.g. for memory estimates.
class ArenaLayout {
 public:
  void want(TensorView* view, DType t, size_t n) { entries_.push_back({view, t, n, plan_.add(t, n)}); }
  size_t bytes() const { return plan_.bytes(); }
  void bind(void* base) const {
    for (const Entry& e : entries_) *e.view = TensorView(static_cast<char*>(base) + e.offset, e.t, e.n);
  }

 private:
  struct Entry {
    TensorView* view;
    DType t;
    size_t n, offset;
  };
  ArenaPlan plan_;
  std::vector<Entry> entries_;
};

// A view into an arena allocation at a planned offset.
inline TensorView arena_view(void* base, size_t byte_offset, DType t, size_t n) {
  return TensorView(static_cast<char*>(base) + byte_offset, t, n);
}

}  // namespace trident
