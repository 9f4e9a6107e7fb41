// Bucketed DP gradient reduction and the tied-embedding sum between first and last stage.
#include "trident/train/grad_sync.hpp"

namespace trident {

GradSync::GradSync(const ParamLayout& layout, TensorView grads, const ParallelGroups& g, Backend& be, bool zero,
                   bool copy_engine)
    : layout_(layout), grads_(grads), g_(g), be_(be), zero_(zero), pending_(layout.buckets().size()) {
  if (!copy_engine || g.topo.dp() == 1) return;
  TRIDENT_CHECK(zero && g.topo.dp() == 2, "parallel.dp_copy_engine needs dp = 2 and parallel.zero = 1");
  // Every bucket's exchange is pending until finish(), and so are the optimizer's gathers after it.
  const size_t buckets = layout.buckets().size();
  if (buckets > static_cast<size_t>(kCopyOpsInFlight))
    throw InputError(str("parallel.dp_copy_engine = true: this stage has ", buckets, " gradient buckets, at most ",
                         kCopyOpsInFlight, " can be exchanged at once; raise parallel.bucket_mb"));
  size_t total = 0;
  for (const Bucket& bk : layout.buckets()) {
    inbox_offset_.push_back(total);
    total += bk.size / 2;
  }
  inbox_ = Buffer(be, total * sizeof(float));
  const std::string why = g.dp->register_window(inbox_.get(), inbox_.bytes());
  if (!why.empty()) throw InputError(str("parallel.dp_copy_engine = true: ", why, "; set it to false"));
}

GradSync::~GradSync() {
  if (inbox_.get()) g_.dp->unregister_window(inbox_.get());
}

std::pair<size_t, size_t> GradSync::dp_slice(const Bucket& bk, int dp, int dp_rank) {
  const size_t share = bk.size / dp;
  const size_t begin = bk.offset + share * dp_rank;
  return {begin, begin + share};
}


void GradSync::launch(int b) {
  if (g_.topo.dp() == 1) return;
  const Bucket& bk = layout_.buckets()[b];
  TensorView v = grads_.slice(bk.offset, bk.size);
  if (inbox_.get()) {
    void* into = inbox().slice(inbox_offset_[b], bk.size / 2).data;
    pending_[b] = g_.dp->scatter_partial_async(v.data, bk.size / 2, DType::F32, into, be_.stream());
    return;
  }
  pending_[b] = zero_ ? g_.dp->reduce_scatter_async(v.data, bk.size / g_.topo.dp(), DType::F32, be_.stream())
                      : g_.dp->all_reduce_async(v.data, bk.size, DType::F32, ReduceOp::Sum, be_.stream());
}

void GradSync::unit_done(int unit) {
  if (unit == layout_.tied_unit()) return;   // reduced in finish(), after the embedding-group sum
  int b = layout_.bucket_of_unit(unit);
  if (unit == layout_.buckets()[b].unit_end - 1) launch(b);
}

void GradSync::finish() {
  if (layout_.tied_unit() >= 0) {
    const ParamInfo& wte = layout_.get("wte");
    if (g_.embed) g_.embed->all_reduce(grads_.slice(wte.offset, wte.numel).data, wte.numel, DType::F32, ReduceOp::Sum,
                                       be_.stream());
    launch(layout_.bucket_of_unit(layout_.tied_unit()));
  }
  for (Request& r : pending_)
    if (r) {
      r->wait(be_.stream());
      r.reset();
    }
}

}  // namespace trident
