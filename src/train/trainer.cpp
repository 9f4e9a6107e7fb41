// The training step and its accounting (loss over the global batch, timing).
#include "trident/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "trident/core/fault_point.hpp"
#include "trident/core/trace.hpp"
#include "trident/parallel/host_collectives.hpp"
#include "trident/train/lr_schedule.hpp"
#include "trident/train/rl_loss.hpp"

namespace trident {

size_t bucket_elements(const ParallelConfig& p) {
  return static_cast<size_t>(p.bucket_mb * (1 << 20) / sizeof(float));
}

int rollout_generation_slots(const RunConfig& cfg) {
  return static_cast<int>(std::min<int64_t>(cfg.train.global_batch_size / cfg.parallel.dp, cfg.rl.generation_batch));
}

int rollout_feed_rows(const RunConfig& cfg) { return cfg.rl.prefill_tokens; }

RunConfig value_config(const RunConfig& cfg) {
  RunConfig v = cfg;
  v.model.score_head = true;
  if (cfg.rl.value_lr > 0) {
    v.train.lr = cfg.rl.value_lr;
    v.train.min_lr = cfg.train.min_lr * cfg.rl.value_lr / cfg.train.lr;
  }
  if (!cfg.rl.value_from.empty()) v.init.from = cfg.rl.value_from;
  return v;
}

ActivationOptions activation_options(const RunConfig& cfg) {
  return ActivationOptions{cfg.recompute_plan(), cfg.parallel.sequence_parallel};
}

Trainer::Trainer(const RunConfig& cfg, const ParallelGroups& g, Backend& be, BatchSource& data, Mode mode)
    : cfg_(cfg), g_(g), be_(be), data_(data), n_micro_(cfg.micro_batches_per_step()),
      sample_order_{cfg.train.global_batch_size, cfg.train.micro_batch_size, g.topo.dp()},
      guard_(cfg.train.spike_zscore) {
  const int B = cfg.train.micro_batch_size, T = cfg.model.seq_len;
  const bool train = mode != Mode::Evaluate;
  mode_ = mode;
  const int chunks = cfg.parallel.virtual_stages;
  std::vector<Action> eval_plan = make_forward_plan(g.topo.pp(), g.coord.pp, n_micro_, chunks), plan;
  int slots = PipelineExecutor::slots_needed(eval_plan);
  if (train) {
    plan = make_plan(parse_schedule(cfg.parallel.schedule), g.topo.pp(), g.coord.pp, n_micro_, chunks);
    slots = std::max(slots, PipelineExecutor::slots_needed(plan));
  }
  if (train) {
    // ZeRO-2's staging buffers hold the model's gradients, so they come first, on a layout of
    // their own (the model's, built from the same arguments).
    shard_layout_ = std::make_unique<ParamLayout>(cfg.model, StageInfo::of(cfg.model, g.coord.pp, g.topo.pp(), chunks),
                                                  g.topo.tp(), g.coord.tp, g.topo.dp(), bucket_elements(cfg.parallel));
    shards_ = std::make_unique<ZeroShards>(*shard_layout_, g, be, cfg.parallel.zero);
    // ZeRO-3: the parameters as well.
    if (cfg.parallel.zero >= 3 && shards_->staged())
      sharded_ = std::make_unique<ShardedParams>(*shard_layout_, g, be, *shards_);
  }
  ActivationOptions acts = activation_options(cfg);
  acts.weight_stashes = PipelineExecutor::stashes_needed(plan);   // zero_bubble's split backward
  acts.recv_inbox = PipelineExecutor::receives_into_inbox(plan);
  model_ = std::make_unique<GptStage>(cfg.model, g, be, B, slots, bucket_elements(cfg.parallel), train,
                                      acts, shards_ && shards_->staged() ? shards_.get() : nullptr,
                                      chunks, sharded_.get());
  model_->set_tp_overlap(cfg.parallel.tp_overlap);
  model_->set_tp_sm_margin(cfg.parallel.tp_sm_margin);
  model_->set_tp_fused_sum(cfg.parallel.tp_fused_sum);
  model_->set_tp_split_layernorm_bwd(cfg.parallel.tp_split_layernorm_bwd);
  if (cfg.task == "dpo") {
    TRIDENT_CHECK(train, "task dpo: the loss needs the reference model of a training trainer");
    model_->set_dpo(DpoArgs{static_cast<float>(cfg.dpo.beta), static_cast<float>(cfg.dpo.label_smoothing),
                            1.0f, cfg.dpo.loss == "ipo" ? DpoLoss::Ipo : DpoLoss::Sigmoid});
    if (cfg.dpo.reference == "model") reference_ = std::make_unique<ReferenceModel>(cfg, g, be, n_micro_);
  }
  if (cfg.online_rl()) {
    TRIDENT_CHECK(train, str("task ", cfg.task, ": a training trainer generates its own samples"));
    rollouts_ = dynamic_cast<RolloutSource*>(&data);
    TRIDENT_CHECK(rollouts_ != nullptr, str("task ", cfg.task, ": the trainer's data must be a RolloutSource"));
    const RlConfig& rl = cfg.rl;
    if (mode == Mode::Value) {
      model_->set_value_loss(ValueArgs{static_cast<float>(rl.value_clip), 1.0f});
    } else {
      // PPO's KL penalty is in the rewards (score_rollouts), not in the loss.
      const float kl_in_loss = cfg.task == "grpo" ? static_cast<float>(rl.kl_beta) : 0.0f;
      model_->set_policy_loss(PolicyArgs{static_cast<float>(rl.clip_eps), kl_in_loss, 1.0f});
      if (cfg.has_reference())
        reference_ = std::make_unique<ReferenceModel>(cfg, g, be, n_micro_, ReferenceModel::Output::TokenNll);
      if (cfg.task == "ppo") value_ = std::make_unique<Trainer>(value_config(cfg), g, be, data, Mode::Value);
      kl_coef_ = rl.kl_beta;
    }
  }
  eval_executor_ = std::make_unique<PipelineExecutor>(*model_, *g.pp, std::move(eval_plan));
  if (train) {
    executor_ = std::make_unique<PipelineExecutor>(*model_, *g.pp, std::move(plan));
    sync_ = std::make_unique<GradSync>(model_->layout(), model_->grads(), g, be, *shards_);
    optimizer_ = std::make_unique<Optimizer>(model_->layout(), model_->params(), model_->grads(), g, be,
                                             cfg.train, *shards_, cfg.parallel.offload_optimizer);
    if (optimizer_->offloaded())
      sync_->set_bucket_final([this](int bucket, CommWork* reduction) { optimizer_->gradients_final(bucket, reduction); });
    if (sharded_)
      model_->set_param_fetch(sharded_.get());
    else
      model_->set_param_fetch(optimizer_.get());
    model_->init_params(cfg.train.seed);
    optimizer_->init_master();
    // Until init.from's weights arrive (set_initial_weights), the reference is the policy's
    // random start, so a run without them (trident bench) computes on defined values.
    if (reference_) reference_->set_weights(model_->params());
  }
  const size_t tokens_per_step = static_cast<size_t>(n_micro_) * B * T;
  host_tokens_.resize(static_cast<size_t>(B) * (T + 1));
  host_mask_.resize(static_cast<size_t>(B) * T);
  host_batch_.resize(3 * tokens_per_step);
  batch_buf_ = Buffer(be, 3 * tokens_per_step * sizeof(int32_t));
  if (rollouts_) {
    host_policy_.resize(3 * tokens_per_step);
    policy_buf_ = Buffer(be, 3 * tokens_per_step * sizeof(float));
    if (mode_ == Mode::Train) rollouts_->attach(*model_);
  }
  if (precomputed_reference() && model_->stage().last()) {
    host_ref_nll_.resize(static_cast<size_t>(n_micro_) * B);
    ref_nll_buf_ = Buffer(be, host_ref_nll_.size() * sizeof(float));
  }
  stats_buf_ = Buffer(be, kStepStats * sizeof(float));
}

Trainer::~Trainer() {
  if (rollouts_ && mode_ == Mode::Train) rollouts_->detach();
}

void Trainer::set_initial_weights(const std::vector<float>& params) {
  TRIDENT_CHECK(queued_.empty() && optimizer_ != nullptr, "set_initial_weights: a training trainer before any step");
  TRIDENT_CHECK(params.size() == model_->layout().total(), "set_initial_weights: not this rank's layout");
  Buffer staging(be_, params.size() * sizeof(float));
  TensorView f32 = staging.view(DType::F32).slice(0, params.size());
  be_.copy_from_host(f32, params.data());
  model_->assign_params(f32);
  optimizer_->init_master(f32);
  be_.synchronize();
  if (reference_) reference_->set_weights(params);
}

void Trainer::set_reference_weights(const std::vector<float>& params) {
  TRIDENT_CHECK(reference_ != nullptr, "set_reference_weights: this task has no reference model");
  reference_->set_weights(params);
}

void Trainer::set_position(int64_t step, int64_t consumed_samples) {
  TRIDENT_CHECK(queued_.empty(), "set_position: finish the queued steps first");
  base_step_ = step;
  base_samples_ = consumed_samples;
  read_step_ = -1;   // a batch read ahead belongs to the old position
}

int64_t Trainer::consumed_samples(int64_t step) const {
  return sample_order_.step_first(base_step_, base_samples_, step);
}

void Trainer::sync_parameters() {
  TRIDENT_CHECK(queued_.empty(), "sync_parameters: finish the queued steps first");
  if (optimizer_) optimizer_->gather_all();
  if (sharded_) sharded_->finish();
  if (value_) value_->sync_parameters();
}

// The micro-batches of this DP rank in SampleOrder's arrangement. A masked target becomes
// kIgnoredTarget, which the cross-entropy leaves out of the loss and the gradient (and which
// places a reward model's score). Packed sequences' doc_starts go to every stage (each one's
// attention reads them). A preference task over a source without masks (trident bench's random
// tokens) trains every target of every pair.
void Trainer::read_batch(BatchSource& source, int64_t step_first_sample) {
  const int B = cfg_.train.micro_batch_size, T = cfg_.model.seq_len;
  const bool masked = source.masks_targets(), pairs = cfg_.preference_task();
  TRIDENT_CHECK(!pairs || B % 2 == 0, str("task ", cfg_.task, " reads pairs: an even micro-batch"));
  packed_ = source.packs_documents();
  batch_targets_ = static_cast<double>(cfg_.train.global_batch_size) * T;
  uint64_t trained = 0;   // targets this rank trains, when masked (preference tasks: its pairs)
  const auto t0 = std::chrono::steady_clock::now();
  const bool reads = packed_ || model_->stage().first() || model_->stage().last();
  for (int micro = 0; micro < n_micro_ && reads; ++micro) {
    const int64_t first = sample_order_.micro_first(step_first_sample, g_.coord.dp, micro);
    source.samples(first, B, host_tokens_.data());
    if (masked) source.target_mask(first, B, host_mask_.data());
    if (!host_ref_nll_.empty() && source.gives_reference_nll())
      source.reference_nll(first, B, host_ref_nll_.data() + static_cast<size_t>(micro) * B);
    const size_t base = static_cast<size_t>(micro) * B * T, n = host_batch_.size() / 3;
    if (packed_) source.doc_starts(first, B, host_batch_.data() + 2 * n + base);
    if (rollouts_) read_rollout_inputs(first, base);
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < T; ++t) {
        const bool train = !masked || host_mask_[b * T + t];
        host_batch_[base + b * T + t] = host_tokens_[b * (T + 1) + t];
        host_batch_[n + base + b * T + t] = train ? host_tokens_[b * (T + 1) + t + 1] : kIgnoredTarget;
        if (!pairs) trained += train;
      }
    // A reward model scores a pair when both its sequences have a trained target
    // (Backend::reward_fwd); DPO's loss counts every pair (one without targets adds ln 2, no gradient).
    auto any_trained = [&](int b) {
      return !masked || std::any_of(&host_mask_[b * T], &host_mask_[b * T] + T, [](uint8_t m) { return m != 0; });
    };
    for (int b = 0; pairs && b < B; b += 2) trained += !cfg_.model.score_head || (any_trained(b) && any_trained(b + 1));
  }
  if (&source == &data_) data_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rollouts_) {
    batch_targets_ = 1;   // each answer token's weight (policy_inputs' coef) holds the batch mean's normalisation
    return;
  }
  if (!masked && !pairs) return;
  // Each DP replica's count once: from its last stage's TP rank 0, as its loss (reduce_loss).
  std::vector<uint64_t> count{model_->stage().last() && g_.coord.tp == 0 ? trained : 0};
  all_reduce(count, HostReduce::Sum, g_);
  batch_targets_ = static_cast<double>(count[0]);
}

