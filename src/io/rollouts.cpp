// Task grpo's samples: prompts read and rendered once, answers generated each step by the policy
// on its training layout, rewarded by the verifier and turned into per-token loss inputs.
#include "trident/io/rollouts.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <utility>

#include "trident/config/parse.hpp"
#include "trident/core/error.hpp"
#include "trident/io/chat_template.hpp"
#include "trident/io/checkpoint.hpp"
#include "trident/io/sampler.hpp"
#include "trident/model/generator.hpp"
#include "trident/parallel/host_collectives.hpp"
#include "trident/train/rl_loss.hpp"
#include "trident/train/trainer.hpp"

namespace trident {

RlPrompts read_rl_prompts(const RunConfig& cfg, const Tokenizer& tokenizer) {
  const RlConfig& rl = cfg.rl;
  std::ifstream in(rl.prompts);
  if (!in) throw InputError(str("rl.prompts ", rl.prompts, ": cannot open (a JSON Lines file of prompts and answers)"));
  std::unique_ptr<ChatTemplate> tmpl;
  try {
    tmpl = std::make_unique<ChatTemplate>(rl.chat_template, tokenizer);
  } catch (const InputError& e) {
    throw InputError(str("rl.chat_template: ", e.what()));
  }
  RlPrompts out;
  std::string line;
  for (size_t line_no = 1; std::getline(in, line); ++line_no) {
    if (trimmed(line).empty()) continue;
    const std::string where = str("rl.prompts ", rl.prompts, ":", line_no);
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      throw InputError(str(where, ": not a JSON object; each line must be {\"prompt\": ..., \"answer\": ...}"));
    }
    if (!record.is_object() || !record.contains("prompt") || !record["prompt"].is_string() ||
        !record.contains("answer") || !(record["answer"].is_string() || record["answer"].is_number()))
      throw InputError(str(where, ": needs a string \"prompt\" and an \"answer\" (a string or a number)"));
    const nlohmann::json& answer = record["answer"];
    ChatTemplate::Prompt r;
    try {
      r = tmpl->render_prompt({{"user", record["prompt"].get<std::string>()}});
    } catch (const InputError& e) {
      throw InputError(str(where, ": ", e.what()));
    }
    const size_t n = r.tokens.size();
    out.stop_token = r.end_of_turn;
    if (n + rl.max_new_tokens > static_cast<size_t>(cfg.model.seq_len))
      throw InputError(str(where, ": the prompt is ", n, " tokens, which with rl.max_new_tokens = ", rl.max_new_tokens,
                           " exceeds model.seq_len = ", cfg.model.seq_len,
                           "; shorten the prompt, lower rl.max_new_tokens or raise model.seq_len"));
    out.prompts.push_back({r.tokens, answer.is_string() ? answer.get<std::string>() : answer.dump()});
  }
  if (out.prompts.empty()) throw InputError(str("rl.prompts ", rl.prompts, ": no records"));
  return out;
}

ModelConfig reward_model_config(const RunConfig& cfg, int world_size) {
  const std::string& file = cfg.rl.reward_model;
  RunConfig stored;
  try {
    stored = parse_config_text(read_checkpoint_info(file).config, file + " (stored config)");
  } catch (const InputError& e) {
    throw InputError(str("rl.reward_model: ", e.what()));
  }
  if (stored.task != "reward")
    throw InputError(str("rl.reward_model ", file, ": a task = ", stored.task,
                         " checkpoint; rl.reward = model needs a reward model's (trident train --task reward)"));
  if (stored.model.vocab_size != cfg.model.vocab_size)
    throw InputError(str("rl.reward_model ", file, ": its vocabulary has ", stored.model.vocab_size,
                         " tokens, the policy's ", cfg.model.vocab_size, "; it must score the policy's token ids"));
  // The policy's run, holding the reward model instead: its layout must split it.
  RunConfig run = cfg;
  run.task = "pretrain";
  run.model = stored.model;
  run.model.n_positions = stored.model.positions();
  run.model.seq_len = cfg.model.seq_len;
  try {
    validate_run_config(run, world_size);
  } catch (const InputError& e) {
    throw InputError(str("rl.reward_model ", file, ": ", e.what()));
  }
  run.model.score_head = true;
  return run.model;
}

struct Verifier::Pattern {
  std::regex re;
};

Verifier::Verifier(const RlConfig& rl) : format_reward_(rl.format_reward) {
  if (rl.format_pattern.empty()) return;
  try {
    format_ = std::make_shared<Pattern>(Pattern{std::regex(rl.format_pattern, std::regex::ECMAScript)});
  } catch (const std::regex_error& e) {
    throw InputError(str("rl.format_pattern = ", quoted_text(rl.format_pattern), ": not a regular expression (",
                         e.what(), ")"));
  }
}

