#!/usr/bin/env python3
"""PyTorch baselines for trident's performance notes: GPT-2 (124M by default) or Llama training
steps on random tokens with torch.compile, SDPA (flash) attention, bf16 and fused AdamW, on one GPU,
several with DDP, or several with FSDP2 (launch with torchrun). Prints tokens/s like `trident bench`.

    python3 tools/perf/bench_pytorch.py --batch 32 --seq 1024 --steps 20
    torchrun --nproc_per_node 2 tools/perf/bench_pytorch.py --batch 32 --seq 1024 --steps 20
    python3 tools/perf/bench_pytorch.py --preset llama3.2-1b --batch 4 --steps 20
    torchrun --nproc_per_node 4 tools/perf/bench_pytorch.py --preset llama3-8b --fsdp --batch 1

GPT-2 and Llama without --fsdp keep fp32 parameters (the master weights) under bf16 autocast. The
Llama model follows Hugging Face LlamaForCausalLM: RMSNorm computed in fp32, rotate_half RoPE with
rope_theta (the presets leave out Llama 3.2's "llama3" frequency scaling, which changes the table's
values, not the cost), grouped-query attention through SDPA's enable_gqa (the KV heads are never
repeated in memory), SwiGLU down(silu(gate(x)) * up(x)), no biases unless --qkv-bias. --fsdp shards
each block and then the root with fully_shard, bf16 parameters and fp32 gradient reduction
(MixedPrecisionPolicy) over fp32 sharded master weights, and compiles each block as torchtitan does.

With --attention it times causal SDPA forward+backward instead, on the shapes and with the FLOP
count of `trident bench --bench.kernels` (q, k, v as views of one (B, T, 3, NH, HS) tensor, as in
the model), once per SDPA backend that accepts them.
"""
import argparse
import contextlib
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

TORCH_VERSION = tuple(int(p) for p in torch.__version__.split(".")[:2])
HAVE_SDPA = hasattr(F, "scaled_dot_product_attention")

# Published shapes (Hugging Face config.json of meta-llama/Llama-3.2-1B and Meta-Llama-3-8B), with
# the sequence length and micro-batch of trident's Llama benchmarks.
PRESETS = {
    "llama3.2-1b": dict(layers=16, channels=2048, heads=32, n_kv_head=8, ffn=8192, vocab=128256,
                        rope_theta=500000.0, norm_eps=1e-5, tie_embeddings=True, seq=2048, batch=4),
    "llama3-8b": dict(layers=32, channels=4096, heads=32, n_kv_head=8, ffn=14336, vocab=128256,
                      rope_theta=500000.0, norm_eps=1e-5, tie_embeddings=False, seq=4096, batch=1),
}
GPT2_DEFAULTS = dict(layers=12, channels=768, heads=12, vocab=50304, seq=1024, batch=32)
LLAMA_ONLY = ("n_kv_head", "ffn", "rope_theta", "norm_eps", "qkv_bias", "tie_embeddings")


def causal_attention(q, k, v):
    """Causal attention of (B, NH, T, HS) queries over (B, NKV, T, HS) keys and values; query head h
    reads KV head h // (NH / NKV), the grouping of Hugging Face's repeat_kv. PyTorch before 2.0 has
    no SDPA: there (the CPU checks) the scores are formed explicitly."""
    if HAVE_SDPA:
        if k.shape[1] == q.shape[1]:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    t = q.shape[2]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~torch.ones(t, t, dtype=torch.bool, device=q.device).tril(), float("-inf"))
    return torch.softmax(scores.float(), dim=-1).to(v.dtype) @ v


