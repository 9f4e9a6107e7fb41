// Generator: batched autoregressive decoding with a KV cache on the training layout (any tp and pp;
// each DP rank generates its own prompts), reusing the model's weights and block forward; only
// attention reads the cache. Under pipeline parallelism each stage runs its blocks with its own
// cache and sends the rows on, the last samples, and every stage receives the sampled tokens.
// Sampling is keyed on (seed, sequence, position), so a sequence's tokens do not depend on the
// batch it runs in or on the layout.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "trident/model/gpt.hpp"

namespace trident {

struct SamplingParams {
  double temperature = 1.0;   // 0: greedy (argmax), deterministic
  int top_k = 0;              // keep the k most likely tokens; 0 = all
  double top_p = 1.0;         // keep the smallest set whose probability reaches p; 1 = all
  // Sample only ids below this (a tokenizer smaller than the model's padded vocabulary: Qwen's
  // 151,669 tokens in 151,936 rows), the distribution and its log-probs renormalised over them;
  // 0 = the whole vocabulary.
  int vocab_limit = 0;
  // Top-k and top-p need the whole sorted vocabulary: their logits are gathered to the host. Plain
  // temperature sampling and greedy decoding sample on the device (Backend::sample_shard).
  bool on_device() const { return top_k == 0 && top_p >= 1.0; }
};

struct GenerationParams {
  SamplingParams sampling;
  int max_new_tokens = 64;
  std::vector<int32_t> stop_tokens;   // a sequence ends after sampling one of these (kept in its output)
  uint64_t seed = 1234;
};

// One prompt's continuation: the sampled tokens and, for each, its log-probability under the
// model's distribution at temperature 1 over the whole vocabulary (log_softmax(logits)[token], what
// a training forward of the same tokens computes; GRPO's importance ratio divides by it).
struct Completion {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  bool stopped = false;   // ended at a stop token (else at max_new_tokens or the context's end)
};

// A sampled token and its log-probability (see Completion).
struct SampledToken {
  int32_t token;
  float logprob;
};

// Draws the token of sequence `sequence` at `position` from full-vocabulary logits (V): the
// candidates are the top_k most likely (ties by id), then the fewest of those whose probability at
// the temperature reaches top_p; the draw is the candidate with the highest logit / temperature +
// gumbel_at(seed, sequence, position, id) (the highest logit, lowest id on ties, at temperature 0).
SampledToken sample_token(const std::vector<float>& logits, const SamplingParams& p, uint64_t seed, uint64_t sequence,
                          uint64_t position);

// The draw and its log-probability from sample_shard's stats of one row on each of `shards` TP
// ranks (shard k's kSampleStats floats at stats + k * stride): the shards' best scores compared
// (ties to the lowest id) and their exponential sums added at the overall maximum.
SampledToken combine_sample_stats(const float* stats, int shards, size_t stride);

// The prompts [first, last) of n that DP rank `rank` of `dp` generates: contiguous shares whose
// sizes differ by at most one.
std::pair<size_t, size_t> prompt_share(size_t n, int rank, int dp);

// The rows a feed of `rows` tokens (or a head of `rows` sequences) runs its GEMMs on: the next
// power of two up to 64, then the next multiple of 64. A handful of shapes instead of one per
// step's count, each a GEMM plan built (and autotuned on a GPU) on first use.
int padded_rows(int rows);

class Generator {
 public:
  // Cache for `slots` sequences at once of max_len positions each (at most model.n_positions);
  // one feed takes at most max(max_rows, slots + max_len) tokens (0: slots + max_len), which
  // bounds how many prompts a step of generate() prefills (the activations are that many rows).
  Generator(GptStage& model, int slots, int max_len, int max_rows = 0);
  // The device memory such a generator allocates on a rank of pipeline stage st of a tp-way split
  // model whose LM head has vocab_local columns there (the planner's count).
  static size_t device_bytes(const ModelConfig& m, const StageInfo& st, int tp, size_t vocab_local, DType act,
                             int slots, int max_len, int max_rows = 0);
  ~Generator();

