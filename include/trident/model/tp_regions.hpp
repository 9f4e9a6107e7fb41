// Megatron's conjugate communication pairs around tensor-parallel regions:
//   copy_to_tp_region:     forward identity,   backward all-reduce (of the input gradient)
//   reduce_from_tp_region: forward all-reduce, backward identity
// Only the non-identity halves need code, and both are one all-reduce: the backward's goes
// through the forward's function (GptStage::sum_over_tp, which comments the pairing).
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

}  // namespace trident
