#!/usr/bin/python3
"""Checks trident's Llama (CPU backend) against a PyTorch Llama written here with Hugging Face
LlamaForCausalLM semantics (RMSNorm in fp32, rotate_half RoPE, grouped-query attention by
repeat_kv, SwiGLU MLP, optional q/k/v biases, untied head), on the weights and tokens
dump_reference wrote: logits, loss, every parameter gradient and the loss of each AdamW step, all
in fp32 within the tolerances of the GPT-2 check (check_vs_torch.py). For an SFT dump (llama-sft)
the loss is PyTorch's cross-entropy with the masked targets set to ignore_index: the mean over the
trained targets of the whole global batch. For a DPO dump (llama-dpo) it is the DPO loss written in
check_vs_torch.py from the per-sequence sums of those token log-probabilities under the policy and the
dumped reference weights (llama-ipo: the IPO loss). For a reward model (llama-reward: Hugging Face
LlamaForSequenceClassification with one label, score.weight instead of the LM head) the loss is
the Bradley-Terry -log sigmoid(r_chosen - r_rejected) averaged over the global batch's pairs
(samples 2i, 2i + 1), each sequence scored at its last token: the token after its last trained
target (kept inside the T inputs); a pair with an untrained sequence is left out."""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_llama_ops import repeat_kv, rms_norm, rotate_half  # noqa: E402
from check_vs_torch import check_training, finish, load  # noqa: E402


def rope_cos_sin(T, HS, theta):
    """LlamaRotaryEmbedding (default rope type) in fp32."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, HS, 2, dtype=torch.int64).float() / HS))
    freqs = torch.arange(T).float()[:, None] @ inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def llama_hidden(p, idx, cfg):
    """The final norm's output (B, T, C) of LlamaModel on trident's parameter names."""
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
    return rms_norm(x, p["lnf.weight"], eps)


def llama_forward(p, idx, cfg):
    """logits (B, T, V) of LlamaForCausalLM on trident's parameter names."""
    return llama_hidden(p, idx, cfg) @ p["wte" if cfg["tied"] else "lm_head"].T


def reward_scores(p, idx, mask, cfg):
    """Scores (B,) of LlamaForSequenceClassification (one label) at each sequence's last token,
    and whether each sequence has one (a trained target; trident's score is 0 where not)."""
    T = idx.shape[1]
    h = llama_hidden(p, idx, cfg)
    t = torch.arange(T).expand_as(mask)
    last = torch.where(mask, t, torch.full_like(t, -1)).max(dim=1).values
    scored = last >= 0
    pos = (last + 1).clamp(max=T - 1).clamp(min=0)
    rows = h[torch.arange(idx.shape[0]), pos]
    return torch.where(scored, (rows @ p["score.weight"].T)[:, 0], 0.0), scored


def reward_loss(p, tokens, masks, cfg):
    """Mean over the scored pairs of -log sigmoid(r_chosen - r_rejected)."""
    T = cfg["seq_len"]
    r, scored = reward_scores(p, tokens[:, :T], masks, cfg)
    d = r[0::2] - r[1::2]
    keep = scored[0::2] & scored[1::2]
    return -F.logsigmoid(d[keep]).sum() / max(int(keep.sum()), 1)


def decays(name):
    """AdamW weight decay on matrices (embeddings and projections), not on norms and biases."""
    return name in ("wte", "lm_head", "score.weight") or (name.endswith(".weight") and not name.split(".")[-2].startswith("ln"))


def main():
    cfg, a = load(sys.argv[1])
    assert cfg["arch"] == "llama", "check_llama_vs_torch.py checks a llama dump"
    reward = cfg.get("reward", False)
    expected = {"wte", "lnf.weight"} | ({"score.weight"} if reward else {"lm_head"} if not cfg["tied"] else set())
    for l in range(cfg["n_layer"]):
        b = f"blocks.{l}."
        expected |= {b + s for s in ("ln1.weight", "attn.q.weight", "attn.k.weight", "attn.v.weight",
                                     "attn.proj.weight", "ln2.weight", "mlp.gate.weight", "mlp.up.weight",
                                     "mlp.down.weight")}
        if cfg["qkv_bias"]:
            expected |= {b + "attn.q.bias", b + "attn.k.bias", b + "attn.v.bias"}
    names = {k[len("param."):] for k in a if k.startswith("param.")}
    failures = [] if names == expected else [f"parameter names: missing {expected - names}, extra {names - expected}"]
    print(f"  parameter names {'ok' if not failures else failures[0]}")
    if not reward:
        check_training(cfg, a, llama_forward, decays, failures)
        finish(failures)
        return
    tokens = torch.tensor(a["tokens"], dtype=torch.long)
    masks = torch.tensor(a["target_mask"]) > 0
    B, G = cfg["micro_batch_size"], cfg["global_batch_size"]

    def loss_of(p, step):
        return reward_loss(p, tokens[step * G:(step + 1) * G], masks[step * G:(step + 1) * G], cfg)

    def init_output(p):
        return "scores0", reward_scores(p, tokens[:B, :cfg["seq_len"]], masks[:B], cfg)[0]

    check_training(cfg, a, llama_forward, decays, failures, loss_of, init_output)
    finish(failures)


if __name__ == "__main__":
    main()
