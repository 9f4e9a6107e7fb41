// Trainer: one optimizer step = zero gradients, run the pipeline plan over the micro-batches,
// reduce gradients over DP (and the tied embedding), clip by the global norm, AdamW.
#pragma once

#include <chrono>
#include <cmath>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trident/config/run_config.hpp"
#include "trident/model/gpt.hpp"
#include "trident/train/batch_source.hpp"
#include "trident/train/executor.hpp"
#include "trident/train/grad_sync.hpp"
#include "trident/train/optimizer.hpp"
#include "trident/train/reference_model.hpp"
#include "trident/train/sharded_params.hpp"
#include "trident/train/step_guard.hpp"
#include "trident/train/step_timer.hpp"

namespace trident {

struct StepStats {
  int step = 0;             // optimizer updates done with this one: the first step is step 1
  double loss = 0;          // mean loss over the trained targets of the global batch (all, but for sft),
                            // or for a preference task (reward, dpo) over its pairs
  // Preference tasks, over the global batch's pairs (NaN otherwise): the share whose chosen answer
  // is ahead and the mean margin, score(chosen) - score(rejected) for a reward model and the
  // implicit rewards' difference for dpo.
  double accuracy = std::nan("");
  double margin = std::nan("");
  double grad_norm = 0;     // before clipping
  double lr = 0;
  double step_ms = 0;       // this step alone (StepTimer)
  double tokens_per_s = 0;
  double val_loss = std::nan("");   // set on steps that ran an evaluation
  double val_accuracy = std::nan("");   // and for a preference task its validation accuracy
  // Task dpo (NaN otherwise): the mean implicit rewards beta * (log pi - log ref) of the chosen
  // and the rejected responses.
  double chosen_reward = std::nan(""), rejected_reward = std::nan("");
  // Task grpo (NaN otherwise), over the step's generated answers: the verifier's mean reward and
  // its spread, the mean k3 KL estimate to the reference and the share of tokens whose ratio was
  // clipped and the policy's entropy -sum_v p_v log p_v per answer token (exact, over the whole
  // vocabulary at temperature 1; means over the rl.ppo_epochs updates), the mean answer length, the
  // share ended by the end-of-turn token, and the generation's share of the step's time.
  double reward = std::nan(""), reward_std = std::nan(""), kl = std::nan(""), clip_fraction = std::nan("");
  double entropy = std::nan(""), answer_tokens = std::nan(""), answers_stopped = std::nan("");
  double generation_s = std::nan("");
  // Task ppo (NaN otherwise): the value model's clipped loss and the share of answer tokens whose
  // maximum took the clipped branch (means over the rl.ppo_epochs updates), the rollout-time mean
  // value and explained variance of the returns, and the KL coefficient the step's rewards used
  // (kl above is then the rollout's mean k1 = log pi_old - log pi_ref per answer token).
  double value_loss = std::nan(""), value_clip_fraction = std::nan(""), value_mean = std::nan("");
  double explained_variance = std::nan(""), kl_coef = std::nan("");
  std::string skipped;              // why the update was not applied (StepGuard); empty: applied
  int skipped_steps = 0;            // updates skipped by this trainer so far, this one included
  // Filled by the training command's progress report (NaN where not measured):
  double mfu = std::nan("");              // model FLOPs utilisation (device backends)
  double peak_mem_bytes = std::nan("");   // the highest peak memory of any rank so far
  // The most GPU memory in use any rank's GPU reported so far (cudaMemGetInfo: CUDA context,
  // NCCL buffers and cuBLASLt workspace included); NaN on the CPU backend.
  double device_peak_bytes = std::nan("");
  double comm_wait = std::nan("");        // share of the step a compute stream waited on communication
  double elapsed_s = std::nan("");        // since the run's first step was queued
  double eta_s = std::nan("");            // to the last step, at the run's mean rate so far
  std::vector<double> mem_used_bytes, mem_total_bytes;   // per rank, on printed steps (memory monitor)
};

// An evaluation's mean loss; for a preference task (reward, dpo) also the accuracy and mean
// margin over its pairs.
struct EvalResult {
  double loss = 0;
  double accuracy = std::nan(""), margin = std::nan("");
};

// Elements of a data-parallel gradient bucket (fp32) for parallel.bucket_mb.
size_t bucket_elements(const ParallelConfig& p);
// Tasks grpo and ppo: the answers a rank generates at once (its share of the batch, at most
// rl.generation_batch), and the most tokens a generation step feeds (rl.prefill_tokens, at least
// what the Generator feeds anyway).
int rollout_generation_slots(const RunConfig& cfg);
int rollout_feed_rows(const RunConfig& cfg);
// Task ppo's value model's configuration: the run's, with the score head (model.score_head), the
// learning rates scaled to rl.value_lr and init.from naming rl.value_from when given.
RunConfig value_config(const RunConfig& cfg);
// How GptStage keeps activations for parallel.recompute, recompute_layers and sequence_parallel.
ActivationOptions activation_options(const RunConfig& cfg);

class Trainer {
 public:
  enum class Mode {
    Train,      // parameters initialised from train.seed; gradients, gradient sync and optimizer
    Evaluate,   // forward only: no gradients or optimizer state, and the parameters are left
                // for a checkpoint to fill (load_checkpoint(..., nullptr, ...)) before evaluate()
    Value,      // task ppo's value model (value_config's): a score head at every position trained
                // on the clipped value loss over the rollouts of the task ppo trainer that builds
                // and drives it (value_model()); its own parameters, gradients and AdamW
  };
  // cfg must be validated (parallel.dp resolved).
  Trainer(const RunConfig& cfg, const ParallelGroups& g, Backend& be, BatchSource& data, Mode mode = Mode::Train);
  ~Trainer();