void Trainer::read_rollout_inputs(int64_t first, size_t base) {
  const int B = cfg_.train.micro_batch_size;
  const size_t n = host_policy_.size() / 3;
  float* p = host_policy_.data() + base;
  if (mode_ == Mode::Value)
    rollouts_->value_inputs(first, B, p, p + n, p + 2 * n);
  else
    rollouts_->policy_inputs(first, B, p, p + n, p + 2 * n);
}

void Trainer::refresh_rollout_inputs(int64_t step_first_sample) {
  if (!model_->stage().last()) return;
  const size_t bt = static_cast<size_t>(cfg_.train.micro_batch_size) * cfg_.model.seq_len;
  for (int micro = 0; micro < n_micro_; ++micro)
    read_rollout_inputs(sample_order_.micro_first(step_first_sample, g_.coord.dp, micro), micro * bt);
  be_.copy_from_host(policy_buf_.view(DType::F32), host_policy_.data());
}

std::vector<float> Trainer::token_values(int64_t step_first_sample) {
  TRIDENT_CHECK(mode_ == Mode::Value, "token_values: not a value model");
  TraceRange range("value forward");
  const size_t bt = static_cast<size_t>(cfg_.train.micro_batch_size) * cfg_.model.seq_len;
  read_batch(data_, step_first_sample);
  upload_batch();
  Buffer values_buf(be_, n_micro_ * bt * sizeof(float));
  const TensorView values = values_buf.view(DType::F32);   // (n_micro, B*T)
  eval_executor_->run(
      [&](int micro, int slot) {
        load_micro(*model_, micro, slot);
        if (model_->stage().last())
          model_->set_value_inputs(slot, TensorView{}, TensorView{}, TensorView{}, values.slice(micro * bt, bt));
      },
      false, 0.0f, UnitDone{});
  std::vector<float> out(n_micro_ * bt);
  if (model_->stage().last()) be_.copy_to_host(out.data(), values);
  return out;
}

