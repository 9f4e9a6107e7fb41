#!/usr/bin/env python3
"""PyTorch baseline for trident's performance notes: GPT-2 (124M by default) training steps on
random tokens with torch.compile, SDPA (flash) attention, bf16 autocast and fused AdamW, on one
GPU or several with DDP (launch with torchrun). Prints tokens/s like `trident bench`.

    python3 tools/perf/bench_pytorch.py --batch 32 --seq 1024 --steps 20
    torchrun --nproc_per_node 2 tools/perf/bench_pytorch.py --batch 32 --seq 1024 --steps 20

With --attention it times causal SDPA forward+backward instead, on the shapes and with the FLOP
count of `trident bench --bench.kernels` (q, k, v as views of one (B, T, 3, NH, HS) tensor, as in
the model), once per SDPA backend that accepts them.
"""
import argparse
import contextlib
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


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
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--channels", type=int, default=768)
    ap.add_argument("--vocab", type=int, default=50304)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--attention", action="store_true", help="time SDPA fwd+bwd kernels instead")
    args = ap.parse_args()
    if args.attention:
        attention_bench(20)
        return

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        torch.distributed.init_process_group("nccl")
    torch.cuda.set_device(rank % torch.cuda.device_count())
    torch.backends.cuda.matmul.allow_tf32 = True
    model = GPT(args.layers, args.heads, args.channels, args.vocab, args.seq).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[rank % torch.cuda.device_count()])
    step_fn = torch.compile(model)
    x = torch.randint(0, args.vocab, (args.batch, args.seq), device="cuda")
    y = torch.randint(0, args.vocab, (args.batch, args.seq), device="cuda")
    times = []
    for i in range(args.warmup + args.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_fn(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if i >= args.warmup:
            times.append(time.perf_counter() - t0)
    times.sort()
    med = times[len(times) // 2]
    if rank == 0:
        tok = args.batch * args.seq * world / med
        print(f"pytorch {torch.__version__} GPT L{args.layers} C{args.channels} B{args.batch}/GPU T{args.seq} "
              f"{world} GPU(s): {tok:,.0f} tokens/s, {med * 1e3:.1f} ms/step (median of {args.steps}), "
              f"{torch.cuda.get_device_name()}")
    if world > 1:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
