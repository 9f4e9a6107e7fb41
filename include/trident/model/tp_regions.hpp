// Megatron's conjugate communication pairs around tensor-parallel regions:
//   copy_to_tp_region:     forward identity,   backward all-reduce (of the input gradient)
//   reduce_from_tp_region: forward all-reduce, backward identity
// Only the non-identity halves need code; the names keep the pairing visible at call sites.
#pragma once

#include "trident/core/tensor.hpp"
#include "trident/parallel/comm.hpp"

namespace trident {

inline void reduce_from_tp_region_fwd(Comm& tp, TensorView x, Stream s) {
  if (tp.size() > 1) tp.all_reduce(x.data, x.numel, x.dtype, ReduceOp::Sum, s);
}

// The same started asynchronously: wait on the request before x is read. Null when tp = 1.
inline Request reduce_from_tp_region_fwd_async(Comm& tp, TensorView x, Stream s) {
  if (tp.size() == 1) return nullptr;
  return tp.all_reduce_async(x.data, x.numel, x.dtype, ReduceOp::Sum, s);
}

inline void copy_to_tp_region_bwd(Comm& tp, TensorView dx, Stream s) {
  if (tp.size() > 1) tp.all_reduce(dx.data, dx.numel, dx.dtype, ReduceOp::Sum, s);
}

// The same started asynchronously, so that work that does not need dx (the layer's weight
// gradient) can run meanwhile; wait on the request before dx is read. Null when tp = 1.
inline Request copy_to_tp_region_bwd_async(Comm& tp, TensorView dx, Stream s) {
  if (tp.size() == 1) return nullptr;
  return tp.all_reduce_async(dx.data, dx.numel, dx.dtype, ReduceOp::Sum, s);
}

}  // namespace trident