// The values and the reference's log-probabilities are on the last stage (zeros and none on the
// others), whose advantages alone the policy's head reads and whose sums alone set_values counts.
void Trainer::score_rollouts(int64_t step_first_sample) {
  const std::vector<float> values = value_->token_values(step_first_sample);
  std::vector<float> ref_nll;
  if (reference_ && model_->stage().last()) {
    ref_nll.resize(values.size());
    be_.copy_to_host(ref_nll.data(), reference_->token_nll());
  }
  rollouts_->set_values(values, ref_nll, kl_coef_);
  refresh_rollout_inputs(step_first_sample);
  value_->refresh_rollout_inputs(step_first_sample);
}

void Trainer::upload_batch() {
  if (!packed_ && !model_->stage().first() && !model_->stage().last()) return;
  // [inputs | targets], and the doc_starts only when packed.
  const size_t n = host_batch_.size() / 3;
  be_.copy_from_host(batch_buf_.view(DType::I32).slice(0, packed_ ? 3 * n : 2 * n), host_batch_.data());
  if (rollouts_ && model_->stage().last()) be_.copy_from_host(policy_buf_.view(DType::F32), host_policy_.data());
  if (!host_ref_nll_.empty()) be_.copy_from_host(ref_nll_buf_.view(DType::F32), host_ref_nll_.data());
}

