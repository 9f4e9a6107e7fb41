// The losses of online RL (GRPO, PPO) as functions of per-token quantities of the sampled responses:
// log-probabilities, entropies and values in, the loss and its gradient with respect to each of
// them out. The trainer applies d loss / d logp as a per-token weight on the sampled token's
// log-probability (the cross-entropy backward with weight -dlogp) and d loss / d entropy through
// the softmax entropy's gradient, -p (log p + H); logits_gradient() is that chain on the host.
#pragma once

#include <string>
#include <vector>

namespace trident::rl {

// How per-token terms become one number (rl.loss_norm): `sequence` averages each response's tokens,
// then the responses (DeepSeekMath's GRPO); `token` averages all response tokens of the batch
// together, so long responses weigh more (DAPO).
enum class LossNorm { Sequence, Token };
LossNorm parse_loss_norm(const std::string& name);   // InputError naming rl.loss_norm otherwise

// Responses of one batch, flattened: sequence i has lengths[i] tokens, one after the other.
struct Responses {
  std::vector<int> lengths;
  size_t tokens() const;
};

// GRPO's group-normalised advantages: rewards (n_groups * group) hold the G = group samples of each
// prompt one after the other; each becomes (r - mean) / (std + eps) over its group, std the
// sample standard deviation (divisor G - 1, as torch.std). group >= 2.
std::vector<float> group_advantages(const std::vector<float>& rewards, int group, float eps);

// One value per sequence repeated over its tokens (GRPO's advantage of a whole response).
std::vector<float> per_token(const std::vector<float>& per_sequence, const Responses& r);

struct PolicyLossArgs {
  float clip_eps = 0.2f;       // ratio clipped to [1 - clip_eps, 1 + clip_eps]
  float kl_beta = 0.0f;        // weight of the k3 KL estimate to the reference (GRPO: 0.04)
  float entropy_coef = 0.0f;   // weight of the entropy bonus (subtracted from the loss)
  LossNorm norm = LossNorm::Sequence;
};

struct PolicyLoss {
  double loss = 0;
  std::vector<float> dlogp;      // d loss / d logp, per token
  std::vector<float> dentropy;   // d loss / d entropy, per token
  double clip_fraction = 0, kl = 0, entropy = 0;   // token means (unweighted)
};

// The clipped policy-ratio objective, per token t:
//   l_t = -min(rho_t A_t, clip(rho_t, 1 - eps, 1 + eps) A_t) + beta k3_t - entropy_coef H_t,
//   rho_t = exp(logp_t - old_logp_t), k3_t = exp(ref_t - logp_t) - (ref_t - logp_t) - 1,
// averaged as args.norm says. old_logp are the generation-time log-probabilities; ref_logp
// (empty when beta = 0) the frozen reference's; entropy may be empty when entropy_coef = 0.
PolicyLoss policy_loss(const std::vector<float>& logp, const std::vector<float>& old_logp,
                       const std::vector<float>& ref_logp, const std::vector<float>& advantages,
                       const std::vector<float>& entropy, const Responses& r, const PolicyLossArgs& args);

// PPO's generalised advantage estimation per response: delta_t = r_t + gamma V_{t+1} - V_t (V past
// the last token is 0), A_t = delta_t + gamma lambda A_{t+1}; returns = A + V.
struct Gae {
  std::vector<float> advantages, returns;
};
Gae gae(const std::vector<float>& rewards, const std::vector<float>& values, const Responses& r, float gamma,
        float lambda);

// PPO's rollout as InstructGPT and TRL compute it: per answer token the reward -kl_coef * k1,
// k1 = old_logp - ref_logp (the generation-time log-probability against the frozen reference's;
// ref_logp empty: no penalty), plus the answer's score (one per response) at its last token; then
// gae() over the values.
struct PpoRollout {
  std::vector<float> rewards, advantages, returns;
  double k1_sum = 0;   // of k1 over the tokens
};
PpoRollout ppo_rollout(const std::vector<float>& old_logp, const std::vector<float>& ref_logp,
                       const std::vector<float>& scores, const std::vector<float>& values, const Responses& r,
                       double kl_coef, float gamma, float lambda);

// TRL's whitening of PPO's advantages, x -> (x - mean) * scale with scale = 1 / sqrt(var + 1e-8),
// mean and the unbiased variance of all n values of the batch from their sum and sum of squares
// (which a caller may sum over ranks first).
struct Whitening {
  double mean = 0, scale = 1;
};
Whitening whitening(double n, double sum, double sum_sq);

struct ValueLoss {
  double loss = 0;
  std::vector<float> dvalues;   // d loss / d value, per token
  double clip_fraction = 0;
};

// PPO's clipped value loss, per token: 0.5 max((v - R)^2, (v_old + clip(v - v_old, -eps, eps) - R)^2),
// averaged as `norm` says.
ValueLoss value_loss(const std::vector<float>& values, const std::vector<float>& old_values,
                     const std::vector<float>& returns, const Responses& r, float clip_eps, LossNorm norm);

// Adaptive KL control (Ziegler et al. 2019, as TRL's AdaptiveKLController): the coefficient times
// 1 + clip(kl / target - 1, -0.2, 0.2) * n / horizon, after a batch of n answers whose mean summed
// KL per answer was kl.
double adaptive_kl_coef(double coef, double kl, double target, double n, double horizon);

// Per token of a full-vocabulary logits row (V): the sampled token's log-probability and the
// softmax's entropy, in double (the host reference of what the backend computes).
void token_logprob_entropy(float* logp, float* entropy, const float* logits, int V, int token);

// The gradient with respect to one logits row (V) of a loss with d loss / d logp = dlogp and
// d loss / d entropy = dentropy at that token: dlogp (onehot - p) - dentropy p (log p + H).
void logits_gradient(float* dlogits, const float* logits, int V, int token, float dlogp, float dentropy);

}  // namespace trident::rl
