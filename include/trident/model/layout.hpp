// ParamLayout: every parameter tensor of THIS rank's shard (stage, TP rank): its logical name and
// global shape, the hyperslab this rank holds, and its offset in the flat parameter/gradient
// buffers. The single source of truth for sizes: model, optimizer, gradient sync, checkpoints
// and tests all read it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trident/config/run_config.hpp"

namespace trident {

// The layers a pipeline rank owns: with n_chunks model chunks (parallel.virtual_stages), chunk c
// is virtual stage c*n_stages + stage, the contiguous layers [layer_begin, layer_end) shifted by
// c*n_stages chunks; the first rank's chunk 0 holds the embedding, the last rank's last chunk the
// head. The rank's local blocks are its chunks' in order (local block i: layer(i)).
struct StageInfo {
  int stage = 0, n_stages = 1;
  int layer_begin = 0, layer_end = 0;   // chunk 0's global layer indices [begin, end)
  int n_chunks = 1;
  bool first() const { return stage == 0; }
  bool last() const { return stage == n_stages - 1; }
  int chunk_layers() const { return layer_end - layer_begin; }
  int n_layers() const { return chunk_layers() * n_chunks; }   // of all the rank's chunks
  int layer(int i) const;   // global layer of local block i
  // Chunk c as a stage of its own among n_stages * n_chunks virtual stages (itself when n_chunks = 1).
  StageInfo chunk(int c) const;
  static StageInfo of(const ModelConfig& m, int stage, int n_stages, int virtual_stages = 1);
};

struct ParamInfo {
  std::string name;                  // logical name, e.g. "blocks.3.attn.qkv.weight"
  std::vector<int64_t> global_shape;
  int split_dim = -1;                // dimension split across TP; -1 = replicated on every TP rank
  int64_t split_begin = 0;           // first index of this shard along split_dim
  int64_t split_size = 0;            // extent of this shard; may run past the global extent (zero padding)
  size_t numel = 0;                  // local elements
  size_t offset = 0;                 // element offset in the flat buffers
  int unit = 0;                      // gradient-completion unit (see ParamLayout)
  bool decay = false;                // AdamW weight decay applies (matrices)
  bool count_in_norm = true;         // counted once in the global grad norm (not a TP replica, not the tied copy);
                                     // the one copy a checkpoint save writes
  bool packed = false;               // starts right where the previous parameter ends (no alignment gap), so
                                     // that the two are one operand of a fused GEMM (llama's q|k|v, gate|up)
  double init_std = 0;               // > 0: N(0, init_std); else constant init_value
  double init_value = 0;

  std::vector<int64_t> local_shape() const;
  // Global flat index of local element i, or -1 when i is padding outside the global tensor.
  int64_t global_index(size_t i) const;
};

// A range of the flat gradient buffer reduced over DP as one message; its size is a multiple
// of dp * kAlign so that every ZeRO shard starts aligned.
struct Bucket {
  size_t offset = 0, size = 0;       // elements
  int unit_begin = 0, unit_end = 0;  // units [begin, end) in completion order
};

// Units, in the order their gradients become final during backward on this stage:
//   head (lnf and an untied lm_head or a reward model's score.weight, last stage) -> blocks from last to first -> embedding (gpt2's
//   wpe, or an untied wte; first stage) -> tied (wte).
// The tied embedding is last and alone in its bucket: it is summed over the first+last stage
// group after the schedule, before its DP reduction. Units that would be empty do not exist (-1).
// With model chunks the blocks go from the last chunk's last to the first chunk's first (the
// interleaved schedule's last backwards run the chunks in that order), and no bucket spans two
// chunks, so that every bucket's units finish in one chunk's backward (ZeRO-2 stages a bucket per
// micro-batch's backward, and a chunk's backwards of several micro-batches come between).
class ParamLayout {
 public:
  static constexpr size_t kAlign = 64;  // elements

  ParamLayout(const ModelConfig& m, const StageInfo& stage, int tp, int tp_rank, int dp, size_t bucket_elems);

  const std::vector<ParamInfo>& params() const { return params_; }
  const std::vector<Bucket>& buckets() const { return buckets_; }
  size_t total() const { return total_; }
  size_t bucket_elems() const { return bucket_elems_; }
  int n_units() const { return n_units_; }
  int head_unit() const { return head_unit_; }        // -1 when not the last stage
  int embedding_unit() const { return embed_unit_; }  // -1 when not the first stage or empty (tied llama)
  int tied_unit() const { return tied_unit_; }        // -1 on middle stages and without an LM head tied to wte
  // Key/value heads on this TP rank; with more TP ranks than key/value heads each holds one,
  // shared by kv_replicas() ranks (consecutive TP ranks), whose gradients of it are partial.
  int kv_heads_local() const { return kv_local_; }
  int kv_replicas() const { return kv_replicas_; }
  int block_unit(int global_layer) const;
  // The unit whose parameters the forward reads first: the tied embedding on the first stage,
  // else the stage's first block.
  int first_forward_unit() const;
  int bucket_of_unit(int unit) const;
  const ParamInfo& get(const std::string& name) const;
  const ParamInfo* find(const std::string& name) const;

  int vocab_start() const { return vocab_start_; }   // first vocabulary row of this TP shard
  int vocab_local() const { return vocab_local_; }   // rows per shard (padded vocab / tp)
  int vocab_valid() const { return vocab_valid_; }   // rows of this shard that are real vocabulary

 private:
  void add(ParamInfo p);
  std::vector<ParamInfo> params_;
  std::vector<Bucket> buckets_;
  size_t total_ = 0, bucket_elems_ = 0;
  int n_units_ = 0, head_unit_ = -1, embed_unit_ = -1, tied_unit_ = -1, first_block_unit_ = 0;
  StageInfo stage_;
  int vocab_start_ = 0, vocab_local_ = 0, vocab_valid_ = 0;
  int kv_local_ = 0, kv_replicas_ = 1;
};

}  // namespace trident