  // Continuations of prompts (each non-empty, shorter than max_len); prompts[i] is sequence
  // first_sequence + i of the sampling keys. Runs `slots` sequences at a time; a finished one
  // leaves the batch and the next prompt takes its slot. Collective over the TP and pipeline
  // groups (every stage gives the same prompts and gets the same completions). The stages run one
  // after the other on a step's whole batch: with pp stages each is busy 1/pp of the time.
  std::vector<Completion> generate(const std::vector<std::vector<int32_t>>& prompts, const GenerationParams& p,
                                   uint64_t first_sequence = 0);

  // The steps generate() is made of. feed() appends tokens[i] to the sequence in cache slot
  // slots[i] at its current length (0 after reset(slot)), on every stage; then logits() gives the
  // full-vocabulary logits (rows, V) of each fed sequence's last token on the last stage, identical
  // on every TP rank, and sample() draws from them (sequences[i] and lengths-after-feed as the
  // keys) and returns the draws on every stage.
  void feed(const std::vector<int>& slots, const std::vector<std::vector<int32_t>>& tokens);
  std::vector<float> logits();
  std::vector<SampledToken> sample(const SamplingParams& p, uint64_t seed, const std::vector<uint64_t>& sequences);
  void reset(int slot) { length_[slot] = 0; }
  int length(int slot) const { return length_[slot]; }
  int slots() const { return slots_; }
  int max_len() const { return max_len_; }
  int max_rows() const { return rows_cap_; }   // tokens one feed() takes at most

 private:
  GptStage& model_;
  int slots_, max_len_, rows_cap_;
  std::vector<int> length_;             // positions written of each slot
  std::vector<int> fed_slots_;          // the slots of the last feed, in order
  std::vector<float> rope_host_;        // llama: the rotary table (max_len, HS), rows gathered per feed
  // Host tables of a step, kept between steps so that decoding allocates nothing per step: feed's
  // index tables, the last row of each fed sequence, the gathered RoPE rows, sample's keys and the
  // sampling stats read back.
  std::vector<int32_t> index_host_, keys_host_, drawn_host_;
  std::vector<int> last_rows_;
  std::vector<float> rope_rows_host_, stats_host_;
  // A decode step (every fed sequence one token) runs on padded_rows(n) rows, the padding rows at
  // slot -1, so that its ops and their arguments depend on that row count only: replayed per row
  // count (Backend::make_replay, a CUDA graph), the blocks' and the head's apart. With tp > 1 the
  // ops are queued each time (the TP collectives are not captured).
  bool step_ = false;
  std::map<int, std::unique_ptr<StreamReplay>> block_replays_;
  std::map<std::tuple<int, uint64_t, float, int>, std::unique_ptr<StreamReplay>> head_replays_;
  StreamReplay& replay(std::unique_ptr<StreamReplay>& r);
  Buffer cache_buf_, act_buf_;
  // The device views, bound into cache_buf_ and act_buf_.
  struct Views {
    std::vector<TensorView> k_cache, v_cache;   // per layer (slots, NKV/tp, max_len, HS)
    // Rp = padded_rows(rows_cap), Sp = padded_rows(slots): the rows the GEMMs run on.
    BlockActs acts;                             // (Rp rows), shared by the layers
    // (Rp, C), (rows_cap, C); (Rp, 4) int32 and the keys (Sp, 2); (Rp, HS) f32
    TensorView x, pe, index, rope_rows;
    // The fed sequences' last rows and the head (last stage): (Sp, C) x2, (Sp) x2, (Sp, V/tp); stats
    // (tp, Sp, kSampleStats)
    TensorView last, lnf, lnf_mean, lnf_rstd, logits, stats;
    TensorView drawn;   // pp > 1: the draws sent to every stage, (slots, 2) int32
  };
  static void plan(ArenaLayout& cache, ArenaLayout& a, Views& v, const ModelConfig& m, const StageInfo& st, int tp,
                   size_t vocab_local, DType act, int slots, int max_len, int rows_cap);
  // sample()'s draws on the last stage, and their broadcast from there to the other stages.
  std::vector<SampledToken> draw(const SamplingParams& p, uint64_t seed, const std::vector<uint64_t>& sequences);
  void share_drawn(std::vector<SampledToken>& out);
  Views v_;
};

}  // namespace trident