void Trainer::load_micro(GptStage& m, int micro, int slot) {
  const int B = cfg_.train.micro_batch_size;
  const size_t bt = static_cast<size_t>(B) * cfg_.model.seq_len;
  const size_t n = host_batch_.size() / 3;
  TensorView all = batch_buf_.view(DType::I32);
  if (m.stage().first() || m.stage().last()) m.set_tokens(slot, all.slice(micro * bt, bt), all.slice(n + micro * bt, bt));
  m.set_doc_starts(slot, packed_ ? all.slice(2 * n + micro * bt, bt) : TensorView{});
  if (&m != model_.get() || !m.stage().last()) return;
  if (mode_ == Mode::Value) {
    const TensorView p = policy_buf_.view(DType::F32);
    m.set_value_inputs(slot, p.slice(micro * bt, bt), p.slice(n + micro * bt, bt), p.slice(2 * n + micro * bt, bt),
                       TensorView{});
  } else if (rollouts_) {
    const TensorView p = policy_buf_.view(DType::F32);
    m.set_policy_inputs(slot, p.slice(micro * bt, bt), p.slice(n + micro * bt, bt), p.slice(2 * n + micro * bt, bt),
                        reference_ && cfg_.task == "grpo" ? reference_->token_nll().slice(micro * bt, bt)
                                                          : TensorView{});
  } else if (reference_) {
    m.set_sequence_nll(slot, reference_->sequence_nll().slice(static_cast<size_t>(micro) * B, B), TensorView{});
  } else if (!host_ref_nll_.empty()) {
    m.set_sequence_nll(slot, ref_nll_buf_.view(DType::F32).slice(static_cast<size_t>(micro) * B, B), TensorView{});
  }
}

