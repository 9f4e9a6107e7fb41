// The DP shards of the gradient buckets and the copy-engine inbox (see zero_shards.hpp).
#include "trident/train/zero_shards.hpp"

namespace trident {

ZeroShards::ZeroShards(const ParamLayout& layout, const ParallelGroups& g, Backend& be, bool zero, bool copy_engine)
    : layout_(layout), zero_(zero) {
  if (!copy_engine || g.topo.dp() == 1) return;
  TRIDENT_CHECK(zero && g.topo.dp() == 2, "parallel.dp_copy_engine needs dp = 2 and parallel.zero = 1");
  // Every bucket's exchange is pending until GradSync::finish(), and so are the optimizer's
  // gathers after it.
  const size_t buckets = layout.buckets().size();
  if (buckets > static_cast<size_t>(kCopyOpsInFlight))
    throw InputError(str("parallel.dp_copy_engine = true: this stage has ", buckets, " gradient buckets, at most ",
                         kCopyOpsInFlight, " can be exchanged at once; raise parallel.bucket_mb"));
  size_t total = 0;
  for (const Bucket& bk : layout.buckets()) {
    inbox_offset_.push_back(total);
    total += bk.size / 2;
  }
  pair_ = g.dp->pair_exchange();
  if (!pair_) throw InputError(str("parallel.dp_copy_engine = true: the ", g.dp->name(),
                                   " communicator has no copy-engine windows; set it to false"));
  inbox_ = Buffer(be, total * sizeof(float));
  const std::string why = pair_->register_window(inbox_.get(), inbox_.bytes());
  if (!why.empty()) throw InputError(str("parallel.dp_copy_engine = true: ", why, "; set it to false"));
}

ZeroShards::~ZeroShards() {
  if (inbox_.get()) pair_->unregister_window(inbox_.get());
}

std::pair<size_t, size_t> ZeroShards::dp_slice(const Bucket& bk, int dp, int dp_rank) {
  const size_t share = bk.size / dp;
  const size_t begin = bk.offset + share * dp_rank;
  return {begin, begin + share};
}

TensorView ZeroShards::inbox_of(int b) const {
  return inbox().slice(inbox_offset_[b], layout_.buckets()[b].size / 2);
}

}  // namespace trident
