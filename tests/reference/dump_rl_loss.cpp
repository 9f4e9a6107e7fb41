// Dumps GRPO and PPO losses and their gradients (with respect to logits and values) computed by
// trident's rl_loss on random inputs, and the CPU backend's policy_loss (the op task grpo's head
// runs, with the exact entropy from xent_entropy_sums of a vocabulary in two shards) and
// value_fwd / value_bwd (task ppo's value head) on the same inputs, as JSON for check_rl_loss.py
// to recompute in PyTorch.
#include <cstdio>
#include <nlohmann/json.hpp>

#include <cmath>

#include "trident/backend/cpu_backend.hpp"
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
          {"dlogits", dlogits}, {"clip_fraction", l.clip_fraction}, {"advantages", advantages},
          {"entropy_mean", l.entropy}};
}

// Each token's xent_entropy_sums as the head computes them under tp = 2: the vocabulary in two
// shards of ceil(V / 2) columns (the second with a padding column of a large logit, which must
// count nowhere), the row maximum over both, each shard's sums added.
std::vector<float> entropy_sums(Backend& be, const std::vector<float>& logits, size_t n, int V) {
  const int v_local = (V + 1) / 2;
  std::vector<float> shard[2], rowmax(n, -INFINITY), sums(2 * n, 0.0f);
  for (int k = 0; k < 2; ++k) {
    shard[k].assign(n * v_local, 50.0f);
    const int valid = std::min(v_local, V - k * v_local);
    for (size_t t = 0; t < n; ++t)
      std::copy_n(&logits[t * V + k * v_local], valid, &shard[k][t * v_local]);
  }
  Buffer buf(be, (n * v_local + 3 * n) * sizeof(float));
  TensorView all = buf.view(DType::F32), z = all.slice(0, n * v_local), mx = all.slice(n * v_local, n),
             es = all.slice(n * v_local + n, 2 * n);
  std::vector<float> part(2 * n);
  for (int pass = 0; pass < 2; ++pass)   // the maxima reduced first (as over TP), then the sums
    for (int k = 0; k < 2; ++k) {
      const int valid = std::min(v_local, V - k * v_local);
      be.copy_from_host(z, shard[k].data());
      if (pass == 0) {
        be.xent_max(mx, z, static_cast<int>(n), v_local, valid);
        be.copy_to_host(part.data(), mx);
        for (size_t t = 0; t < n; ++t) rowmax[t] = std::max(rowmax[t], part[t]);
      } else {
        be.copy_from_host(mx, rowmax.data());
        be.xent_entropy_sums(es, z, mx, static_cast<int>(n), v_local, valid);
        be.copy_to_host(part.data(), es);
        for (size_t i = 0; i < 2 * n; ++i) sums[i] += part[i];
      }
    }
  return sums;
}

// The same loss through Backend::policy_loss as the model's head uses it: token losses (-logp) in,
// per-token weights out, which scale the cross-entropy gradient (p - onehot) of each logits row;
// the sum of the tokens' exact entropies from their xent_entropy_sums (a metric: no loss term).
json backend_case(Backend& be, const std::vector<float>& logits, const std::vector<int>& tokens,
                  const std::vector<float>& old_logp, const std::vector<float>& ref_logp,
                  const std::vector<float>& advantages, const rl::Responses& r, const PolicyArgs& args,
                  rl::LossNorm norm, int V) {
  const size_t n = tokens.size();
  std::vector<float> nll(n), coef(n), coef_adv(n), acc(5, 0.0f), weights(n);
  size_t t = 0;
  for (int len : r.lengths)
    for (int j = 0; j < len; ++j, ++t) {
      float lp, h;
      rl::token_logprob_entropy(&lp, &h, &logits[t * V], V, tokens[t]);
      nll[t] = -lp;
      coef[t] = static_cast<float>(norm == rl::LossNorm::Sequence ? 1.0 / (static_cast<double>(len) * r.lengths.size())
                                                                  : 1.0 / n);
      coef_adv[t] = coef[t] * advantages[t];
    }
  Buffer buf(be, 9 * n * sizeof(float));
  TensorView all = buf.view(DType::F32);
  auto put = [&](int k, const std::vector<float>& v) {
    TensorView x = all.slice(k * n, v.size());
    be.copy_from_host(x, v.data());
    return x;
  };
  TensorView a = put(0, acc), w = put(1, weights);
  be.policy_loss(a, w, put(2, nll), put(3, old_logp), put(4, coef), put(5, coef_adv), put(6, [&] {
                   std::vector<float> ref_nll(n);
                   for (size_t i = 0; i < n; ++i) ref_nll[i] = -ref_logp[i];
                   return ref_nll;
                 }()),
                 put(7, entropy_sums(be, logits, n, V)), static_cast<int>(n), args);
  be.copy_to_host(acc.data(), a);
  be.copy_to_host(weights.data(), w);
  std::vector<double> dlogits(n * V);
  for (size_t i = 0; i < n; ++i) {
    const float* z = &logits[i * V];
    double m = z[0], sum = 0;
    for (int v = 0; v < V; ++v) m = std::max(m, static_cast<double>(z[v]));
    for (int v = 0; v < V; ++v) sum += std::exp(z[v] - m);
    for (int v = 0; v < V; ++v) dlogits[i * V + v] = weights[i] * (std::exp(z[v] - m) / sum - (v == tokens[i]));
  }
  return {{"clip_eps", args.clip_eps}, {"kl_beta", args.kl_beta}, {"entropy_coef", 0.0},
          {"norm", norm == rl::LossNorm::Sequence ? "sequence" : "token"}, {"loss", acc[0]}, {"clipped", acc[1]},
          {"kl_sum", acc[2]}, {"entropy_sum", acc[3]}, {"dlogits", dlogits}};
}

