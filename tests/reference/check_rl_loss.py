"""GRPO and PPO losses of trident's rl_loss (dump_rl_loss) against an independent PyTorch version:
losses, the policy's entropy and gradients with respect to the logits (and the values) within 1e-5.

    check_rl_loss.py DUMP_RL_LOSS
"""
import json
import subprocess
import sys

import torch

torch.set_default_dtype(torch.float64)
TOL = 1e-5


def masked_mean(per_token, lengths, norm):
    """Sequence: mean over each response, then over responses (DeepSeekMath); token: over all (DAPO)."""
    if norm == "token":
        return per_token.mean()
    parts = torch.split(per_token, lengths)
    return torch.stack([p.mean() for p in parts]).mean()


def policy_loss(d, case, advantages):
    V = d["V"]
    logits = torch.tensor(d["logits"]).reshape(-1, V).requires_grad_(True)
    tokens = torch.tensor(d["tokens"])
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(1, tokens[:, None])[:, 0]
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    ratio = torch.exp(logp - torch.tensor(d["old_logp"]))
    eps = case["clip_eps"]
    pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - eps, 1 + eps) * advantages)
    per_token = pg - case["entropy_coef"] * entropy
    if case["kl_beta"]:
        diff = torch.tensor(d["ref_logp"]) - logp
        per_token = per_token + case["kl_beta"] * (torch.exp(diff) - diff - 1)
    loss = masked_mean(per_token, d["lengths"], case["norm"])
    loss.backward()
    clipped = ((ratio * advantages) > (torch.clamp(ratio, 1 - eps, 1 + eps) * advantages)).sum().item()
    kl_sum = 0.0
    if case["kl_beta"]:
        kl_sum = (torch.exp(diff) - diff - 1).sum().item()
    policy_loss.last_counts = (clipped, kl_sum, entropy.detach())
    return loss.item(), logits.grad.flatten()


def gae(rewards, values, lengths, gamma, lam):
    adv, start = torch.zeros_like(values), 0
    for n in lengths:
        last, next_v = 0.0, 0.0
        for t in reversed(range(start, start + n)):
            delta = rewards[t] + gamma * next_v - values[t]
            last = delta + gamma * lam * last
            adv[t], next_v = last, values[t]
        start += n
    return adv, adv + values


def close(name, got, want):
    got, want = torch.as_tensor(got, dtype=torch.float64), torch.as_tensor(want, dtype=torch.float64)
    err = (got - want).abs().max().item()
    print(f"{name:28s} max |diff| {err:.3g}")
    return err <= TOL