bool Trainer::precomputed_reference() const { return cfg_.task == "dpo" && cfg_.dpo.reference == "precomputed"; }

void Trainer::require_reference(const BatchSource& source) const {
  TRIDENT_CHECK(!precomputed_reference() || source.gives_reference_nll(),
                "task dpo with dpo.reference = precomputed: the data source gives no reference log-probabilities");
}

// The DPO head of a precomputed run reads a reference for every micro-batch: here the NLL buffer
// itself, zeroed, whose pair loss is dropped (zero_loss_sums); the head then writes each
// sequence's NLL over it (GptStage::set_sequence_nll's `out`), read before the next batch.
std::vector<float> Trainer::sequence_nll(BatchSource& source, int64_t samples) {
  TRIDENT_CHECK(queued_.empty(), "sequence_nll: finish the queued steps first");
  TraceRange range("reference log-probabilities");
  const int64_t G = cfg_.train.global_batch_size;
  const int B = cfg_.train.micro_batch_size;
  Buffer nll_buf(be_, static_cast<size_t>(G) * sizeof(float));
  const TensorView nll = nll_buf.view(DType::F32);   // (G) the batch's sequence NLLs
  std::vector<float> out(static_cast<size_t>(samples)), batch(static_cast<size_t>(G));
  read_step_ = -1;   // the host batch buffers now hold these samples
  for (int64_t first = 0; first < samples; first += G) {
    read_batch(source, first);
    upload_batch();
    be_.zero(nll);
    eval_executor_->run(
        [&](int micro, int slot) {
          load_micro(*model_, micro, slot);
          if (!model_->stage().last()) return;
          const TensorView mine = nll.slice(sample_order_.micro_first(first, g_.coord.dp, micro) - first, B);
          model_->set_sequence_nll(slot, mine, mine);
        },
        false, 0.0f, UnitDone{});
    model_->zero_loss_sums();
    // Each DP replica's NLLs once (its last stage's TP rank 0), summed over the world into place.
    if (!model_->stage().last() || g_.coord.tp != 0) be_.zero(nll);
    g_.world->all_reduce(nll.data, nll.numel, DType::F32, ReduceOp::Sum, be_.stream());
    be_.copy_to_host(batch.data(), nll);
    std::copy_n(batch.begin(), std::min<int64_t>(G, samples - first), out.begin() + first);
  }
  return out;
}

