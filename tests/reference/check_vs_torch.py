#!/usr/bin/python3
"""Checks trident's GPT-2 against a PyTorch GPT-2 written here (fp32), on the weights and tokens
dumped by dump_reference: logits, loss, every parameter gradient, and the loss of each AdamW
step. Run with Debian's /usr/bin/python3 (python3-torch) for CPU dumps; for CUDA dumps (bf16)
the tolerances are those of issue 4: each loss of the trace within 2%."""
import json
import math
import sys

import numpy as np
import torch
import torch.nn.functional as F

# CPU (fp32 against fp32): only summation order differs.
# After step 0 the two models' weights differ by rounding (~1e-7), which the gradient norm of
# later steps amplifies up to ~1e-5: those norms get 1e-4.
CPU_TOL = {"logits": 1e-5, "loss": 1e-6, "grad": 1e-5, "norm": 1e-5, "norm_later": 1e-4, "steps": 1e-5}
# CUDA (bf16 parameters and activations against fp32): bf16 keeps 8 significant bits, so logits
# and gradients carry ~1e-2 relative noise; the loss trace must stay within 2% at every step.
CUDA_TOL = {"logits": 3e-2, "loss": 1e-2, "grad": 1e-1, "norm": 5e-2, "norm_later": 1e-1, "steps": 2e-2}


def load(d):
    man = json.load(open(f"{d}/manifest.json"))
    raw = np.fromfile(f"{d}/data.bin", dtype=np.float32)
    arrays = {}
    for name, a in man["arrays"].items():
        n = int(np.prod(a["shape"]))
        arrays[name] = raw[a["offset"]:a["offset"] + n].reshape(a["shape"])
    return man["config"], arrays