double Verifier::reward(const std::string& text, const std::string& answer) const {
  return (trimmed(text) == trimmed(answer) ? 1.0 : 0.0) + format_reward(text);
}

double Verifier::format_reward(const std::string& text) const {
  return format_ && std::regex_match(text, format_->re) ? format_reward_ : 0.0;
}

PromptRollouts::PromptRollouts(const RunConfig& cfg, const ParallelGroups& g, std::unique_ptr<Tokenizer> tokenizer,
                               RlPrompts prompts, std::optional<ModelConfig> reward_model)
    : cfg_(cfg), g_(g), tok_(std::move(tokenizer)), prompts_(std::move(prompts)), verifier_(cfg.rl),
      reward_model_(std::move(reward_model)), T_(cfg.model.seq_len) {}

PromptRollouts::~PromptRollouts() = default;

void PromptRollouts::attach(GptStage& policy) {
  generator_ = std::make_unique<Generator>(policy, rollout_generation_slots(cfg_), T_, rollout_feed_rows(cfg_));
  if (!reward_model_) return;
  // The reward model: forward only, on the policy's groups and backend, its weights as read
  // (rounded to the compute dtype as a trained model's are).
  Backend& be = policy.backend();
  reward_stage_ = std::make_unique<GptStage>(*reward_model_, g_, be, cfg_.train.micro_batch_size, 1,
                                             bucket_elements(cfg_.parallel), false);
  std::vector<float> params;
  read_checkpoint_params(cfg_.rl.reward_model, *reward_stage_, g_, params);
  reward_stage_->set_params(params);
}

void PromptRollouts::detach() {
  generator_.reset();
  reward_stage_.reset();
}

std::vector<float> PromptRollouts::score_rows() {
  const int B = cfg_.train.micro_batch_size, rows = static_cast<int>(mask_.size() / T_);
  const size_t T = static_cast<size_t>(T_);
  std::vector<int32_t> inputs(B * T), targets(B * T);
  std::vector<float> scores;
  scores.reserve(rows);
  for (int r0 = 0; r0 < rows; r0 += B) {
    for (size_t b = 0; b < static_cast<size_t>(B); ++b)
      for (size_t t = 0; t < T; ++t) {
        const size_t row = r0 + b;
        inputs[b * T + t] = tokens_[row * (T + 1) + t];
        targets[b * T + t] = mask_[row * T + t] ? tokens_[row * (T + 1) + t + 1] : kIgnoredTarget;
      }
    reward_stage_->set_tokens(0, inputs.data(), targets.data());
    reward_stage_->forward(0, false, 0.0f, UnitDone{});
    const std::vector<float> s = reward_stage_->last_scores();
    scores.insert(scores.end(), s.begin(), s.end());
    reward_stage_->zero_loss_sums();
  }
  return scores;
}

size_t PromptRollouts::record_of(int64_t sample) const {
  const SequenceSampler order(prompts_.prompts.size(), cfg_.train.seed);
  return order.window(static_cast<uint64_t>(sample / cfg_.rl.group));
}