class Block(nn.Module):
    def __init__(self, c, nh):
        super().__init__()
        self.nh = nh
        self.ln1 = nn.LayerNorm(c)
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.ln2 = nn.LayerNorm(c)
        self.fc = nn.Linear(c, 4 * c)
        self.fc2 = nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.nh, c // self.nh).transpose(1, 2) for z in (q, k, v))
        y = causal_attention(q, k, v)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, layers, heads, channels, vocab, positions):
        super().__init__()
        self.wte = nn.Embedding(vocab, channels)
        self.wpe = nn.Embedding(positions, channels)
        self.blocks = nn.ModuleList(Block(channels, heads) for _ in range(layers))
        self.lnf = nn.LayerNorm(channels)
        self.head = nn.Linear(channels, vocab, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.lnf(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


class RMSNorm(nn.Module):
    """LlamaRMSNorm: statistics and scaling in fp32, cast back to the input's dtype, then the weight."""

    def __init__(self, c, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(c))

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope_table(t, hs, theta, device):
    """LlamaRotaryEmbedding's (T, HS) cos and sin in fp32: frequency i of the first half repeated in
    the second, so rotate_half pairs element i with element i + HS/2."""
    inv_freq = 1.0 / theta ** (torch.arange(0, hs, 2, device=device).float() / hs)
    freqs = torch.outer(torch.arange(t, device=device).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def apply_rope(x, cos, sin):  # x (B, NH, T, HS); cos, sin (T, HS), cast to x's dtype as HF does
    return x * cos.to(x.dtype) + rotate_half(x) * sin.to(x.dtype)


class LlamaBlock(nn.Module):
    def __init__(self, a):
        super().__init__()
        c, self.nh, self.nkv = a.channels, a.heads, a.n_kv_head
        self.hs = c // a.heads
        self.attn_norm = RMSNorm(c, a.norm_eps)
        self.q = nn.Linear(c, self.nh * self.hs, bias=a.qkv_bias)
        self.k = nn.Linear(c, self.nkv * self.hs, bias=a.qkv_bias)
        self.v = nn.Linear(c, self.nkv * self.hs, bias=a.qkv_bias)
        self.o = nn.Linear(self.nh * self.hs, c, bias=False)
        self.mlp_norm = RMSNorm(c, a.norm_eps)
        self.gate = nn.Linear(c, a.ffn, bias=False)
        self.up = nn.Linear(c, a.ffn, bias=False)
        self.down = nn.Linear(a.ffn, c, bias=False)

    def forward(self, x, cos, sin):  # x (B, T, C)
        b, t, c = x.shape
        h = self.attn_norm(x)
        q = self.q(h).view(b, t, self.nh, self.hs).transpose(1, 2)   # (B, NH, T, HS)
        k = self.k(h).view(b, t, self.nkv, self.hs).transpose(1, 2)  # (B, NKV, T, HS)
        v = self.v(h).view(b, t, self.nkv, self.hs).transpose(1, 2)  # (B, NKV, T, HS)
        y = causal_attention(apply_rope(q, cos, sin), apply_rope(k, cos, sin), v)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, c))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class LlamaHead(nn.Module):
    """Final RMSNorm, LM head and cross-entropy: a module of its own so --fsdp can compile it apart
    from the blocks."""

    def __init__(self, a):
        super().__init__()
        self.norm = RMSNorm(a.channels, a.norm_eps)
        self.out = nn.Linear(a.channels, a.vocab, bias=False)

    def forward(self, x, targets):
        logits = self.out(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.view(-1))


class Llama(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.a = a
        self.embed = nn.Embedding(a.vocab, a.channels)
        self.blocks = nn.ModuleList(LlamaBlock(a) for _ in range(a.layers))
        self.head = LlamaHead(a)
        if a.tie_embeddings:
            self.head.out.weight = self.embed.weight
        self.register_buffer("cos", torch.empty(a.seq, a.channels // a.heads), persistent=False)
        self.register_buffer("sin", torch.empty(a.seq, a.channels // a.heads), persistent=False)

    def init_weights(self):
        """N(0, 0.02) matrices, zero biases, unit norm weights, the RoPE table: also after a model
        built on the meta device is given storage (to_empty)."""
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
            if isinstance(m, RMSNorm):
                nn.init.ones_(m.weight)
        cos, sin = rope_table(self.a.seq, self.a.channels // self.a.heads, self.a.rope_theta, self.cos.device)
        self.cos.copy_(cos)
        self.sin.copy_(sin)

    def forward(self, idx, targets):
        x = self.embed(idx)
        cos, sin = self.cos[: idx.shape[1]], self.sin[: idx.shape[1]]
        for blk in self.blocks:
            x = blk(x, cos, sin)
        return self.head(x, targets)


def llama_matmul_params(a):
    """N of the MFU formula: every parameter but the embedding table, with the LM head's matrix
    (a matmul even when it is the tied embedding)."""
    hs = a.channels // a.heads
    attn = a.channels * (a.heads + 2 * a.n_kv_head) * hs + a.heads * hs * a.channels
    if a.qkv_bias:
        attn += (a.heads + 2 * a.n_kv_head) * hs
    block = attn + 3 * a.channels * a.ffn + 2 * a.channels
    return a.layers * block + a.channels + a.vocab * a.channels


def graph_time(fn, reps):
    """Seconds per call of fn replayed from a CUDA graph (no Python or launch overhead between
    kernels, like a trained model's steady state); eager timing if capture fails."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        run, how = graph.replay, "graph"
    except RuntimeError:
        run, how = fn, "eager"
    run()
    torch.cuda.synchronize()
    start.record()
    for _ in range(reps):
        run()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / reps, how


def attention_bench(reps):
    """Causal attention fwd+bwd TFLOP/s: forward 2 GEMMs, backward 5, half the T x T scores."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backends = [("default", None), ("flash", SDPBackend.FLASH_ATTENTION),
                ("cudnn", SDPBackend.CUDNN_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION)]
    print(f"{'kernel':<40} {'ms':>10} {'TFLOP/s':>10}   ({torch.cuda.get_device_name()}, torch {torch.__version__})")
    for hs in (64, 128):
        for t in (1024, 4096):
            b, nh = 8, (12 if hs == 64 else 16)
            qkv = torch.randn(b, t, 3, nh, hs, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            dout = torch.randn(b, nh, t, hs, device="cuda", dtype=torch.bfloat16)
            flops = 3.5 * 4.0 * b * nh * t * t * hs * 0.5

            def step():
                q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                y.backward(dout)

            for name, backend in backends:
                label = f"sdpa[{name}] fwd+bwd HS={hs} T={t} B={b}"
                try:
                    with sdpa_kernel(backend) if backend is not None else contextlib.nullcontext():
                        s, how = graph_time(step, reps)
                    print(f"{label:<40} {s * 1e3:>10.3f} {flops / s / 1e12:>10.1f}   ({how})")
                except RuntimeError as e:
                    print(f"{label:<40} {'n/a':>10} {'':>10}   ({str(e).splitlines()[0][:60]})")
                qkv.grad = None


def usage_error(message):
    print(f"bench_pytorch.py: {message}", file=sys.stderr)
    sys.exit(2)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", choices=("gpt2", "llama"), help="model (default gpt2; llama with --preset)")
    ap.add_argument("--preset", choices=sorted(PRESETS), help="a Llama shape; the options below override it")
    ap.add_argument("--layers", "--n-layer", dest="layers", type=int)
    ap.add_argument("--heads", "--n-head", dest="heads", type=int)
    ap.add_argument("--channels", "--n-embd", dest="channels", type=int)
    ap.add_argument("--vocab", type=int)
    ap.add_argument("--seq", "--seq-len", dest="seq", type=int)
    ap.add_argument("--n-kv-head", type=int, help="llama: key/value heads (grouped-query attention)")
    ap.add_argument("--ffn", type=int, help="llama: SwiGLU hidden size")
    ap.add_argument("--rope-theta", type=float, help="llama: RoPE base")
    ap.add_argument("--norm-eps", type=float, help="llama: RMSNorm epsilon")
    ap.add_argument("--qkv-bias", action=argparse.BooleanOptionalAction, help="llama: biases on q, k, v (Qwen2)")
    ap.add_argument("--tie-embeddings", action=argparse.BooleanOptionalAction, help="llama: LM head = embedding")
    ap.add_argument("--batch", type=int, help="micro-batch per GPU (default 32; a preset's own)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True, help="torch.compile")
    ap.add_argument("--fsdp", action="store_true", help="llama: FSDP2 over the torchrun ranks")
    ap.add_argument("--ac", choices=("none", "full"), default="none", help="llama: activation checkpointing per block")
    ap.add_argument("--peak-tflops", type=float, default=989.0,
                    help="llama: the MFU's peak (default: H100/H200 SXM bf16 dense)")
    ap.add_argument("--attention", action="store_true", help="time SDPA fwd+bwd kernels instead")
    a = ap.parse_args(argv)
    if a.preset and a.arch == "gpt2":
        usage_error(f"--preset {a.preset} is a Llama shape; drop --arch gpt2")
    a.arch = a.arch or ("llama" if a.preset else "gpt2")
    if a.arch == "gpt2":
        given = [f"--{k.replace('_', '-')}" for k in LLAMA_ONLY if getattr(a, k) is not None]
        given += ["--fsdp"] if a.fsdp else []
        given += ["--ac"] if a.ac != "none" else []
        if given:
            usage_error(f"{given[0]} applies to --arch llama only")
    base = dict(GPT2_DEFAULTS) if a.arch == "gpt2" else dict(PRESETS[a.preset or "llama3.2-1b"], qkv_bias=False)
    for k, v in base.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    for k in ("layers", "heads", "channels", "vocab", "seq", "batch", "steps") + (("n_kv_head", "ffn") if a.arch == "llama" else ()):
        if getattr(a, k) < 1:
            usage_error(f"--{k.replace('_', '-')} must be at least 1, not {getattr(a, k)}")
    if a.channels % a.heads:
        usage_error(f"--n-head {a.heads} must divide --n-embd {a.channels}")
    if a.arch == "llama":
        if a.heads % a.n_kv_head:
            usage_error(f"--n-kv-head {a.n_kv_head} must divide --n-head {a.heads}")
        if (a.channels // a.heads) % 2:
            usage_error(f"the head size --n-embd / --n-head = {a.channels // a.heads} must be even for RoPE")
        if HAVE_SDPA and a.n_kv_head < a.heads and TORCH_VERSION < (2, 5):
            usage_error(f"--n-kv-head {a.n_kv_head} < --n-head needs SDPA's enable_gqa (torch >= 2.5, this is {torch.__version__})")
    if a.fsdp and TORCH_VERSION < (2, 6):
        usage_error(f"--fsdp needs torch >= 2.6 (torch.distributed.fsdp.fully_shard); this is {torch.__version__}")
    if a.compile and not hasattr(torch, "compile"):
        usage_error(f"torch {torch.__version__} has no torch.compile; pass --no-compile")
    if a.device == "cuda" and not HAVE_SDPA:
        usage_error(f"torch {torch.__version__} has no scaled_dot_product_attention; the GPU baseline needs torch >= 2.0")
    return a


def shard_llama(model, a, mesh):
    """torchtitan's order: activation checkpointing, then torch.compile, per block; fully_shard each
    block, then the root (embedding and head). The last block stays gathered after its forward
    since its backward comes next."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    wrap_blocks(model, a)
    for i, blk in enumerate(model.blocks):
        fully_shard(blk, mesh=mesh, mp_policy=mp, reshard_after_forward=i < len(model.blocks) - 1)
    fully_shard(model, mesh=mesh, mp_policy=mp)


def wrap_blocks(model, a):
    """--ac full recomputes each block in its backward; with --fsdp each block (and the head) is
    compiled on its own."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    for i, blk in enumerate(model.blocks):
        if a.ac == "full":
            blk = checkpoint_wrapper(blk, preserve_rng_state=False)
        if a.fsdp and a.compile:
            blk = torch.compile(blk, fullgraph=True)
        model.blocks[i] = blk
    if a.fsdp and a.compile:
        model.head = torch.compile(model.head, fullgraph=True)


def build(a, device, mesh):
    """The model on the device, and whether its steps run under bf16 autocast (FSDP2 casts the
    parameters to bf16 itself)."""
    if a.arch == "gpt2":
        model = GPT(a.layers, a.heads, a.channels, a.vocab, a.seq).to(device)
        return model, True
    if a.fsdp:
        with torch.device("meta"):
            model = Llama(a)
        shard_llama(model, a, mesh)
        model.to_empty(device=device)
        model.init_weights()
        return model, False
    model = Llama(a)
    wrap_blocks(model, a)
    model.to(device)
    model.init_weights()
    return model, True


def report_llama(a, world, med, peak_gib):
    n = llama_matmul_params(a)
    per_token = 6 * n + 12 * a.layers * a.channels * a.seq
    tok = a.batch * a.seq * world / med
    mfu = tok / world * per_token / (a.peak_tflops * 1e12)
    mode = ("FSDP2 bf16 params fp32 reduce" if a.fsdp else "bf16 autocast fp32 params") + \
           (", compiled" if a.compile else ", eager") + (", AC full" if a.ac == "full" else "")
    device = torch.cuda.get_device_name() if a.device == "cuda" else "cpu"
    attention = "sdpa" if HAVE_SDPA else "explicit scores (no SDPA in this torch)"
    print(f"llama  N = {n:,} parameters in matmuls (all but the embedding; the LM head counted"
          f"{' though tied' if a.tie_embeddings else ''})")
    print(f"llama  FLOP/token = 6N + 12*L*C*T = 6*{n:,} + 12*{a.layers}*{a.channels}*{a.seq} = {per_token:.4e}"
          f" (PaLM appendix B, nanoGPT estimate_mfu)")
    print(f"llama  MFU = tokens/s per GPU * FLOP/token / {a.peak_tflops:g} TFLOP/s (H100/H200 SXM bf16 dense)")
    print(f"llama  {mode}, attention {attention}; peak = torch.cuda.max_memory_allocated of the largest rank")
    print(f"pytorch {torch.__version__} Llama L{a.layers} C{a.channels} NH{a.heads} KV{a.n_kv_head} FFN{a.ffn} "
          f"V{a.vocab} T{a.seq} B{a.batch}/GPU {'tied' if a.tie_embeddings else 'untied'} {world} GPU(s)"
          f"{' FSDP2' if a.fsdp else ''}: {tok:,.0f} tokens/s, {med * 1e3:.1f} ms/step (median of {a.steps}), "
          f"MFU {100 * mfu:.1f}%, peak {peak_gib}, {device}")


def main():
    a = parse_args()
    if a.attention:
        attention_bench(20)
        return

    if a.fsdp and "WORLD_SIZE" not in os.environ:
        usage_error("--fsdp runs under torchrun (WORLD_SIZE is not set), e.g. torchrun --nproc_per_node 2 ...")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    cuda = a.device == "cuda"
    if cuda:
        torch.cuda.set_device(rank % torch.cuda.device_count())
        torch.backends.cuda.matmul.allow_tf32 = True
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    mesh = None
    if world > 1 or a.fsdp:
        torch.distributed.init_process_group("nccl" if cuda else "gloo")
        if a.fsdp:
            from torch.distributed.device_mesh import init_device_mesh
            mesh = init_device_mesh(device.type, (world,))
    torch.manual_seed(0)
    model, autocast = build(a, device, mesh)
    fused = {"fused": True} if cuda else {}  # AdamW of torch < 2.0 (the CPU checks) has no fused option
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1, **fused)
    if world > 1 and not a.fsdp:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if cuda else None)
    step_fn = torch.compile(model) if a.compile and not a.fsdp else model
    x = torch.randint(0, a.vocab, (a.batch, a.seq), device=device)
    y = torch.randint(0, a.vocab, (a.batch, a.seq), device=device)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    times = []
    for i in range(a.warmup + a.steps):
        sync()
        t0 = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16) if autocast else contextlib.nullcontext():
            loss = step_fn(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
    times.sort()
    med = times[len(times) // 2]
    peak_gib = "n/a on CPU"
    if cuda:
        peak = torch.tensor(float(torch.cuda.max_memory_allocated()), device=device)
        if torch.distributed.is_initialized():
            torch.distributed.all_reduce(peak, op=torch.distributed.ReduceOp.MAX)
        peak_gib = f"{peak.item() / 2**30:.1f} GiB"
    if rank == 0:
        if a.arch == "llama":
            report_llama(a, world, med, peak_gib)
        else:
            tok = a.batch * a.seq * world / med
            print(f"pytorch {torch.__version__} GPT L{a.layers} C{a.channels} B{a.batch}/GPU T{a.seq} "
                  f"{world} GPU(s): {tok:,.0f} tokens/s, {med * 1e3:.1f} ms/step (median of {a.steps}), "
                  f"{torch.cuda.get_device_name() if cuda else 'cpu'}")
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
