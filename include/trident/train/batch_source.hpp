// BatchSource: where training samples come from, as the trainer sees it (file formats live in io).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace trident {

class GptStage;

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Tokens of global samples [first, first + count), each seq_len + 1 tokens, into out (count, T+1).
  // A pure function of the sample index: any DP layout reading the same indices gets the same data.
  virtual void samples(int64_t first, int count, int32_t* out) = 0;
  // Whether some targets of the samples are left out of the loss (fine-tuning data: prompts and
  // padding); target_mask() then says which. The loss is the mean over the trained targets.
  virtual bool masks_targets() const { return false; }
  // The same samples' target mask into out (count, T): 1 where target t (token t + 1 of the sample)
  // is trained, 0 where the loss ignores it. Called only when masks_targets().
  virtual void target_mask(int64_t /*first*/, int /*count*/, uint8_t* /*out*/) {}
  // Whether a sample packs several documents (data.pack); doc_starts() then says where each
  // begins: out (count, T) gets, for each input position t, the position at which its document
  // starts (the doc_start of backend.hpp). Called only when packs_documents().
  virtual bool packs_documents() const { return false; }
  virtual void doc_starts(int64_t /*first*/, int /*count*/, int32_t* /*out*/) {}
  // Task dpo with dpo.reference = precomputed: whether the source gives the frozen reference
  // model's per-sequence NLLs (sums of the trained targets' token losses); reference_nll() then
  // gives those of samples [first, first + count) into out (count).
  virtual bool gives_reference_nll() const { return false; }
  virtual void reference_nll(int64_t /*first*/, int /*count*/, float* /*out*/) {}
};

// Which global samples a rank reads. A step's global batch is G consecutive samples; DP rank r of
// dp reads its share [r*G/dp, (r+1)*G/dp) of it in micro-batches of B, micro-batch m from
// sample r*(G/dp) + m*B, so the step's global batch is the same set of samples for every layout.
struct SampleOrder {
  int64_t global_batch;   // G, a multiple of dp * micro_batch
  int micro_batch;        // B
  int dp;

  // The first sample of step `step`, once `base_step` steps had consumed `base_samples` samples
  // (a resumed run continues from the checkpoint's count).
  int64_t step_first(int64_t base_step, int64_t base_samples, int64_t step) const {
    return base_samples + (step - base_step) * global_batch;
  }
  // The first sample of micro-batch `micro` of DP rank dp_rank in the batch from step_first.
  int64_t micro_first(int64_t step_first, int dp_rank, int micro) const {
    return step_first + dp_rank * (global_batch / dp) + static_cast<int64_t>(micro) * micro_batch;
  }
};

// What one step's generation gave, over all its answers (every rank gets the same values).
struct RolloutStats {
  double reward_mean = std::nan(""), reward_std = std::nan("");   // std over all answers (divisor n)
  double answer_tokens = 0;     // mean answer length in tokens
  double stopped = 0;           // share of answers that ended at the end-of-turn token
  double answers = 0;           // answers of the global batch
  double total_answer_tokens = 0;
  double seconds = 0;           // the generation's wall time (the slowest rank's)
  // Task ppo (NaN otherwise), from RolloutSource::set_values: the mean k1 = log pi_old - log pi_ref
  // per answer token and its sum per answer (the adaptive KL control's measure), the mean
  // rollout-time value and the values' explained variance of the returns, 1 - Var(R - V) / Var(R),
  // over the answer tokens.
  double kl = std::nan(""), kl_per_answer = std::nan(""), value_mean = std::nan(""),
         explained_variance = std::nan("");
};

// Online RL (tasks grpo and ppo): samples that the policy itself generates at the start of each
// step. The trainer calls generate() with the step's first global sample before reading the step's
// batch; samples() and target_mask() then serve those samples (prompt and answer tokens, the
// answer's targets trained), and policy_inputs() their per-token loss inputs (task ppo's once
// set_values() has turned the value model's values into advantages).
class RolloutSource : public BatchSource {
 public:
  // The policy whose answers the samples are (its weights current when generate() runs).
  virtual void attach(GptStage& policy) = 0;
  // Releases what attach() built on the policy, before the policy goes.
  virtual void detach() = 0;
  // Generates the answers of this rank's share of the global samples [step_first, step_first + G)
  // (SampleOrder's: a DP rank's contiguous share). Collective over the world.
  virtual void generate(int64_t step_first) = 0;
  // For the same samples as samples(), (count, T) f32 each: the generation-time log-probability
  // of each trained target, the target's weight in the batch loss's mean (0 where not trained),
  // and that weight times the answer's advantage.
  virtual void policy_inputs(int64_t first, int count, float* old_logp, float* coef, float* coef_adv) = 0;
  // Task ppo, once generate() ran: this rank's rows' rollout-time values and reference token NLLs
  // (rows x T each, rows in sample order: the trainer's micro-batches one after the other; 0
  // outside the answers, ref_nll empty without a reference) turn into the KL-shaped rewards,
  // GAE's advantages (whitened over the global batch) in policy_inputs' coef_adv, and the value
  // model's inputs. Collective over the world; only the last pipeline stage's inputs count (the
  // other stages' results are not read).
  virtual void set_values(const std::vector<float>& values, const std::vector<float>& ref_nll, double kl_coef) = 0;
  // For the same samples as samples(), (count, T) f32 each, after set_values: the rollout-time
  // values, the returns (advantages + values, before whitening), and each answer token's weight in
  // the value loss's mean (policy_inputs' coef).
  virtual void value_inputs(int64_t first, int count, float* old_values, float* returns, float* coef) = 0;
  // The last generate()'s statistics.
  virtual RolloutStats stats() const = 0;
  bool masks_targets() const override { return true; }
};

}  // namespace trident