  // One optimizer step, waiting for its loss and gradient norm.
  StepStats train_step(int step);
  // The same in two halves, so that the host reads the next batch while the update runs:
  // queue_step() runs a step up to its update, which it queues after reading the loss and norm
  // (they decide whether the update is applied); finish_step() returns the oldest queued step's
  // stats. Queue the next step before finishing this one (at most kMaxQueuedSteps queued), and
  // finish every queued step before reading the model (evaluation, checkpoints).
  static constexpr int kMaxQueuedSteps = 4;
  // Floats of a step's statistics (QueuedStep::stats), reduced over the world in one all-reduce.
  static constexpr int kStepStats = kLossSums + 1;
  void queue_step(int step);
  StepStats finish_step();
  int queued_steps() const { return static_cast<int>(queued_.size()); }
  // Steps [first, first + n), each queued before the previous one is finished, or with sync one
  // at a time (train_step); their stats in step order, all finished on return.
  std::vector<StepStats> train_steps(int first, int n, bool sync = false);
  // Mean token loss over `steps` global batches of `source` (forward only): its samples
  // [0, steps * global batch), the same set for every layout; over the trained targets only when
  // the source masks targets (the sum of their losses over the count of them in all the batches).
  // A preference task's is the mean pair loss, with its accuracy and margin, over its pairs.
  EvalResult evaluate(BatchSource& source, int steps);

  // Starts from given weights instead of the random initialisation (init.from), before any step:
  // `params` is this rank's layout().total() fp32 parameters; the fp32 master weights get them
  // exactly (not rounded through the compute dtype) and the moments stay zero.
  void set_initial_weights(const std::vector<float>& params);
  // Task dpo: the frozen reference model's weights (the initial ones: init.from), as `params` of
  // set_initial_weights. set_initial_weights sets them too; a resumed run calls this instead.
  void set_reference_weights(const std::vector<float>& params);
  // Task dpo with dpo.reference = precomputed: the per-sequence NLLs (sums of the trained targets'
  // token losses) of `source`'s samples [0, samples) under the model's current weights, forward
  // only, on every rank; before any step (init.from's weights: the reference's). Every rank calls it.
  std::vector<float> sequence_nll(BatchSource& source, int64_t samples);
  // Continue from a checkpoint: `step` steps are done and `consumed_samples` global samples used.
  void set_position(int64_t step, int64_t consumed_samples);
  // Global samples consumed once `step` steps are done.
  int64_t consumed_samples(int64_t step) const;

