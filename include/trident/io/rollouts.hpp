// Online RL's samples (tasks grpo and ppo): the prompts of rl.prompts rendered by a chat template,
// the answers the policy generates to them on the training layout (model/generator.hpp), the
// verifier's rewards and the advantages (grpo's group-normalised, ppo's GAE over the value model's
// values), served to the trainer as a RolloutSource.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trident/config/run_config.hpp"
#include "trident/io/tokenizer.hpp"
#include "trident/parallel/groups.hpp"
#include "trident/train/batch_source.hpp"

namespace trident {

class Generator;

struct RlPrompt {
  std::vector<int32_t> tokens;   // the rendered conversation up to the assistant's answer
  std::string answer;            // what the verifier compares the answer text with
};

struct RlPrompts {
  std::vector<RlPrompt> prompts;
  int32_t stop_token = -1;       // the chat template's end of the assistant's turn
};

// The records of rl.prompts ({"prompt": ..., "answer": ...} per line; "answer" a string or a
// number) as the user's turn rendered by rl.chat_template. Throws InputError naming the file and
// line of a bad record, or the options to change when a prompt leaves fewer than rl.max_new_tokens
// of model.seq_len.
RlPrompts read_rl_prompts(const RunConfig& cfg, const Tokenizer& tokenizer);

// rl.reward = model: the model of rl.reward_model's checkpoint as the rollouts run it (its score
// head on rows of model.seq_len tokens). Throws InputError naming rl.reward_model where the file is
// not a reward model's checkpoint (task reward), its vocabulary is not the policy's, or the run's
// layout cannot hold it (e.g. tp not dividing its heads).
ModelConfig reward_model_config(const RunConfig& cfg, int world_size);

// rl.reward for one answer text (the decoded answer without its stop token): exact_match gives 1
// when the text, trimmed of surrounding whitespace, equals the record's answer (trimmed); plus
// rl.format_reward when rl.format_pattern matches the whole text.
class Verifier {
 public:
  explicit Verifier(const RlConfig& rl);
  double reward(const std::string& text, const std::string& answer) const;
  // The format part alone (beside a reward model's score).
  double format_reward(const std::string& text) const;

 private:
  struct Pattern;
  std::shared_ptr<const Pattern> format_;
  double format_reward_;
};

class PromptRollouts : public RolloutSource {
 public:
  // cfg validated (task grpo or ppo); the prompts read with `tokenizer`, which decodes the answers.
  // With rl.reward = model, `reward_model` is the model of rl.reward_model's checkpoint
  // (reward_model_config), which scores each answer in place of the verifier's exact match.
  PromptRollouts(const RunConfig& cfg, const ParallelGroups& g, std::unique_ptr<Tokenizer> tokenizer, RlPrompts prompts,
                 std::optional<ModelConfig> reward_model = std::nullopt);
  ~PromptRollouts() override;

  void attach(GptStage& policy) override;
  void detach() override;
  void generate(int64_t step_first) override;
  void samples(int64_t first, int count, int32_t* out) override;
  void target_mask(int64_t first, int count, uint8_t* out) override;
  void policy_inputs(int64_t first, int count, float* old_logp, float* coef, float* coef_adv) override;
  void set_values(const std::vector<float>& values, const std::vector<float>& ref_nll, double kl_coef) override;
  void value_inputs(int64_t first, int count, float* old_values, float* returns, float* coef) override;
  RolloutStats stats() const override { return stats_; }

  // The record answered by global sample `sample`: rl.group consecutive samples answer one prompt,
  // the prompts visited in a shuffled order per pass over the file (train.seed).
  size_t record_of(int64_t sample) const;
  // The last generate()'s answers of this rank (decoded), in sample order: tests and logs.
  const std::vector<std::string>& answer_texts() const { return texts_; }

 private:
  // This rank's row of global sample `sample`; checks it is one generate() made.
  size_t row(int64_t sample) const;
  // Rows [first, first + count) (global samples) of one of this rank's per-row arrays, `width`
  // values a row, into `to`.
  template <class X>
  void copy_rows(int64_t first, int count, const std::vector<X>& from, size_t width, X* to) const {
    const size_t r = row(first);
    row(first + count - 1);
    std::copy(from.begin() + r * width, from.begin() + (r + count) * width, to);
  }
  // The reward model's score of each of this rank's rows (at its answer's last token).
  std::vector<float> score_rows();

  RunConfig cfg_;
  const ParallelGroups& g_;
  std::unique_ptr<Tokenizer> tok_;
  RlPrompts prompts_;
  Verifier verifier_;
  std::optional<ModelConfig> reward_model_;
  std::unique_ptr<Generator> generator_;
  std::unique_ptr<GptStage> reward_stage_;
  int T_;
  int64_t first_ = -1;             // the first global sample of this rank's rows
  std::vector<int32_t> tokens_;    // rows x (T + 1): prompt and answer, padded
  std::vector<uint8_t> mask_;      // rows x T: 1 at the answer's targets
  std::vector<float> old_logp_, coef_, coef_adv_;   // rows x T each
  std::vector<float> old_values_, returns_;          // rows x T each (task ppo)
  std::vector<float> rewards_;                       // per row: the verifier's
  std::vector<int> answer_starts_, answer_lengths_;  // per row: the first answer target's position, answer tokens
  std::vector<std::string> texts_;
  RolloutStats stats_;
};

}  // namespace trident