def gpt2_hidden(p, idx, cfg):
    """GPT-2: pre-LN blocks, learned positions, GELU (tanh); the final norm's output (B, T, C)."""
    B, T = idx.shape
    C, NH = cfg["n_embd"], cfg["n_head"]
    HS = C // NH
    eps = cfg["ln_eps"]
    x = p["wte"][idx] + p["wpe"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(cfg["n_layer"]):
        b = f"blocks.{l}."
        h = F.layer_norm(x, (C,), p[b + "ln1.weight"], p[b + "ln1.bias"], eps)
        qkv = h @ p[b + "attn.qkv.weight"].reshape(3 * C, C).T + p[b + "attn.qkv.bias"].reshape(3 * C)
        q, k, v = (t.reshape(B, T, NH, HS).transpose(1, 2) for t in qkv.split(C, dim=-1))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(HS)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ p[b + "attn.proj.weight"].T + p[b + "attn.proj.bias"]
        h = F.layer_norm(x, (C,), p[b + "ln2.weight"], p[b + "ln2.bias"], eps)
        h = F.gelu(h @ p[b + "mlp.fc.weight"].T + p[b + "mlp.fc.bias"], approximate="tanh")
        x = x + h @ p[b + "mlp.proj.weight"].T + p[b + "mlp.proj.bias"]
    return F.layer_norm(x, (C,), p["lnf.weight"], p["lnf.bias"], eps)


def gpt2_forward(p, idx, cfg):
    """GPT-2 with its tied embedding as the head; logits (B, T, V)."""
    return gpt2_hidden(p, idx, cfg) @ p["wte"].T


def rel(a, b):
    a = torch.as_tensor(a, dtype=torch.float64)
    b = torch.as_tensor(b, dtype=torch.float64)
    return float((a - b).norm() / max(float(b.norm()), 1e-30))


def finish(failures):
    """Prints the verdict of a checker and exits 1 when any check failed."""
    if failures:
        print(f"FAILED: {len(failures)} checks: {', '.join(failures[:8])}")
        sys.exit(1)
    print("all checks passed")


def lr_at(cfg, step):
    if step < cfg["warmup_steps"]:
        return cfg["lr"] * (step + 1) / cfg["warmup_steps"]
    decay = max(1, cfg["steps"] - 1 - cfg["warmup_steps"])
    progress = min(1.0, (step - cfg["warmup_steps"]) / decay)
    return cfg["min_lr"] + 0.5 * (cfg["lr"] - cfg["min_lr"]) * (1 + math.cos(math.pi * progress))


def check_training(cfg, a, forward, decays, failures, loss_of=None, init_output=None):
    """Checks a dump against `forward` (params, idx, cfg) -> logits: logits at init, the loss and
    every gradient of step 0, each step's gradient norm and lr, and the loss of each AdamW step
    (weight decay where decays(name)). Failed checks are appended to `failures`. A model without
    an LM head (a reward model) gives loss_of (params, step) -> the loss of step's global batch and
    init_output (params) -> (dump name, tensor) for the check at init instead."""
    tol = CUDA_TOL if cfg.get("backend") == "cuda" else CPU_TOL
    torch.manual_seed(0)
    names = sorted(k[len("param."):] for k in a if k.startswith("param."))
    params = {n: torch.tensor(a["param." + n], requires_grad=True) for n in names}
    tokens = torch.tensor(a["tokens"], dtype=torch.long)
    B, T, G = cfg["micro_batch_size"], cfg["seq_len"], cfg["global_batch_size"]

    def check(what, err, tol):
        status = "ok" if err <= tol else "FAIL"
        print(f"  {what:<40} {err:.3e}  (tol {tol:.0e})  {status}")
        if err > tol:
            failures.append(what)

    with torch.no_grad():
        if init_output:
            name, out = init_output(params)
            check(f"{name} at init", rel(out, a[name]), tol["logits"])
        else:
            logits = forward(params, tokens[:B, :T], cfg)
            check("logits at init", rel(logits.reshape(B * T, -1), a["logits0"]), tol["logits"])

    ref_params = {n: torch.tensor(a["ref." + n]) for n in names} if cfg.get("dpo") else None
    rewards = []   # DPO: [accuracy, mean chosen reward, mean rejected reward] of each step

    def sequence_logps(p, batch, targets):
        """Sum over each sequence's trained targets of log p(target)."""
        logits = forward(p, batch[:, :T], cfg)
        nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100,
                              reduction="none")
        return -nll.view(G, T).sum(dim=1)

    def dpo_loss(batch, targets):
        """DPO (Rafailov et al.) with cDPO label smoothing over the pairs (2i chosen, 2i + 1 rejected),
        or IPO (Azar et al.) as TRL's DPOTrainer computes it: (h - 1/(2 beta))^2 with h the difference
        of the chosen and rejected log-ratios, each divided by its count of trained targets (at least 1)."""
        beta, eps = cfg["dpo_beta"], cfg["dpo_label_smoothing"]
        pi = sequence_logps(params, batch, targets)
        with torch.no_grad():
            ref = sequence_logps(ref_params, batch, targets)
        chosen, rejected = beta * (pi[0::2] - ref[0::2]), beta * (pi[1::2] - ref[1::2])
        z = chosen - rejected
        rewards.append([(z > 0).float().mean().item(), chosen.mean().item(), rejected.mean().item()])
        if cfg.get("dpo_loss", "sigmoid") == "ipo":
            n = (targets != -100).sum(dim=1).clamp(min=1)
            ratio = (pi - ref) / n
            h = ratio[0::2] - ratio[1::2]
            return ((h - 1 / (2 * beta)) ** 2).mean()
        return (-(1 - eps) * F.logsigmoid(z) - eps * F.logsigmoid(-z)).mean()

    def batch_loss(step):
        batch = tokens[step * G:(step + 1) * G]
        targets = batch[:, 1:].clone()
        if cfg.get("sft") or cfg.get("dpo"):   # fine-tuning: only the trained (unmasked) targets count
            mask = torch.tensor(a["target_mask"][step * G:(step + 1) * G]) > 0
            targets[~mask] = -100
        if cfg.get("dpo"):
            return dpo_loss(batch, targets)
        logits = forward(params, batch[:, :T], cfg)
        # The mean over the (trained) targets of the batch.
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)

    opt = torch.optim.AdamW([{"params": [params[n] for n in names if decays(n)], "weight_decay": cfg["weight_decay"]},
                             {"params": [params[n] for n in names if not decays(n)], "weight_decay": 0.0}],
                            lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"])
    losses = []
    for step in range(cfg["steps"]):
        lr = lr_at(cfg, step)
        check(f"lr of step {step}", abs(lr - float(a["lrs"][step])) / lr, 1e-6)  # fp32 rounding of the lr
        for group in opt.param_groups:
            group["lr"] = lr
        opt.zero_grad()
        loss = loss_of(params, step) if loss_of else batch_loss(step)
        loss.backward()
        if step == 0:
            check("loss at init", abs(loss.item() - float(a["losses"][0])) / loss.item(), tol["loss"])
            for n in names:
                check(f"grad {n}", rel(a["grad." + n], params[n].grad), tol["grad"])
        norm = torch.nn.utils.clip_grad_norm_([params[n] for n in names], cfg["grad_clip"])
        check(f"grad norm of step {step}", abs(norm.item() - float(a["grad_norms"][step])) / norm.item(),
              tol["norm"] if step == 0 else tol["norm_later"])
        opt.step()
        losses.append(loss.item())
    for step, (mine, ref) in enumerate(zip(a["losses"], losses)):
        check(f"loss of AdamW step {step}", abs(float(mine) - ref) / ref, tol["steps"])
    for step, (acc, chosen, rejected) in enumerate(rewards):
        # Rewards are beta times differences of sequence log-probabilities: compared absolutely.
        check(f"reward accuracy of step {step}", abs(float(a["accuracy"][step]) - acc), 1e-6)
        check(f"rewards of step {step}", max(abs(float(a["chosen_rewards"][step]) - chosen),
                                             abs(float(a["rejected_rewards"][step]) - rejected)), tol["steps"])
        check(f"margin of step {step}", abs(float(a["margins"][step]) - (chosen - rejected)), tol["steps"])
    print(f"losses {losses[0]:.6f} -> {losses[-1]:.6f} over {len(losses)} steps")


def main():
    cfg, a = load(sys.argv[1])
    failures = []
    # GPT-2's qkv bias is (3, NH, HS): decay follows the dimension, as GPT-2 training code does.
    check_training(cfg, a, gpt2_forward, lambda n: a["param." + n].ndim >= 2, failures)
    finish(failures)


if __name__ == "__main__":
    main()
