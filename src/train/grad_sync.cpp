// Bucketed DP gradient reduction and the tied-embedding sum between first and last stage.
#include "trident/train/grad_sync.hpp"

namespace trident {

GradSync::GradSync(const ParamLayout& layout, TensorView grads, const ParallelGroups& g, Backend& be,
                   ZeroShards& shards)
    : layout_(layout), grads_(grads), g_(g), be_(be), shards_(shards), pending_(layout.buckets().size()) {}

void GradSync::launch(int b) {
  if (g_.topo.dp() == 1) {
    if (bucket_final_) bucket_final_(b, nullptr);
    return;
  }
  if (shards_.staged()) {   // ZeRO-2: the buckets staged per micro-batch are reduced by the staging
    if (!shards_.per_micro_bucket(b)) shards_.reduce(b);
    return;
  }
  const Bucket& bk = layout_.buckets()[b];
  TensorView v = grads_.slice(bk.offset, bk.size);
  pending_[b] = shards_.zero()
                    ? g_.dp->reduce_scatter_async(v.data, bk.size / g_.topo.dp(), DType::F32, be_.stream())
                    : g_.dp->all_reduce_async(v.data, bk.size, DType::F32, ReduceOp::Sum, be_.stream());
  if (bucket_final_) bucket_final_(b, pending_[b].get());
}

void GradSync::unit_done(int unit) {
  if (unit == layout_.tied_unit()) return;   // reduced in finish(), after the embedding-group sum
  int b = layout_.bucket_of_unit(unit);
  if (unit == layout_.buckets()[b].unit_end - 1) launch(b);
}

void GradSync::finish() {
  if (layout_.tied_unit() >= 0) {
    const ParamInfo& wte = layout_.get("wte");
    TensorView grad = shards_.staged() ? shards_.grad_view(wte.offset, wte.numel) : grads_.slice(wte.offset, wte.numel);
    if (g_.embed) g_.embed->all_reduce(grad.data, wte.numel, DType::F32, ReduceOp::Sum, be_.stream());
    launch(layout_.bucket_of_unit(layout_.tied_unit()));
  }
  for (Request& r : pending_)
    if (r) {
      r->wait(be_.stream());
      r.reset();
    }
  if (shards_.staged()) shards_.settle_all();
}

}  // namespace trident
