#!/usr/bin/python3
"""tools/perf/bench_pytorch.py's Llama against independent formulations, in float64 on CPU: one block
with n_kv_head == n_head and RoPE off against causal attention written out position by position;
grouped-query attention against the same block with each KV head copied for its group; RoPE against
rotation by complex numbers; the MFU's parameter count against the module's; logits against
transformers' LlamaForCausalLM where transformers is installed. Then the command line: a tiny Llama
trains two steps on CPU, bad shapes exit 2 with one line.
    check_bench_llama.py REPO_ROOT"""
import math
import os
import subprocess
import sys

import torch

root = sys.argv[1]
bench_path = os.path.join(root, "tools", "perf", "bench_pytorch.py")
sys.path.insert(0, os.path.dirname(bench_path))
import bench_pytorch as bp  # noqa: E402

torch.manual_seed(0)
results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(f"{'ok  ' if ok else 'FAIL'} {name} {detail}")


def tiny(*extra):
    return bp.parse_args(["--arch", "llama", "--device", "cpu", "--no-compile", "--layers", "2", "--n-embd", "32",
                          "--n-head", "4", "--ffn", "48", "--vocab", "64", "--seq", "8", *extra])


def model_of(a):
    m = bp.Llama(a).double()
    m.init_weights()
    for p in m.parameters():  # away from the unit norm weights and zero biases init_weights gives
        p.data += 0.1 * torch.randn_like(p)
    return m


def rel(a, b):
    return ((a - b).norm() / b.norm()).item()


# One block, n_kv_head == n_head, RoPE off (cos 1, sin 0): causal attention by hand. RMSNorm computes
# in fp32 (as HF's does), hence 1e-6 rather than float64 rounding.
a = tiny("--n-kv-head", "4", "--qkv-bias")
blk = model_of(a).blocks[0]
x = torch.randn(2, a.seq, a.channels, dtype=torch.float64)
T, NH, HS = a.seq, a.heads, a.channels // a.heads
ones, zeros = torch.ones(T, HS, dtype=torch.float64), torch.zeros(T, HS, dtype=torch.float64)
got = blk(x, ones, zeros)


def rms(v, w):
    return v / torch.sqrt((v * v).mean(-1, keepdim=True) + a.norm_eps) * w


h = rms(x, blk.attn_norm.weight)
q, k, v = (h @ lin.weight.T + lin.bias for lin in (blk.q, blk.k, blk.v))
y = torch.zeros_like(q)
for t in range(T):
    for head in range(NH):
        s = slice(head * HS, (head + 1) * HS)
        scores = (k[:, : t + 1, s] @ q[:, t, s].unsqueeze(-1)).squeeze(-1) / math.sqrt(HS)  # (B, t+1)
        y[:, t, s] = (torch.softmax(scores, -1).unsqueeze(-1) * v[:, : t + 1, s]).sum(1)
ref = x + y @ blk.o.weight.T
h = rms(ref, blk.mlp_norm.weight)
ref = ref + (torch.nn.functional.silu(h @ blk.gate.weight.T) * (h @ blk.up.weight.T)) @ blk.down.weight.T
check("block with plain causal attention", rel(got, ref) < 1e-6, f"rel {rel(got, ref):.1e}")

# Grouped-query attention: query head h reads KV head h // (NH / NKV), as repeat_kv does.
a_gqa, a_mha = tiny("--n-kv-head", "2"), tiny("--n-kv-head", "4")
gqa = model_of(a_gqa)
mha = bp.Llama(a_mha).double()
mha.init_weights()
state = dict(gqa.state_dict())
for i in range(a_gqa.layers):
    for w in ("k", "v"):
        key = f"blocks.{i}.{w}.weight"
        state[key] = state[key].view(2, HS, -1).repeat_interleave(2, dim=0).reshape(NH * HS, -1)
mha.load_state_dict(state)
idx = torch.randint(0, a_gqa.vocab, (2, T))
check("GQA against repeated KV heads", torch.allclose(gqa(idx, idx), mha(idx, idx), rtol=1e-12, atol=0))