def main():
    d = json.loads(subprocess.run([sys.argv[1]], check=True, capture_output=True, text=True).stdout)
    ok = True
    lengths = d["lengths"]
    rewards = torch.tensor(d["grpo_rewards"]).reshape(-1, d["grpo_group"])
    adv_seq = ((rewards - rewards.mean(1, keepdim=True)) / (rewards.std(1, keepdim=True) + d["grpo_eps"])).flatten()
    adv = torch.repeat_interleave(adv_seq, torch.tensor(lengths))
    for case in d["grpo"]:
        ok &= close(f"grpo {case['norm']} advantages", case["advantages"], adv)
        loss, grad = policy_loss(d, case, adv)
        ok &= close(f"grpo {case['norm']} loss", case["loss"], loss)
        ok &= close(f"grpo {case['norm']} dlogits", case["dlogits"], grad)
        ok &= close(f"grpo {case['norm']} entropy", case["entropy_mean"], policy_loss.last_counts[2].mean())
        if not 0 < case["clip_fraction"] < 1:
            print("FAIL: the case clips no ratio or every ratio", case["clip_fraction"])
            ok = False

    # The CPU backend's op, as the grpo head runs it (the entropy a metric, no loss term).
    for case in d["grpo_backend"]:
        loss, grad = policy_loss(d, case, adv)
        clipped, kl_sum, entropy = policy_loss.last_counts
        ok &= close(f"backend grpo {case['norm']} loss", case["loss"], loss)
        ok &= close(f"backend grpo {case['norm']} dlogits", case["dlogits"], grad)
        ok &= close(f"backend grpo {case['norm']} clipped", case["clipped"], clipped)
        ok &= close(f"backend grpo {case['norm']} kl sum", case["kl_sum"], kl_sum)
        ok &= close(f"backend grpo {case['norm']} entropy sum", case["entropy_sum"], entropy.sum())
        if not 0 < clipped < len(d["tokens"]):
            print("FAIL: the backend case clips no ratio or every ratio", clipped)
            ok = False

    p = d["ppo"]
    old_values = torch.tensor(p["old_values"])
    adv, returns = gae(torch.tensor(p["token_rewards"]), old_values, lengths, p["gamma"], p["lambda"])
    ok &= close("ppo gae advantages", p["advantages"], adv)
    ok &= close("ppo returns", p["returns"], returns)
    loss, grad = policy_loss(d, p, adv)
    ok &= close("ppo policy loss", p["loss"], loss)
    ok &= close("ppo dlogits", p["dlogits"], grad)
    values = torch.tensor(p["values"]).requires_grad_(True)
    clipped = old_values + torch.clamp(values - old_values, -p["value_clip"], p["value_clip"])
    vloss = (0.5 * torch.max((values - returns) ** 2, (clipped - returns) ** 2)).mean()
    vloss.backward()
    ok &= close("ppo value loss", p["value_loss"], vloss.item())
    ok &= close("ppo dvalues", p["dvalues"], values.grad)

    # Task ppo's rollout as TRL's PPO computes it: rewards -kl_coef * (logp_old - logp_ref) per token
    # plus the score at each answer's last token, GAE, and the advantages whitened over the batch
    # (masked_whiten: unbiased variance, rsqrt(var + 1e-8)).
    q = d["ppo_rollout"]
    kl = torch.tensor(d["old_logp"]) - torch.tensor(d["ref_logp"])
    token_rewards = -q["kl_coef"] * kl
    ends = torch.cumsum(torch.tensor(lengths), 0) - 1
    token_rewards[ends] += torch.tensor(q["scores"])
    adv, returns = gae(token_rewards, torch.tensor(q["values"]), lengths, q["gamma"], q["lambda"])
    whitened = (adv - adv.mean()) * torch.rsqrt(adv.var() + 1e-8)
    ok &= close("ppo rollout rewards", q["rewards"], token_rewards)
    ok &= close("ppo rollout k1 sum", q["k1_sum"], kl.sum().item())
    ok &= close("ppo rollout advantages", q["advantages"], adv)
    ok &= close("ppo rollout returns", q["returns"], returns)
    ok &= close("ppo rollout whitened", q["whitened"], whitened)

    # The CPU backend's value head (task ppo's value model): values lnf . w at every position, the
    # clipped loss over the answer positions (coef > 0) and its gradients.
    b = d["ppo_value_backend"]
    C = b["C"]
    lnf = torch.tensor(b["lnf"]).reshape(-1, C).requires_grad_(True)
    w = torch.tensor(b["w"]).requires_grad_(True)
    values = lnf @ w
    values.retain_grad()
    old, ret, coef = (torch.tensor(b[k]) for k in ("old_values", "returns", "coef"))
    clipped = old + torch.clamp(values - old, -b["value_clip"], b["value_clip"])
    plain_sq, clipped_sq = (values - ret) ** 2, (clipped - ret) ** 2
    vloss = (coef * 0.5 * torch.max(plain_sq, clipped_sq)).sum()
    vloss.backward()
    answer = coef > 0
    n_clipped = (answer & (clipped_sq > plain_sq)).sum().item()
    ok &= close("backend ppo values", b["values"], values.detach())
    ok &= close("backend ppo value loss", b["loss"], vloss.item())
    ok &= close("backend ppo dvalues", b["dvalues"], values.grad)
    ok &= close("backend ppo dlnf", b["dlnf"], lnf.grad.flatten())
    ok &= close("backend ppo dw", b["dw"], w.grad)
    ok &= close("backend ppo clipped", b["clipped"], n_clipped)
    ok &= close("backend ppo squares", b["squares"], (coef * plain_sq).sum().item())
    if not 0 < n_clipped < answer.sum().item():
        print("FAIL: the backend value case clips no position or every one", n_clipped)
        ok = False
    if ok and abs(b["loss"] - p["value_loss"]) < 1e-9:
        print("FAIL: the backend value case repeats the host case's values")
        ok = False
    print("ok" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