  // Makes every parameter current: with ZeRO-1 it completes the all-gathers the last update left
  // pending, so all ranks of a DP group call it together, before reading the parameters
  // (checkpoints, tests); with ZeRO-3 it waits for the gathers in flight (the parameters are
  // read from the shards: GptStage::copy_params). Elsewhere it does nothing.
  void sync_parameters();
  // The model; after training steps its parameters are current only once sync_parameters() ran.
  GptStage& model() {
    TRIDENT_CHECK(queued_.empty(), "model(): finish the queued steps first");
    return *model_;
  }
  Optimizer& optimizer() {
    TRIDENT_CHECK(optimizer_ != nullptr, "optimizer: this trainer was built for evaluation only");
    return *optimizer_;
  }
  const RunConfig& config() const { return cfg_; }
  // Task ppo: the value model's trainer (its model(), optimizer() and config() with init.from
  // naming its initial weights); nullptr for other tasks.
  Trainer* value_model() { return value_.get(); }
  // Task ppo: the KL coefficient of the next step's rewards (rl.kl_beta, adapted under
  // rl.kl_target); a resumed run sets the checkpoint's.
  double kl_coef() const { return kl_coef_; }
  void set_kl_coef(double c) { kl_coef_ = c; }
  // Host seconds spent reading training batches (on a device, mostly beside its work).
  double data_seconds() const { return data_s_; }

 private:
  // The step's micro-batches of this rank into the host buffers, then into batch_buf_; sets
  // batch_targets_ (every rank calls it: a masking source's count is summed over the world).
  void read_batch(BatchSource& source, int64_t step_first_sample);
  void upload_batch();
  // Online RL: the per-token head inputs of the rollouts (policy_inputs, or value_inputs for the
  // value model) of the micro-batch from global sample `first`, into host_policy_ at `base`; and
  // all of the step's again into backend memory, once task ppo's advantages are known.
  void read_rollout_inputs(int64_t first, size_t base);
  void refresh_rollout_inputs(int64_t step_first_sample);
  // Task ppo's value model: the values (n_micro*B*T, this rank's rows in sample order) of the
  // generated batch from step_first_sample, forward only, on the host.
  std::vector<float> token_values(int64_t step_first_sample);
  // Task ppo: the rollout's values and reference NLLs turn into advantages and returns
  // (RolloutSource::set_values); both models then read their head inputs again.
  void score_rollouts(int64_t step_first_sample);
  // Micro-batch `micro` of batch_buf_ into a slot of m (the policy, or the reference model).
  void load_micro(GptStage& m, int micro, int slot);
  // Task dpo: the reference model's sequence NLLs of the batch in the host buffers (before the
  // policy's forward, whose head reads them).
  void run_reference();
  LossSums reduce_loss(LossSums local);
  // Task dpo's reference log-probabilities come from the data source (dpo.reference = precomputed),
  // which must give them.
  bool precomputed_reference() const;
  void require_reference(const BatchSource& source) const;