# RoPE: rotate_half pairs element i with i + HS/2 and turns the pair by position * theta^(-2i/HS).
cos, sin = bp.rope_table(T, HS, 10000.0, "cpu")
xr = torch.randn(T, HS, dtype=torch.float64)
angle = torch.arange(T, dtype=torch.float64)[:, None] * 10000.0 ** (-torch.arange(0, HS, 2, dtype=torch.float64) / HS)
turned = torch.complex(xr[:, : HS // 2], xr[:, HS // 2:]) * torch.exp(1j * angle)
got = bp.apply_rope(xr, cos.double(), sin.double())
ref = torch.cat((turned.real, turned.imag), dim=-1)
check("RoPE against complex rotation", rel(got, ref) < 1e-6, f"rel {rel(got, ref):.1e} (fp32 table)")

# The MFU's N: every parameter but the embedding, the LM head's matrix counted once even when tied.
for extra in (("--no-tie-embeddings", "--qkv-bias"), ("--tie-embeddings",)):
    a_n = tiny("--n-kv-head", "2", *extra)
    m = bp.Llama(a_n)
    total = sum(p.numel() for p in m.parameters())
    want = total - (0 if a_n.tie_embeddings else a_n.vocab * a_n.channels)
    check(f"N with {' '.join(extra)}", bp.llama_matmul_params(a_n) == want, f"{bp.llama_matmul_params(a_n)} vs {want}")

try:
    import transformers
except ImportError:
    print("skip LlamaForCausalLM (transformers not installed)")
else:
    a_hf = tiny("--n-kv-head", "2", "--no-tie-embeddings", "--rope-theta", "500000")
    ours = model_of(a_hf)
    cfg = transformers.LlamaConfig(vocab_size=a_hf.vocab, hidden_size=a_hf.channels, intermediate_size=a_hf.ffn,
                                   num_hidden_layers=a_hf.layers, num_attention_heads=NH,
                                   num_key_value_heads=a_hf.n_kv_head, rms_norm_eps=a_hf.norm_eps,
                                   rope_theta=a_hf.rope_theta, max_position_embeddings=T, tie_word_embeddings=False,
                                   attention_bias=False, attn_implementation="eager")
    hf = transformers.LlamaForCausalLM(cfg).double()
    names = {"embed": "model.embed_tokens", "head.norm": "model.norm", "head.out": "lm_head", "attn_norm":
             "input_layernorm", "mlp_norm": "post_attention_layernorm", "q": "self_attn.q_proj", "k": "self_attn.k_proj",
             "v": "self_attn.v_proj", "o": "self_attn.o_proj", "gate": "mlp.gate_proj", "up": "mlp.up_proj",
             "down": "mlp.down_proj"}
    mapped = {}
    for key, value in ours.state_dict().items():
        parts = key.rsplit(".", 1)[0].split(".")
        name = ".".join(["model.layers", parts[1], names[parts[2]]]) if parts[0] == "blocks" else names[".".join(parts)]
        mapped[name + ".weight"] = value
    hf.load_state_dict(mapped)
    xs = ours.embed(idx)
    for b in ours.blocks:
        xs = b(xs, ours.cos, ours.sin)
    logits = ours.head.out(ours.head.norm(xs))
    want = hf(idx).logits
    check(f"logits against transformers {transformers.__version__}", rel(logits, want) < 1e-6,
          f"rel {rel(logits, want):.1e} (fp32 RoPE table in both)")

# The command line.
shape = ["--arch", "llama", "--device", "cpu", "--no-compile", "--layers", "2", "--n-embd", "64", "--n-head", "4",
         "--n-kv-head", "2", "--ffn", "128", "--vocab", "256", "--seq", "32", "--batch", "2"]
run = subprocess.run([sys.executable, bench_path, *shape, "--steps", "2", "--warmup", "1"], capture_output=True, text=True)
last = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr
check("tiny Llama trains on CPU", run.returncode == 0 and "tokens/s" in last and "MFU" in last, last)
for bad, needle in ((["--n-kv-head", "3"], "--n-kv-head 3 must divide --n-head 4"),
                    (["--arch", "gpt2"], "--n-kv-head applies to --arch llama only"),
                    (["--preset", "llama3-8b", "--arch", "gpt2"], "drop --arch gpt2")):
    run = subprocess.run([sys.executable, bench_path, *shape, *bad], capture_output=True, text=True)
    check(f"bad {' '.join(bad)}", run.returncode == 2 and run.stderr.count("\n") == 1 and needle in run.stderr,
          run.stderr.strip())

print(f"{sum(results)} passed, {len(results) - sum(results)} failed")
sys.exit(0 if all(results) else 1)
