// ZeroShards: how the DP ranks share each gradient bucket, the one contract between GradSync (which
// reduces the gradients) and the Optimizer (which updates from them). Owned by the Trainer.
//
// Without ZeRO every rank reduces and updates whole buckets. With ZeRO-1 DP rank r reduces and
// updates its shard of each bucket (dp_slice). With the copy engines as well (parallel.
// dp_copy_engine: dp = 2) a bucket is not reduced in place: its other half goes to the other
// rank's inbox (PairExchange::scatter_partial_async, on GPUs by the copy engines into the other
// GPU's memory) and the optimizer adds the inbox to its shards as it reads them. The inbox holds
// every bucket's shard in bucket order, the optimizer state's layout.
#pragma once

#include <utility>
#include <vector>

#include "trident/backend/backend.hpp"
#include "trident/model/layout.hpp"
#include "trident/parallel/groups.hpp"
#include "trident/parallel/pair_exchange.hpp"

namespace trident {

class ZeroShards {
 public:
  // With copy_engine, collective over the DP pair: registers the inbox as a copy-engine window.
  ZeroShards(const ParamLayout& layout, const ParallelGroups& g, Backend& be, bool zero, bool copy_engine);
  ~ZeroShards();
  ZeroShards(const ZeroShards&) = delete;
  ZeroShards& operator=(const ZeroShards&) = delete;

  // Elements [begin, end) of the flat buffer that DP rank dp_rank of dp owns in bucket bk: its
  // ZeRO shard, also the slice whose squares it contributes to the gradient norm.
  static std::pair<size_t, size_t> dp_slice(const Bucket& bk, int dp, int dp_rank);

  bool zero() const { return zero_; }
  // The other rank's partials of this rank's shards (copy engine), else empty.
  TensorView inbox() const { return inbox_.view(DType::F32); }
  // Bucket b's shard in the inbox (copy engine only).
  TensorView inbox_of(int b) const;
  // The DP pair's exchange where there is an inbox, else null.
  PairExchange* pair() const { return pair_; }

 private:
  const ParamLayout& layout_;
  bool zero_;
  PairExchange* pair_ = nullptr;
  Buffer inbox_;
  std::vector<size_t> inbox_offset_;   // of each bucket's shard
};

}  // namespace trident
