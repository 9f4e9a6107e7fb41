#!/usr/bin/python3
"""Checks trident's CPU Llama ops against an independent PyTorch Llama decoder block written here
with Hugging Face LlamaForCausalLM semantics (RMSNorm in fp32: x * rsqrt(mean(x^2) + eps) * w;
rotate_half RoPE with LlamaRotaryEmbedding's fp32 table; grouped-query attention by repeat_kv;
down(silu(gate(x)) * up(x))), computed in float64 on the weights and inputs dump_llama_ops wrote:
every intermediate output and every gradient within 1e-5 relative (L2); and the rotary table at
long positions against LlamaRotaryEmbedding's."""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_vs_torch import finish, load, rel  # noqa: E402

TOL = 1e-5  # fp32 (trident) against float64 (here): only rounding differs


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rope_cos_sin(T, HS, theta):
    """LlamaRotaryEmbedding (default rope type): the table in fp32, as the published models use it."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, HS, 2, dtype=torch.int64).float() / HS))
    freqs = torch.arange(T).float()[:, None] @ inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().double(), emb.sin().double()


def repeat_kv(x, n_rep):
    """(B, NKV, T, HS) -> (B, NKV * n_rep, T, HS), each key/value head repeated for its group."""
    B, nkv, T, HS = x.shape
    return x[:, :, None, :, :].expand(B, nkv, n_rep, T, HS).reshape(B, nkv * n_rep, T, HS)


def block(p, cfg, keep):
    B, T, C = cfg["B"], cfg["T"], cfg["C"]
    NH, NKV, HS, Fh = cfg["n_head"], cfg["n_kv_head"], cfg["head_size"], cfg["ffn_hidden_size"]
    eps = cfg["norm_eps"]
    x = p["x"]
    n1 = rms_norm(x, p["w1"], eps)
    # The fused qkv weight stacks q_proj, k_proj and v_proj.
    wq, wk, wv = p["wqkv"].split([NH * HS, NKV * HS, NKV * HS], dim=0)
    q_lin, k_lin, v_lin = n1 @ wq.T, n1 @ wk.T, n1 @ wv.T
    for t in (q_lin, k_lin, v_lin):
        t.retain_grad()
    keep["qkv_linear"] = (q_lin, k_lin, v_lin)
    q = q_lin.view(B, T, NH, HS).transpose(1, 2)
    k = k_lin.view(B, T, NKV, HS).transpose(1, 2)
    v = v_lin.view(B, T, NKV, HS).transpose(1, 2)
    cos, sin = rope_cos_sin(T, HS, cfg["rope_theta"])
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    keep["qkv_rotated"] = torch.cat([q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)], dim=2)
    kr, vr = repeat_kv(k, NH // NKV), repeat_kv(v, NH // NKV)
    scores = (q @ kr.transpose(2, 3)) / math.sqrt(HS)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    probs = scores.masked_fill(mask, float("-inf")).softmax(dim=-1)
    att = (probs @ vr).transpose(1, 2).contiguous()
    keep["attention"] = att
    h1 = x + att.reshape(B, T, NH * HS) @ p["wo"].T
    keep["h1"] = h1
    n2 = rms_norm(h1, p["w2"], eps)
    keep["n1"], keep["n2"] = n1, n2
    # The fused gate/up weight stacks gate_proj over up_proj: rows are [gate | up].
    w_gate, w_up = p["wgu"].split([Fh, Fh], dim=0)
    gate, up = n2 @ w_gate.T, n2 @ w_up.T
    gate.retain_grad()
    up.retain_grad()
    keep["gate_up"] = (gate, up)
    sw = F.silu(gate) * up
    keep["swiglu"] = sw
    return h1 + sw @ p["wd"].T


def main():
    blocks, a = load(sys.argv[1])  # config: one entry per block shape, and the rotary table's
    table_cfg = blocks.pop("rope_table")
    failures = []

    def check(what, mine, ref):
        err = rel(mine, ref.detach())
        status = "ok" if err <= TOL else "FAIL"
        print(f"  {what:<28} {err:.3e}  (tol {TOL:.0e})  {status}")
        if err > TOL:
            failures.append(what)

    for name, cfg in blocks.items():
        print(f"block {name}: {cfg}")
        g = lambda k: torch.tensor(a[f"{name}.{k}"], dtype=torch.float64)  # noqa: E731
        p = {k: g(k).requires_grad_(k != "r") for k in ("x", "r", "w1", "wqkv", "wo", "w2", "wgu", "wd")}
        keep = {}
        out = block(p, cfg, keep)
        (out * p["r"]).sum().backward()
        check("out", a[f"{name}.out.out"], out)
        for k in ("n1", "qkv_rotated", "attention", "h1", "n2", "swiglu"):
            check(k, a[f"{name}.out.{k}"], keep[k])
        q_lin, k_lin, v_lin = keep["qkv_linear"]
        B, T = cfg["B"], cfg["T"]
        dqkv = torch.cat([t.grad.view(B, T, -1, cfg["head_size"]) for t in (q_lin, k_lin, v_lin)], dim=2)
        check("grad qkv (before rope)", a[f"{name}.grad.qkv"], dqkv)
        check("grad gate_up", a[f"{name}.grad.gate_up"], torch.cat([t.grad for t in keep["gate_up"]], dim=-1))
        for k in ("x", "w1", "wqkv", "wo", "w2", "wgu", "wd"):
            check(f"grad {k}", a[f"{name}.grad.{k}"], p[k].grad)
    # The table at long positions against LlamaRotaryEmbedding's fp32 cos and sin. The angles must
    # be the same fp32 products t * inv_freq (angles in double would differ by up to half an ulp
    # of t, 2.4e-4 here); then only the last bit of cos and sin may differ. (fp32 pow is not
    # correctly rounded on either side: for other head sizes and thetas a few inv_freq differ
    # from PyTorch's by one ulp, which would move an angle near t by up to t * 2^-24.)
    T, HS = table_cfg["T"], table_cfg["head_size"]
    cos, sin = rope_cos_sin(T, HS, table_cfg["rope_theta"])
    ref = torch.cat([cos[:, : HS // 2], sin[:, : HS // 2]], dim=-1)
    err = float((torch.tensor(a["rope_table"], dtype=torch.float64) - ref).abs().max())
    tol = 2e-7
    print(f"  rope table T={T} HS={HS}: max abs diff {err:.3e}  (tol {tol:.1e})  {'ok' if err <= tol else 'FAIL'}")
    if err > tol:
        failures.append("rope table")
    finish(failures)


if __name__ == "__main__":
    main()