void PromptRollouts::generate(int64_t step_first) {
  TRIDENT_CHECK(generator_ != nullptr, "PromptRollouts::generate: attach() the policy first");
  const auto t0 = std::chrono::steady_clock::now();
  const RlConfig& rl = cfg_.rl;
  const int rows = static_cast<int>(cfg_.train.global_batch_size / cfg_.parallel.dp);
  first_ = step_first + static_cast<int64_t>(g_.coord.dp) * rows;
  std::vector<std::vector<int32_t>> inputs(rows);
  for (int i = 0; i < rows; ++i) inputs[i] = prompts_.prompts[record_of(first_ + i)].tokens;
  GenerationParams p;
  p.sampling.temperature = rl.temperature;
  p.sampling.top_k = rl.top_k;
  p.sampling.top_p = rl.top_p;
  if (tok_->vocab_size() < cfg_.model.vocab_size) p.sampling.vocab_limit = tok_->vocab_size();
  p.max_new_tokens = rl.max_new_tokens;
  p.stop_tokens = {prompts_.stop_token};
  p.seed = cfg_.train.seed;
  const std::vector<Completion> answers = generator_->generate(inputs, p, static_cast<uint64_t>(first_));

  // The rows the trainer reads: prompt and answer, the answer's targets trained.
  const size_t T = static_cast<size_t>(T_);
  tokens_.assign(rows * (T + 1), prompts_.stop_token);   // padding: any valid id, never a trained target
  mask_.assign(rows * T, 0);
  old_logp_.assign(rows * T, 0.0f);
  for (int i = 0; i < rows; ++i) {
    const std::vector<int32_t>& prompt = inputs[i];
    const Completion& c = answers[i];
    const size_t P = prompt.size(), A = c.tokens.size();
    TRIDENT_CHECK(P + A <= T, "PromptRollouts: an answer longer than model.seq_len allows");
    int32_t* row = tokens_.data() + i * (T + 1);
    std::copy(prompt.begin(), prompt.end(), row);
    std::copy(c.tokens.begin(), c.tokens.end(), row + P);
    for (size_t j = 0; j < A; ++j) {   // answer token j is the target at position P - 1 + j
      mask_[i * T + P - 1 + j] = 1;
      old_logp_[i * T + P - 1 + j] = c.logprobs[j];
    }
  }

  // Rewards, and the sums the statistics and the loss's normalisation need over the world (each
  // DP replica counted once: by its TP rank 0 of the first stage; every stage has the answers).
  const std::vector<float> scores = reward_model_ ? score_rows() : std::vector<float>();
  std::vector<float> rewards(rows);
  texts_.assign(rows, "");
  double sums[5] = {0, 0, 0, 0, 0};   // rewards, their squares, answers, answer tokens, stopped
  for (int i = 0; i < rows; ++i) {
    const Completion& c = answers[i];
    std::vector<int32_t> text_ids = c.tokens;
    if (c.stopped) text_ids.pop_back();
    texts_[i] = tok_->decode(text_ids);
    const std::string& answer = prompts_.prompts[record_of(first_ + i)].answer;
    rewards[i] = static_cast<float>(reward_model_ ? scores[i] + verifier_.format_reward(texts_[i])
                                                  : verifier_.reward(texts_[i], answer));
    sums[0] += rewards[i];
    sums[1] += static_cast<double>(rewards[i]) * rewards[i];
    sums[2] += 1;
    sums[3] += static_cast<double>(c.tokens.size());
    sums[4] += c.stopped;
  }
  std::vector<double> total(sums, sums + 5);
  if (g_.coord.tp != 0 || !g_.first_stage()) std::fill(total.begin(), total.end(), 0.0);
  all_reduce(total, HostReduce::Sum, g_);
  // Task ppo's advantages come per token from set_values, once the value model has run.
  const std::vector<float> advantages = cfg_.task == "grpo"
                                            ? rl::group_advantages(rewards, rl.group, static_cast<float>(rl.adv_eps))
                                            : std::vector<float>(rows, 0.0f);
  rewards_ = rewards;
  answer_starts_.assign(rows, 0);
  answer_lengths_.assign(rows, 0);

  // Each answer token's weight in the batch mean, and that times its answer's advantage.
  coef_.assign(rows * T, 0.0f);
  coef_adv_.assign(rows * T, 0.0f);
  old_values_.assign(rows * T, 0.0f);
  returns_.assign(rows * T, 0.0f);
  const bool per_sequence = rl::parse_loss_norm(rl.loss_norm) == rl::LossNorm::Sequence;
  for (int i = 0; i < rows; ++i) {
    const size_t A = answers[i].tokens.size(), first_target = i * T + inputs[i].size() - 1;
    const double weight = per_sequence ? 1.0 / (static_cast<double>(A) * total[2]) : 1.0 / total[3];
    answer_starts_[i] = static_cast<int>(inputs[i].size()) - 1;
    answer_lengths_[i] = static_cast<int>(A);
    std::fill_n(coef_.begin() + first_target, A, static_cast<float>(weight));
    std::fill_n(coef_adv_.begin() + first_target, A, static_cast<float>(weight * advantages[i]));
  }
  const double n = std::max(total[2], 1.0);
  stats_ = RolloutStats{};
  stats_.answers = total[2];
  stats_.total_answer_tokens = total[3];
  stats_.reward_mean = total[0] / n;
  stats_.reward_std = std::sqrt(std::max(total[1] / n - stats_.reward_mean * stats_.reward_mean, 0.0));
  stats_.answer_tokens = total[3] / n;
  stats_.stopped = total[4] / n;
  std::vector<double> seconds{std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
  all_reduce(seconds, HostReduce::Max, g_);
  stats_.seconds = seconds[0];
}

// InstructGPT's per-token reward and GAE (rl::ppo_rollout), the advantages whitened as TRL's PPO
// does over every answer token of the global batch (rl::whitening of the world's sums).
void PromptRollouts::set_values(const std::vector<float>& values, const std::vector<float>& ref_nll, double kl_coef) {
  const size_t T = static_cast<size_t>(T_), rows = rewards_.size();
  TRIDENT_CHECK(values.size() == rows * T && (ref_nll.empty() || ref_nll.size() == rows * T),
                "PromptRollouts::set_values: not this rank's rows of the last generate()");
  // The answers' tokens one after the other, as rl::ppo_rollout takes them.
  const rl::Responses answers{answer_lengths_};
  std::vector<float> old_logp, ref_logp, token_values;
  for (size_t i = 0; i < rows; ++i)
    for (int j = 0; j < answer_lengths_[i]; ++j) {
      const size_t t = i * T + answer_starts_[i] + j;
      old_logp.push_back(old_logp_[t]);
      if (!ref_nll.empty()) ref_logp.push_back(-ref_nll[t]);
      token_values.push_back(values[t]);
    }
  const rl::PpoRollout est = rl::ppo_rollout(old_logp, ref_logp, rewards_, token_values, answers, kl_coef,
                                             static_cast<float>(cfg_.rl.gamma), static_cast<float>(cfg_.rl.lambda));
  // Sums over the world's answer tokens (each DP replica once: its TP rank 0 of the last stage,
  // which alone has the values and the reference's log-probabilities): tokens, advantages and their
  // squares, k1, values, returns and their squares, R - V and its squares, answers.
  double sums[10] = {static_cast<double>(answers.tokens()), 0, 0, est.k1_sum, 0, 0, 0, 0, 0,
                     static_cast<double>(rows)};
  for (size_t k = 0; k < est.advantages.size(); ++k) {
    const double a = est.advantages[k], v = token_values[k], R = est.returns[k];
    sums[1] += a;
    sums[2] += a * a;
    sums[4] += v;
    sums[5] += R;
    sums[6] += R * R;
    sums[7] += R - v;
    sums[8] += (R - v) * (R - v);
  }
  std::vector<double> total(sums, sums + 10);
  if (g_.coord.tp != 0 || !g_.last_stage()) std::fill(total.begin(), total.end(), 0.0);
  all_reduce(total, HostReduce::Sum, g_);
  const double n = std::max(total[0], 1.0);
  auto variance = [&](double sum, double sum_sq) { return std::max(sum_sq / n - (sum / n) * (sum / n), 0.0); };
  const rl::Whitening w = rl::whitening(total[0], total[1], total[2]);
  size_t k = 0;
  for (size_t i = 0; i < rows; ++i)
    for (int j = 0; j < answer_lengths_[i]; ++j, ++k) {
      const size_t t = i * T + answer_starts_[i] + j;
      coef_adv_[t] = static_cast<float>(coef_[t] * (est.advantages[k] - w.mean) * w.scale);
      old_values_[t] = token_values[k];
      returns_[t] = est.returns[k];
    }
  stats_.kl = total[3] / n;
  stats_.kl_per_answer = total[3] / std::max(total[9], 1.0);
  stats_.value_mean = total[4] / n;
  const double var_returns = variance(total[5], total[6]);
  stats_.explained_variance = var_returns > 0 ? 1.0 - variance(total[7], total[8]) / var_returns : std::nan("");
}

void PromptRollouts::value_inputs(int64_t first, int count, float* old_values, float* returns, float* coef) {
  for (auto [from, to] : {std::pair{&old_values_, old_values}, {&returns_, returns}, {&coef_, coef}})
    copy_rows(first, count, *from, static_cast<size_t>(T_), to);
}

size_t PromptRollouts::row(int64_t sample) const {
  const int64_t rows = static_cast<int64_t>(mask_.size() / T_);
  TRIDENT_CHECK(first_ >= 0 && sample >= first_ && sample < first_ + rows,
                str("PromptRollouts: sample ", sample, " was not generated on this rank (rows from ", first_, ")"));
  return static_cast<size_t>(sample - first_);
}

void PromptRollouts::samples(int64_t first, int count, int32_t* out) {
  const size_t r = row(first), w = static_cast<size_t>(T_) + 1;
  row(first + count - 1);
  std::copy(tokens_.begin() + r * w, tokens_.begin() + (r + count) * w, out);
}

void PromptRollouts::target_mask(int64_t first, int count, uint8_t* out) {
  const size_t r = row(first), T = static_cast<size_t>(T_);
  row(first + count - 1);
  std::copy(mask_.begin() + r * T, mask_.begin() + (r + count) * T, out);
}

void PromptRollouts::policy_inputs(int64_t first, int count, float* old_logp, float* coef, float* coef_adv) {
  for (auto [from, to] : {std::pair{&old_logp_, old_logp}, {&coef_, coef}, {&coef_adv_, coef_adv}})
    copy_rows(first, count, *from, static_cast<size_t>(T_), to);
}

}  // namespace trident
