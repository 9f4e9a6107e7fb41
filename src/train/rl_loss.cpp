// GRPO and PPO losses over per-token log-probabilities, entropies and values (host, fp32 in and
// out, sums in double).
#include "trident/train/rl_loss.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "trident/core/error.hpp"

namespace trident::rl {

namespace {

// The weight of each token in the batch's mean under `norm`.
std::vector<double> token_weights(const Responses& r, LossNorm norm) {
  std::vector<double> w;
  w.reserve(r.tokens());
  const size_t n_seq = r.lengths.size(), total = r.tokens();
  for (int len : r.lengths)
    for (int t = 0; t < len; ++t)
      w.push_back(norm == LossNorm::Sequence ? 1.0 / (static_cast<double>(len) * n_seq) : 1.0 / total);
  return w;
}

void check_tokens(const std::vector<float>& v, const Responses& r, const char* what) {
  TRIDENT_CHECK(v.size() == r.tokens(), str(what, ": ", v.size(), " values for ", r.tokens(), " response tokens"));
}

}  // namespace

LossNorm parse_loss_norm(const std::string& name) {
  if (name == "sequence") return LossNorm::Sequence;
  if (name == "token") return LossNorm::Token;
  throw InputError(str("rl.loss_norm = ", quoted_text(name), ": must be sequence or token"));
}

size_t Responses::tokens() const {
  size_t n = 0;
  for (int len : lengths) n += static_cast<size_t>(std::max(len, 0));
  return n;
}

std::vector<float> group_advantages(const std::vector<float>& rewards, int group, float eps) {
  TRIDENT_CHECK(group >= 2 && rewards.size() % group == 0,
                str("group_advantages: ", rewards.size(), " rewards in groups of ", group));
  std::vector<float> a(rewards.size());
  for (size_t g0 = 0; g0 < rewards.size(); g0 += group) {
    double mean = 0, var = 0;
    for (int i = 0; i < group; ++i) mean += rewards[g0 + i];
    mean /= group;
    for (int i = 0; i < group; ++i) var += (rewards[g0 + i] - mean) * (rewards[g0 + i] - mean);
    const double sd = std::sqrt(var / (group - 1));
    for (int i = 0; i < group; ++i) a[g0 + i] = static_cast<float>((rewards[g0 + i] - mean) / (sd + eps));
  }
  return a;
}

std::vector<float> per_token(const std::vector<float>& per_sequence, const Responses& r) {
  TRIDENT_CHECK(per_sequence.size() == r.lengths.size(),
                str("per_token: ", per_sequence.size(), " values for ", r.lengths.size(), " sequences"));
  std::vector<float> out;
  out.reserve(r.tokens());
  for (size_t i = 0; i < per_sequence.size(); ++i) out.insert(out.end(), std::max(r.lengths[i], 0), per_sequence[i]);
  return out;
}

PolicyLoss policy_loss(const std::vector<float>& logp, const std::vector<float>& old_logp,
                       const std::vector<float>& ref_logp, const std::vector<float>& advantages,
                       const std::vector<float>& entropy, const Responses& r, const PolicyLossArgs& args) {
  check_tokens(logp, r, "policy_loss: logp");
  check_tokens(old_logp, r, "policy_loss: old_logp");
  check_tokens(advantages, r, "policy_loss: advantages");
  if (args.kl_beta != 0) check_tokens(ref_logp, r, "policy_loss: ref_logp");
  if (args.entropy_coef != 0) check_tokens(entropy, r, "policy_loss: entropy");
  const std::vector<double> w = token_weights(r, args.norm);
  const size_t n = w.size();
  PolicyLoss out;
  out.dlogp.assign(n, 0.0f);
  out.dentropy.assign(n, 0.0f);
  size_t clipped = 0;
  for (size_t t = 0; t < n; ++t) {
    const double A = advantages[t], rho = std::exp(static_cast<double>(logp[t]) - old_logp[t]);
    const double lo = 1.0 - args.clip_eps, hi = 1.0 + args.clip_eps;
    const double unclipped = rho * A, clip = std::clamp(rho, lo, hi) * A;
    // The minimum takes the clipped branch only where the ratio left the range in the
    // advantage's direction; there the gradient is 0.
    const bool is_clipped = clip < unclipped;
    clipped += is_clipped;
    double l = -std::min(unclipped, clip), dl = is_clipped ? 0.0 : -rho * A;
    if (args.kl_beta != 0) {
      const double d = static_cast<double>(ref_logp[t]) - logp[t], e = std::exp(d);
      l += args.kl_beta * (e - d - 1);
      dl += args.kl_beta * (1 - e);
      out.kl += e - d - 1;
    }
    if (args.entropy_coef != 0) {
      l -= args.entropy_coef * entropy[t];
      out.dentropy[t] = static_cast<float>(-args.entropy_coef * w[t]);
    }
    if (!entropy.empty()) out.entropy += entropy[t];
    out.loss += w[t] * l;
    out.dlogp[t] = static_cast<float>(w[t] * dl);
  }
  if (n) {
    out.clip_fraction = static_cast<double>(clipped) / n;
    out.kl /= n;
    out.entropy /= n;
  }
  return out;
}

Gae gae(const std::vector<float>& rewards, const std::vector<float>& values, const Responses& r, float gamma,
        float lambda) {
  check_tokens(rewards, r, "gae: rewards");
  check_tokens(values, r, "gae: values");
  Gae out{std::vector<float>(values.size()), std::vector<float>(values.size())};
  size_t start = 0;
  for (int len : r.lengths) {
    double next_value = 0, next_adv = 0;
    for (int t = len - 1; t >= 0; --t) {
      const size_t i = start + t;
      const double delta = rewards[i] + gamma * next_value - values[i];
      next_adv = delta + static_cast<double>(gamma) * lambda * next_adv;
      next_value = values[i];
      out.advantages[i] = static_cast<float>(next_adv);
      out.returns[i] = static_cast<float>(next_adv + values[i]);
    }
    start += std::max(len, 0);
  }
  return out;
}

PpoRollout ppo_rollout(const std::vector<float>& old_logp, const std::vector<float>& ref_logp,
                       const std::vector<float>& scores, const std::vector<float>& values, const Responses& r,
                       double kl_coef, float gamma, float lambda) {
  check_tokens(old_logp, r, "ppo_rollout: old_logp");
  if (!ref_logp.empty()) check_tokens(ref_logp, r, "ppo_rollout: ref_logp");
  TRIDENT_CHECK(scores.size() == r.lengths.size(),
                str("ppo_rollout: ", scores.size(), " scores for ", r.lengths.size(), " responses"));
  PpoRollout out;
  out.rewards.reserve(r.tokens());
  size_t t = 0;
  for (size_t i = 0; i < r.lengths.size(); ++i)
    for (int j = 0; j < r.lengths[i]; ++j, ++t) {
      const double k1 = ref_logp.empty() ? 0.0 : static_cast<double>(old_logp[t]) - ref_logp[t];
      out.k1_sum += k1;
      out.rewards.push_back(static_cast<float>(-kl_coef * k1 + (j + 1 == r.lengths[i] ? scores[i] : 0.0)));
    }
  Gae est = gae(out.rewards, values, r, gamma, lambda);
  out.advantages = std::move(est.advantages);
  out.returns = std::move(est.returns);
  return out;
}

Whitening whitening(double n, double sum, double sum_sq) {
  Whitening w;
  if (n < 1) return w;
  w.mean = sum / n;
  const double unbiased = n > 1 ? std::max(sum_sq - n * w.mean * w.mean, 0.0) / (n - 1) : 0.0;
  w.scale = 1.0 / std::sqrt(unbiased + 1e-8);
  return w;
}

ValueLoss value_loss(const std::vector<float>& values, const std::vector<float>& old_values,
                     const std::vector<float>& returns, const Responses& r, float clip_eps, LossNorm norm) {
  check_tokens(values, r, "value_loss: values");
  check_tokens(old_values, r, "value_loss: old_values");
  check_tokens(returns, r, "value_loss: returns");
  const std::vector<double> w = token_weights(r, norm);
  ValueLoss out;
  out.dvalues.assign(w.size(), 0.0f);
  size_t clipped = 0;
  for (size_t t = 0; t < w.size(); ++t) {
    const double v = values[t], v_old = old_values[t], R = returns[t];
    const double v_clip = v_old + std::clamp(v - v_old, -static_cast<double>(clip_eps), static_cast<double>(clip_eps));
    const double a = (v - R) * (v - R), b = (v_clip - R) * (v_clip - R);
    // The clipped branch carries a gradient only while v - v_old is inside the range (then it
    // equals the plain one).
    const bool use_clipped = b > a;
    clipped += use_clipped;
    out.loss += w[t] * 0.5 * std::max(a, b);
    const bool inside = std::abs(v - v_old) < clip_eps;
    out.dvalues[t] = static_cast<float>(w[t] * (use_clipped ? (inside ? v_clip - R : 0.0) : v - R));
  }
  if (!w.empty()) out.clip_fraction = static_cast<double>(clipped) / w.size();
  return out;
}

double adaptive_kl_coef(double coef, double kl, double target, double n, double horizon) {
  const double error = std::clamp(kl / target - 1.0, -0.2, 0.2);
  return coef * (1.0 + error * n / horizon);
}

void token_logprob_entropy(float* logp, float* entropy, const float* logits, int V, int token) {
  const double mx = *std::max_element(logits, logits + V);
  double s = 0;
  for (int v = 0; v < V; ++v) s += std::exp(logits[v] - mx);
  const double lse = mx + std::log(s);
  double h = 0;
  for (int v = 0; v < V; ++v) {
    const double lp = logits[v] - lse;
    h -= std::exp(lp) * lp;
  }
  *logp = static_cast<float>(logits[token] - lse);
  *entropy = static_cast<float>(h);
}

void logits_gradient(float* dlogits, const float* logits, int V, int token, float dlogp, float dentropy) {
  const double mx = *std::max_element(logits, logits + V);
  double s = 0;
  for (int v = 0; v < V; ++v) s += std::exp(logits[v] - mx);
  const double lse = mx + std::log(s);
  double h = 0;
  for (int v = 0; v < V; ++v) h -= std::exp(logits[v] - lse) * (logits[v] - lse);
  for (int v = 0; v < V; ++v) {
    const double lp = logits[v] - lse, p = std::exp(lp);
    dlogits[v] = static_cast<float>(dlogp * ((v == token) - p) - dentropy * p * (lp + h));
  }
}

}  // namespace trident::rl