// PPO's value loss through Backend::value_fwd and value_bwd as the value model's head runs them:
// values lnf . w at every position of `positions` (the answer tokens after `pad` positions that
// are no answer's, coef 0), the clipped loss over the answer tokens weighted by coef (the token
// mean), and the gradients with respect to the values, lnf and w.
json value_backend_case(Backend& be, const std::vector<float>& old_values, const std::vector<float>& returns,
                        const rl::Responses& r, float clip, int pad, int C) {
  const size_t n = r.tokens(), N = n + pad;
  const std::vector<float> lnf = random(N * C, 8, -1, 1), w = random(C, 9, -0.5, 0.5);
  std::vector<float> old(N, 0.0f), ret(N, 0.0f), coef(N, 0.0f);
  for (size_t t = 0; t < n; ++t) {
    old[pad + t] = old_values[t];
    ret[pad + t] = returns[t];
    coef[pad + t] = static_cast<float>(1.0 / n);
  }
  Buffer buf(be, (4 * N * C + 8 * N + 2 * C + 5) * sizeof(float));
  TensorView all = buf.view(DType::F32);
  size_t used = 0;
  auto put = [&](const std::vector<float>& v) {
    TensorView x = all.slice(used, v.size());
    used += v.size();
    be.copy_from_host(x, v.data());
    return x;
  };
  TensorView x = put(lnf), wv = put(w), o = put(old), R = put(ret), c = put(coef);
  TensorView values = put(std::vector<float>(N)), dvalues = put(std::vector<float>(N));
  TensorView acc = put(std::vector<float>(5)), dlnf = put(std::vector<float>(N * C)), dw = put(std::vector<float>(C));
  const ValueArgs args{clip, 1.0f};
  be.value_fwd(values, dvalues, acc, x, wv, o, R, c, static_cast<int>(N), C, args);
  be.value_bwd(dlnf, dw, dvalues, x, wv, static_cast<int>(N), C);
  std::vector<float> sums(5), v(N), dv(N), dx(N * C), dwh(C);
  be.copy_to_host(sums.data(), acc);
  be.copy_to_host(v.data(), values);
  be.copy_to_host(dv.data(), dvalues);
  be.copy_to_host(dx.data(), dlnf);
  be.copy_to_host(dwh.data(), dw);
  return {{"C", C}, {"lnf", lnf}, {"w", w}, {"old_values", old}, {"returns", ret}, {"coef", coef},
          {"value_clip", clip}, {"values", v}, {"loss", sums[0]}, {"clipped", sums[1]}, {"squares", sums[2]},
          {"dvalues", dv}, {"dlnf", dx}, {"dw", dwh}};
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

  std::unique_ptr<Backend> cpu = make_cpu_backend();
  for (rl::LossNorm norm : {rl::LossNorm::Sequence, rl::LossNorm::Token})
    out["grpo_backend"].push_back(backend_case(*cpu, logits, tokens, old_logp, ref_logp, adv, r, {0.2f, 0.04f, 1.0f},
                                               norm, V));

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
  out["ppo_value_backend"] = value_backend_case(*cpu, old_values, g.returns, r, vclip, 3, 16);
  // Task ppo's rollout (PromptRollouts::set_values): KL-shaped rewards from the generation-time and
  // reference log-probabilities and one score per answer, GAE, and the whitened advantages.
  const float kl_coef = 0.05f;
  const rl::PpoRollout roll = rl::ppo_rollout(old_logp, ref_logp, rewards, old_values, r, kl_coef, gamma, lambda);
  double sum = 0, sum_sq = 0;
  for (float a : roll.advantages) {
    sum += a;
    sum_sq += static_cast<double>(a) * a;
  }
  const rl::Whitening wh = rl::whitening(static_cast<double>(n), sum, sum_sq);
  std::vector<float> whitened(n);
  for (size_t t = 0; t < n; ++t) whitened[t] = static_cast<float>((roll.advantages[t] - wh.mean) * wh.scale);
  out["ppo_rollout"] = {{"kl_coef", kl_coef}, {"scores", rewards}, {"values", old_values}, {"gamma", gamma},
                        {"lambda", lambda}, {"rewards", roll.rewards}, {"advantages", roll.advantages},
                        {"returns", roll.returns}, {"whitened", whitened}, {"k1_sum", roll.k1_sum}};
  out["ppo"].update({{"token_rewards", token_rewards}, {"old_values", old_values}, {"values", values},
                     {"gamma", gamma}, {"lambda", lambda}, {"value_clip", vclip}, {"returns", g.returns},
                     {"value_loss", vl.loss}, {"dvalues", vl.dvalues}});
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