  RunConfig cfg_;
  const ParallelGroups& g_;
  Backend& be_;
  BatchSource& data_;
  int n_micro_;
  SampleOrder sample_order_;
  std::unique_ptr<GptStage> model_;
  std::unique_ptr<PipelineExecutor> executor_, eval_executor_;
  std::unique_ptr<ReferenceModel> reference_;   // task dpo with dpo.reference = model, and grpo with rl.kl_beta > 0
  Mode mode_;
  RolloutSource* rollouts_ = nullptr;           // online RL: data_, which the policy generates
  std::unique_ptr<Trainer> value_;              // task ppo: the value model (Mode::Value)
  double kl_coef_ = 0;                          // task ppo: the KL coefficient of the next rewards
  // A queued step: what finish_step() needs to report it.
  struct QueuedStep {
    int step = 0;
    double lr = 0;
    std::chrono::steady_clock::time_point t0, done;   // host work began; results complete
    float stats[kStepStats] = {};   // [LossSums (kLossSums), squared gradient norm], read before the update
    double targets = 0;        // trained targets (preference tasks: pairs) of the global batch: the
                               // loss is their mean
    std::string skipped;       // StepGuard's reason; empty: the update was applied
    // Task grpo: the generation's statistics, and the sums over its rl.ppo_epochs updates of the
    // LossSums and squared gradient norms (stats then holds the last update's).
    RolloutStats rollout;
    double loss_sum = 0, clipped_sum = 0, kl_sum = 0, entropy_sum = 0;
    int updates = 1;
    // Task ppo: the value model's loss and clipped positions summed over the updates, and the
    // KL coefficient of the rewards.
    double value_loss_sum = 0, value_clipped_sum = 0, kl_coef = std::nan("");
  };
  // One optimizer update on the uploaded batch: gradients of the micro-batches (each target's
  // scaled by 1/tokens), their sync, q.stats (loss sums and squared norm, over the world) read,
  // then the update unless StepGuard skips it (q.skipped). adam_step numbers the update (1 first).
  void update(QueuedStep& q, double tokens, int adam_step);
  // Task ppo: one update of the value model on the same batch, its stats summed into q's; a
  // skipped value update makes q skipped (when the policy's was not).
  void update_value(QueuedStep& q, int adam_step);
  std::deque<QueuedStep> queued_;
  StepTimer timer_;
  std::unique_ptr<ParamLayout> shard_layout_;   // the model's layout, for shards_ (built before the model)
  std::unique_ptr<ZeroShards> shards_;   // before sync_ and optimizer_, which use it
  std::unique_ptr<ShardedParams> sharded_;   // ZeRO-3 (dp > 1): the model's parameters, before the model
  std::unique_ptr<GradSync> sync_;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<int32_t> host_tokens_;   // one micro-batch as the source gives it: B x (T + 1)
  std::vector<int32_t> host_batch_;    // [inputs | targets | doc_starts] of all micro-batches, as batch_buf_
  std::vector<uint8_t> host_mask_;     // one micro-batch's target mask (B, T), of a masking source
  // Trained targets of the global batch in the host buffers: G*T, or fewer when the source masks
  // some (counted over every micro-batch and DP rank before the backward scales by its inverse).
  // A preference task counts pairs instead: a reward model its scored pairs (those whose two
  // sequences train a target), dpo all of them.
  double batch_targets_ = 0;
  int64_t read_step_ = -1;   // the step whose batch the host buffers hold (-1: none)
  bool packed_ = false;      // the host buffers hold packed sequences (their doc_starts are valid)
  Buffer batch_buf_;         // I32 [inputs | targets | doc_starts] of the step's micro-batches
  // Online RL: [old_logp | coef | coef_adv] of all micro-batches, (n_micro*B*T) each; the value
  // model's [old_values | returns | coef].
  std::vector<float> host_policy_;
  Buffer policy_buf_;                // the same in backend memory
  // Task dpo with a precomputed reference, on the last stage: the step's reference sequence NLLs
  // (n_micro, B) f32 as the source gives them, and in backend memory.
  std::vector<float> host_ref_nll_;
  Buffer ref_nll_buf_;
  Buffer stats_buf_;         // f32 QueuedStep::stats
  StepGuard guard_;
  int skipped_steps_ = 0;
  double data_s_ = 0;
  int64_t base_step_ = 0, base_samples_ = 0;   // data position (SampleOrder::step_first)
};

}  // namespace trident