void Trainer::run_reference() {
  if (reference_) reference_->run([&](GptStage& m, int micro, int slot) { load_micro(m, micro, slot); });
}

// LossSums over the world (last stage, TP rank 0 of every DP replica contributes).
LossSums Trainer::reduce_loss(LossSums local) {
  float v[kLossSums] = {};
  if (g_.coord.tp == 0) {
    const double in[kLossSums] = {local.loss, local.correct, local.margin, local.chosen, local.rejected};
    std::copy(in, in + kLossSums, v);
  }
  TensorView s = stats_buf_.view(DType::F32).slice(0, kLossSums);
  be_.copy_from_host(s, v);
  g_.world->all_reduce(s.data, kLossSums, DType::F32, ReduceOp::Sum, be_.stream());
  be_.copy_to_host(v, s);
  return {v[0], v[1], v[2], v[3], v[4]};
}

EvalResult Trainer::evaluate(BatchSource& source, int steps) {
  TRIDENT_CHECK(queued_.empty(), "evaluate: finish the queued steps first");
  TraceRange range("evaluation");
  const int64_t G = cfg_.train.global_batch_size;
  LossSums sum;
  double targets = 0;
  read_step_ = -1;   // the host batch buffers now hold evaluation samples
  require_reference(source);
  for (int e = 0; e < steps; ++e) {
    read_batch(source, e * G);
    upload_batch();
    run_reference();
    eval_executor_->run([&](int micro, int slot) { load_micro(*model_, micro, slot); }, false, 0.0f, UnitDone{});
    const LossSums batch = reduce_loss(model_->take_loss_sums());
    sum.loss += batch.loss;
    sum.correct += batch.correct;
    sum.margin += batch.margin;
    targets += batch_targets_;
  }
  EvalResult r;
  const double n = std::max(targets, 1.0);
  r.loss = sum.loss / n;
  if (cfg_.preference_task()) {
    r.accuracy = sum.correct / n;
    r.margin = sum.margin / n;
  }
  return r;
}

StepStats Trainer::train_step(int step) {
  TRIDENT_CHECK(queued_.empty(), "train_step: finish the queued steps first");
  queue_step(step);
  return finish_step();
}

