#!/usr/bin/python3
"""Writes a Hugging Face LlamaForCausalLM directory with random bf16 weights (config.json,
safetensors shards of at most 5 GB and their index), the input of the conversion-speed
measurement in docs/PERFORMANCE.md. numpy only; the values are uniform noise.
    hf_random_model.py OUT_DIR [--layers L] (the Llama-3-8B shape, L layers, default 32)"""
import argparse
import json
import os
import struct

import numpy as np


def tensors(L, C=4096, NH=32, NKV=8, F=14336, V=128256):
    HS = C // NH
    yield "model.embed_tokens.weight", (V, C)
    for l in range(L):
        p = f"model.layers.{l}."
        yield p + "input_layernorm.weight", (C,)
        yield p + "self_attn.q_proj.weight", (NH * HS, C)
        yield p + "self_attn.k_proj.weight", (NKV * HS, C)
        yield p + "self_attn.v_proj.weight", (NKV * HS, C)
        yield p + "self_attn.o_proj.weight", (C, NH * HS)
        yield p + "post_attention_layernorm.weight", (C,)
        yield p + "mlp.gate_proj.weight", (F, C)
        yield p + "mlp.up_proj.weight", (F, C)
        yield p + "mlp.down_proj.weight", (C, F)
    yield "model.norm.weight", (C,)
    yield "lm_head.weight", (V, C)


def write_shard(path, names_shapes, rng):
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in names_shapes:
        n = 2 * int(np.prod(shape))
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for _, shape in names_shapes:   # bf16: the top half of fp32 noise in [-0.02, 0.02)
            x = (rng.random(shape, dtype=np.float32) * 0.04 - 0.02).view(np.uint32) >> 16
            x.astype(np.uint16).tofile(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=32)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    shards, cur, size, limit = [], [], 0, 5 * 10**9
    for name, shape in tensors(a.layers):
        n = 2 * int(np.prod(shape))
        if cur and size + n > limit:
            shards.append(cur)
            cur, size = [], 0
        cur.append((name, shape))
        size += n
    shards.append(cur)
    rng = np.random.default_rng(0)
    weight_map, total = {}, 0
    for i, shard in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        write_shard(os.path.join(a.out, fname), shard, rng)
        for name, shape in shard:
            weight_map[name] = fname
            total += 2 * int(np.prod(shape))
    json.dump({"metadata": {"total_size": total}, "weight_map": weight_map},
              open(os.path.join(a.out, "model.safetensors.index.json"), "w"), indent=1)
    json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
               "num_hidden_layers": a.layers, "num_attention_heads": 32, "num_key_value_heads": 8,
               "intermediate_size": 14336, "vocab_size": 128256, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
               "max_position_embeddings": 8192, "tie_word_embeddings": False, "hidden_act": "silu",
               "torch_dtype": "bfloat16"}, open(os.path.join(a.out, "config.json"), "w"), indent=1)
    print(f"{a.out}: {len(shards)} shards, {total / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
