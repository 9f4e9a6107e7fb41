// Dumps GRPO and PPO losses and their gradients (with respect to logits and values) computed by
// trident's rl_loss on random inputs, as JSON for check_rl_loss.py to recompute in PyTorch.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "trident/core/rng.hpp"
#include "trident/train/rl_loss.hpp"

using namespace trident;
using nlohmann::json;

namespace {

std::vector<float> random(size_t n, uint64_t stream, double lo, double hi) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(lo + (hi - lo) * uniform_at(17, stream, i));
  return v;
}

// Policy loss of the responses' tokens and its gradient with respect to their logits rows.
json policy_case(const std::vector<float>& logits, const std::vector<int>& tokens, const std::vector<float>& old_logp,
                 const std::vector<float>& ref_logp, const std::vector<float>& advantages, const rl::Responses& r,
                 const rl::PolicyLossArgs& args, int V) {
  const size_t n = tokens.size();
  std::vector<float> logp(n), entropy(n), dlogits(n * V);
  for (size_t t = 0; t < n; ++t) rl::token_logprob_entropy(&logp[t], &entropy[t], &logits[t * V], V, tokens[t]);
  const rl::PolicyLoss l = rl::policy_loss(logp, old_logp, ref_logp, advantages, entropy, r, args);
  for (size_t t = 0; t < n; ++t)
    rl::logits_gradient(&dlogits[t * V], &logits[t * V], V, tokens[t], l.dlogp[t], l.dentropy[t]);
  return {{"clip_eps", args.clip_eps}, {"kl_beta", args.kl_beta}, {"entropy_coef", args.entropy_coef},
          {"norm", args.norm == rl::LossNorm::Sequence ? "sequence" : "token"}, {"loss", l.loss},
          {"dlogits", dlogits}, {"clip_fraction", l.clip_fraction}, {"advantages", advantages}};
}

}  // namespace

int main() {
  const int V = 23;
  const rl::Responses r{{5, 1, 7, 3, 4, 6}};   // 2 prompts x G = 3 responses
  const size_t n = r.tokens();
  const std::vector<float> logits = random(n * V, 1, -3, 3);
  std::vector<int> tokens(n);
  for (size_t t = 0; t < n; ++t) tokens[t] = static_cast<int>(hash3(17, 2, t) % V);
  // Generation-time and reference log-probabilities near the current ones, so that some ratios
  // are clipped and some not.
  std::vector<float> old_logp(n), ref_logp(n);
  const std::vector<float> shift = random(n, 3, -0.5, 0.5), ref_shift = random(n, 4, -0.3, 0.3);
  for (size_t t = 0; t < n; ++t) {
    float lp, h;
    rl::token_logprob_entropy(&lp, &h, &logits[t * V], V, tokens[t]);
    old_logp[t] = lp + shift[t];
    ref_logp[t] = lp + ref_shift[t];
  }
  json out = {{"V", V}, {"lengths", r.lengths}, {"logits", logits}, {"tokens", tokens}, {"old_logp", old_logp},
              {"ref_logp", ref_logp}};

  // GRPO: one reward per response, advantages normalised within each prompt's group.
  const std::vector<float> rewards = {1, 0, 0.5, 0, 0, 1};
  const float eps = 1e-4f;
  const std::vector<float> adv = rl::per_token(rl::group_advantages(rewards, 3, eps), r);
  out["grpo_rewards"] = rewards;
  out["grpo_group"] = 3;
  out["grpo_eps"] = eps;
  for (rl::LossNorm norm : {rl::LossNorm::Sequence, rl::LossNorm::Token})
    out["grpo"].push_back(policy_case(logits, tokens, old_logp, ref_logp, adv, r, {0.2f, 0.04f, 0.01f, norm}, V));

  // PPO: token rewards (a score at each response's end, small penalties before), values; GAE,
  // the clipped policy loss with an entropy bonus, the clipped value loss.
  std::vector<float> token_rewards = random(n, 5, -0.05, 0.05);
  size_t end = 0;
  for (size_t i = 0; i < r.lengths.size(); ++i) token_rewards[(end += r.lengths[i]) - 1] += rewards[i];
  const std::vector<float> old_values = random(n, 6, -1, 1), values_shift = random(n, 7, -0.4, 0.4);
  std::vector<float> values(n);
  for (size_t t = 0; t < n; ++t) values[t] = old_values[t] + values_shift[t];
  const float gamma = 0.97f, lambda = 0.9f, vclip = 0.2f;
  const rl::Gae g = rl::gae(token_rewards, old_values, r, gamma, lambda);
  out["ppo"] = policy_case(logits, tokens, old_logp, {}, g.advantages, r, {0.2f, 0.0f, 0.01f, rl::LossNorm::Token}, V);
  const rl::ValueLoss vl = rl::value_loss(values, old_values, g.returns, r, vclip, rl::LossNorm::Token);
  out["ppo"].update({{"token_rewards", token_rewards}, {"old_values", old_values}, {"values", values},
                     {"gamma", gamma}, {"lambda", lambda}, {"value_clip", vclip}, {"returns", g.returns},
                     {"value_loss", vl.loss}, {"dvalues", vl.dvalues}});
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
