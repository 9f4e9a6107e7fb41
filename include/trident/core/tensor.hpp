// TensorView: a typed, non-owning view of a flat buffer in some backend's memory.
// Shapes travel as explicit integers to the ops (B, T, C, ...), as in llm.c.
#pragma once

#include <cstddef>

#include "trident/core/dtype.hpp"
#include "trident/core/error.hpp"

namespace trident {

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::F32;
  size_t numel = 0;

  TensorView() = default;
  TensorView(void* d, DType t, size_t n) : data(d), dtype(t), numel(n) {}

  bool empty() const { return data == nullptr; }
  size_t bytes() const { return numel * dtype_size(dtype); }

  template <class T>
  T* as() const { return static_cast<T*>(data); }

  // Elements [offset, offset + n) of this view.
  TensorView slice(size_t offset, size_t n) const {
    TRIDENT_CHECK(offset + n <= numel, str("slice [", offset, ", ", offset + n, ") of ", numel));
    return TensorView(static_cast<char*>(data) + offset * dtype_size(dtype), dtype, n);
  }
};

}  // namespace trident