// The steady state waits for the device once per step: the batch goes up in one copy, the loss
// and the squared gradient norm are reduced together and read before the update (StepGuard), the
// clipping factor is applied on the device, and the next step's batch is read on the host while
// the update runs; finish_step reports the step one step late without waiting again.
void Trainer::queue_step(int step) {
  TRIDENT_CHECK(optimizer_ != nullptr, "train_step: this trainer was built for evaluation only");
  TRIDENT_CHECK(queued_.size() < static_cast<size_t>(kMaxQueuedSteps), "queue_step: too many steps queued");
  set_current_step(step);
  fault_point(FaultPoint::TrainStep, g_.rank, step);
  QueuedStep q;
  q.step = step;
  q.t0 = std::chrono::steady_clock::now();
  require_reference(data_);
  if (rollouts_) {
    // The policy answers with its current weights (ZeRO-1's pending gathers completed first).
    TraceRange range("generation");
    optimizer_->gather_all();
    rollouts_->generate(consumed_samples(step));
    read_step_ = -1;
  }
  if (read_step_ != step) read_batch(data_, consumed_samples(step));
  // The loss is the mean over the global batch's trained targets (all of them, but for sft; a
  // preference task's pairs): each target's (pair's) gradient is scaled by the inverse of their
  // count (a batch without any trains nothing).
  q.targets = batch_targets_;
  const double tokens = std::max(batch_targets_, 1.0);
  upload_batch();
  run_reference();
  q.lr = lr_at(cfg_.train, step);
  if (value_) {
    q.kl_coef = kl_coef_;
    score_rollouts(consumed_samples(step));
  }
  if (rollouts_) {
    q.rollout = rollouts_->stats();
    // rl.ppo_epochs updates on the one generated batch, numbered on from the earlier steps' for
    // AdamW's bias correction.
    q.updates = cfg_.rl.ppo_epochs;
    for (int u = 0; u < q.updates; ++u) {
      update(q, tokens, step * q.updates + u + 1);
      q.loss_sum += q.stats[0];
      q.clipped_sum += q.stats[1];
      q.kl_sum += q.stats[2];
      q.entropy_sum += q.stats[3];
      if (value_) update_value(q, step * q.updates + u + 1);
    }
    // Adaptive KL control (Ziegler et al., as TRL's AdaptiveKLController): the coefficient of the
    // next step's rewards moves towards rl.kl_target by this step's KL per answer.
    if (value_ && cfg_.rl.kl_target > 0)
      kl_coef_ = rl::adaptive_kl_coef(kl_coef_, q.rollout.kl_per_answer, cfg_.rl.kl_target, q.rollout.answers,
                                      cfg_.rl.kl_horizon);
  } else {
    update(q, tokens, step + 1);
  }
  queued_.push_back(q);
  // The host prepares the next batch while the device works through this step (a generated one
  // waits for the update).
  if (!rollouts_) {
    read_batch(data_, consumed_samples(step + 1));
    read_step_ = step + 1;
  }
  // A host backend has done the step's work, its update included, by now.
  if (!be_.is_device()) queued_.back().done = std::chrono::steady_clock::now();
}

void Trainer::update(QueuedStep& q, double tokens, int adam_step) {
  model_->zero_grads();
  if (shards_->staged()) shards_->zero_grads();
  auto unit_done = [&](int unit) { sync_->unit_done(unit); };
  executor_->run([&](int micro, int slot) { load_micro(*model_, micro, slot); }, true,
                 static_cast<float>(1.0 / tokens), unit_done);
  sync_->finish();
  optimizer_->join_gradient_copies();
  if (fault_point(FaultPoint::GradientsReduced, g_.rank, q.step + 1))
    be_.scale(shards_->staged() ? shards_->grad_shard() : model_->grads(), std::nanf(""));   // a test's spoiled gradients: NaN * g = NaN

  // QueuedStep::stats in one world all-reduce.
  TensorView stats = stats_buf_.view(DType::F32);
  be_.zero(stats);
  if (model_->stage().last() && g_.coord.tp == 0) be_.copy(stats.slice(0, kLossSums), model_->loss_sums());
  model_->zero_loss_sums();
  optimizer_->add_norm_sq(stats.slice(kLossSums, 1));
  g_.world->all_reduce(stats.data, stats.numel, DType::F32, ReduceOp::Sum, be_.stream());

  // Every rank reads the same reduced values, so all make the same decision. The read waits for
  // the device once more per step; the update is then queued behind it, the next step after.
  be_.copy_to_host(q.stats, stats);
  // A device step is timed to here: the previous step's update and this step's forward and
  // backward are done. Timed to its own end instead, a step finished right after the next one
  // was queued would show only what is left of it after this wait (near nothing).
  if (be_.is_device()) q.done = std::chrono::steady_clock::now();
  const std::string skipped = guard_.check(q.stats[0] / tokens, std::sqrt(static_cast<double>(q.stats[kLossSums])));
  if (!skipped.empty()) {
    q.skipped = skipped;
    return;
  }
  TraceRange range("optimizer");
  optimizer_->step(q.lr, stats.slice(kLossSums, 1), cfg_.train.grad_clip, adam_step);
  // An offloaded update runs on this thread, the uploads joined, before the next step is queued:
  // timed to the read above it would fall between two steps and in neither.
  if (be_.is_device() && optimizer_->offloaded()) q.done = std::chrono::steady_clock::now();
  if (sharded_) sharded_->updated();
}

