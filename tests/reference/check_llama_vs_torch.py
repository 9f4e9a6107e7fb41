#!/usr/bin/python3
"""Checks trident's Llama (CPU backend) against a PyTorch Llama written here with Hugging Face
LlamaForCausalLM semantics (RMSNorm in fp32, rotate_half RoPE, grouped-query attention by
repeat_kv, SwiGLU MLP, optional q/k/v biases, untied head), on the weights and tokens
dump_reference wrote: logits, loss, every parameter gradient and the loss of each AdamW step, all
in fp32 within the tolerances of the GPT-2 check (check_vs_torch.py). For an SFT dump (llama-sft)
the loss is PyTorch's cross-entropy with the masked targets set to ignore_index: the mean over the
trained targets of the whole global batch."""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_llama_ops import repeat_kv, rms_norm, rotate_half  # noqa: E402
from check_vs_torch import CPU_TOL, CUDA_TOL, finish, load, lr_at, rel  # noqa: E402


def rope_cos_sin(T, HS, theta):
    """LlamaRotaryEmbedding (default rope type) in fp32."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, HS, 2, dtype=torch.int64).float() / HS))
    freqs = torch.arange(T).float()[:, None] @ inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def llama_forward(p, idx, cfg):
    """logits (B, T, V) of LlamaForCausalLM on trident's parameter names."""
    B, T = idx.shape
    C, NH, NKV = cfg["n_embd"], cfg["n_head"], cfg["n_kv_head"]
    HS = C // NH
    eps = cfg["ln_eps"]
    cos, sin = rope_cos_sin(T, HS, cfg["rope_theta"])
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    x = p["wte"][idx]
    for l in range(cfg["n_layer"]):
        b = f"blocks.{l}."

        def proj(name, heads):
            y = h @ p[b + f"attn.{name}.weight"].reshape(heads * HS, C).T
            if cfg["qkv_bias"]:
                y = y + p[b + f"attn.{name}.bias"].reshape(heads * HS)
            return y.view(B, T, heads, HS).transpose(1, 2)

        h = rms_norm(x, p[b + "ln1.weight"], eps)
        q, k, v = proj("q", NH), proj("k", NKV), proj("v", NKV)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = repeat_kv(k, NH // NKV), repeat_kv(v, NH // NKV)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(HS)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, NH * HS)
        x = x + y @ p[b + "attn.proj.weight"].T
        h = rms_norm(x, p[b + "ln2.weight"], eps)
        h = F.silu(h @ p[b + "mlp.gate.weight"].T) * (h @ p[b + "mlp.up.weight"].T)
        x = x + h @ p[b + "mlp.down.weight"].T
    x = rms_norm(x, p["lnf.weight"], eps)
    return x @ p["wte" if cfg["tied"] else "lm_head"].T


def decays(name):
    """AdamW weight decay on matrices (embeddings and projections), not on norms and biases."""
    return name in ("wte", "lm_head") or (name.endswith(".weight") and not name.split(".")[-2].startswith("ln"))


def main():
    cfg, a = load(sys.argv[1])
    assert cfg["arch"] == "llama", "check_llama_vs_torch.py checks a llama dump"
    tol = CUDA_TOL if cfg.get("backend") == "cuda" else CPU_TOL
    names = sorted(k[len("param."):] for k in a if k.startswith("param."))
    params = {n: torch.tensor(a["param." + n], requires_grad=True) for n in names}
    tokens = torch.tensor(a["tokens"], dtype=torch.long)
    B, T, G = cfg["micro_batch_size"], cfg["seq_len"], cfg["global_batch_size"]
    failures = []

    def check(what, err, tol):
        status = "ok" if err <= tol else "FAIL"
        print(f"  {what:<40} {err:.3e}  (tol {tol:.0e})  {status}")
        if err > tol:
            failures.append(what)

    expected = {"wte", "lnf.weight"} | ({"lm_head"} if not cfg["tied"] else set())
    for l in range(cfg["n_layer"]):
        b = f"blocks.{l}."
        expected |= {b + s for s in ("ln1.weight", "attn.q.weight", "attn.k.weight", "attn.v.weight",
                                     "attn.proj.weight", "ln2.weight", "mlp.gate.weight", "mlp.up.weight",
                                     "mlp.down.weight")}
        if cfg["qkv_bias"]:
            expected |= {b + "attn.q.bias", b + "attn.k.bias", b + "attn.v.bias"}
    check("parameter names (missing + extra)", len(expected ^ set(names)), 0)

    with torch.no_grad():
        logits = llama_forward(params, tokens[:B, :T], cfg)
    check("logits at init", rel(logits.reshape(B * T, -1), a["logits0"]), tol["logits"])

    def batch_loss(step):
        batch = tokens[step * G:(step + 1) * G]
        logits = llama_forward(params, batch[:, :T], cfg)
        targets = batch[:, 1:].clone()
        if cfg.get("sft"):
            mask = torch.tensor(a["target_mask"][step * G:(step + 1) * G]) > 0
            targets[~mask] = -100
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)

    opt = torch.optim.AdamW([{"params": [params[n] for n in names if decays(n)], "weight_decay": cfg["weight_decay"]},
                             {"params": [params[n] for n in names if not decays(n)], "weight_decay": 0.0}],
                            lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"])
    losses = []
    for step in range(cfg["steps"]):
        lr = lr_at(cfg, step)
        for group in opt.param_groups:
            group["lr"] = lr
        opt.zero_grad()
        loss = batch_loss(step)
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
    print(f"losses {losses[0]:.6f} -> {losses[-1]:.6f} over {len(losses)} steps")
    finish(failures)


if __name__ == "__main__":
    main()