void Trainer::update_value(QueuedStep& q, int adam_step) {
  QueuedStep v;
  v.step = q.step;
  v.lr = lr_at(value_->cfg_.train, q.step);
  value_->update(v, 1.0, adam_step);
  q.value_loss_sum += v.stats[0];
  q.value_clipped_sum += v.stats[1];
  if (!v.skipped.empty() && q.skipped.empty()) q.skipped = "value model: " + v.skipped;
}

std::vector<StepStats> Trainer::train_steps(int first, int n, bool sync) {
  std::vector<StepStats> done;
  for (int s = first; s < first + n; ++s) {
    if (sync) {
      done.push_back(train_step(s));
      continue;
    }
    queue_step(s);
    if (queued_steps() > 1) done.push_back(finish_step());
  }
  while (queued_steps() > 0) done.push_back(finish_step());
  return done;
}

StepStats Trainer::finish_step() {
  TRIDENT_CHECK(!queued_.empty(), "finish_step: no step queued");
  QueuedStep& q = queued_.front();
  const double tokens = static_cast<double>(cfg_.train.global_batch_size) * cfg_.model.seq_len;
  StepStats s;
  s.step = q.step + 1;
  s.lr = q.lr;
  s.loss = q.stats[0] / std::max(q.targets, 1.0);
  if (cfg_.preference_task()) {
    const double pairs = std::max(q.targets, 1.0);
    s.accuracy = q.stats[1] / pairs;
    s.margin = q.stats[2] / pairs;
    if (cfg_.task == "dpo") {
      s.chosen_reward = q.stats[3] / pairs;
      s.rejected_reward = q.stats[4] / pairs;
    }
  }
  if (rollouts_) {
    const RolloutStats& r = q.rollout;
    const double answer_tokens = std::max(r.total_answer_tokens, 1.0) * q.updates;
    s.loss = q.loss_sum / q.updates;
    s.clip_fraction = q.clipped_sum / answer_tokens;
    if (reference_) s.kl = q.kl_sum / answer_tokens;
    s.reward = r.reward_mean;
    s.reward_std = r.reward_std;
    s.entropy = q.entropy_sum / answer_tokens;
    s.answer_tokens = r.answer_tokens;
    s.answers_stopped = r.stopped;
    s.generation_s = r.seconds;
  }
  if (value_) {
    const RolloutStats& r = q.rollout;
    const double answer_tokens = std::max(r.total_answer_tokens, 1.0) * q.updates;
    s.kl = reference_ ? r.kl : std::nan("");
    s.value_loss = q.value_loss_sum / q.updates;
    s.value_clip_fraction = q.value_clipped_sum / answer_tokens;
    s.value_mean = r.value_mean;
    s.explained_variance = r.explained_variance;
    s.kl_coef = q.kl_coef;
  }
  s.grad_norm = std::sqrt(static_cast<double>(q.stats[kLossSums]));
  s.skipped = q.skipped;
  if (!q.skipped.empty()) ++skipped_steps_;
  s.skipped_steps = skipped_steps_;
  s.step_ms = timer_.step_ms(q.t0, q.done);
  s.tokens_per_s = tokens / (s.step_ms / 1000.0);
  queued_.pop_front();
  return s;
}

}  // namespace trident
