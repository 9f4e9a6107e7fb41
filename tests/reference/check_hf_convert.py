#!/usr/bin/python3
"""trident convert against an independent PyTorch implementation, for GPT2LMHeadModel,
LlamaForCausalLM (grouped-query attention, untied head) and Qwen2ForCausalLM (q/k/v biases, tied
head). Import: random Hugging Face-named weights written here (own safetensors writer) are
converted in, and trident's CPU logits must match the PyTorch models of check_vs_torch.py /
check_llama_vs_torch.py fed through a name map written here (GPT-2's Conv1D transposed) within
1e-5. Export: a run started from those weights (train --init.from) trains two steps; its
checkpoint is exported (f32 and bf16), read here (own reader), and the PyTorch logits on the
exported tensors must match trident's on the checkpoint.
Reward models, as GPT2/Llama/Qwen2ForSequenceClassification with one label: random weights with
score.weight in place of the LM head are converted in and exported again; on rows of two lengths,
right-padded with the config's pad_token_id, the score transformers would give (score.weight on
the final norm's output at each row's rightmost token that is not pad_token_id), computed here on
the imported and on the exported tensors, must match trident's scores (read at the token after each
row's last trained target) within 1e-5 (f32; bf16 3e-2).
    check_hf_convert.py TRIDENT HF_LOGITS REPO_ROOT
Its pieces (the variants, the name maps, trident_logits) also serve tests/cuda/check_transformers.py."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_llama_vs_torch import llama_forward  # noqa: E402
from check_safetensors import bf16_to_f32, read_st, write_st  # noqa: E402
from check_llama_vs_torch import llama_hidden  # noqa: E402
from check_vs_torch import gpt2_forward, gpt2_hidden, rel  # noqa: E402

B, T = 2, 16
TOL = 1e-5


def write_safetensors(path, tensors):
    """tensors: {name: float32 array}, written as F32 in insertion order (check_safetensors' writer)."""
    write_st(path, [(name, "F32", a.shape, np.ascontiguousarray(a, dtype=np.float32).tobytes())
                    for name, a in tensors.items()], metadata={"format": "pt"}, pad=False)


def read_safetensors(path):
    """{name: float32 tensor} of an F32 or BF16 file (check_safetensors' reader, layout checked)."""
    _, metadata, entries = read_st(path)
    assert metadata == {"format": "pt"}, f"{path}: __metadata__ must be format pt"
    out = {}
    for name, (dtype, shape, raw) in entries.items():
        if dtype == "F32":
            a = np.frombuffer(raw, np.float32)
        else:
            assert dtype == "BF16", dtype
            a = bf16_to_f32(np.frombuffer(raw, np.uint16))
        out[name] = torch.tensor(a.reshape(shape))
    return out


def run(*args):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    assert r.returncode == 0, f"{args}: rc {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


VARIANTS = {
    "gpt2": {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4,
             "vocab_size": 300, "n_positions": 32, "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new"},
    "llama": {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96, "vocab_size": 300,
              "max_position_embeddings": 32, "rms_norm_eps": 1e-5, "rope_theta": 500.0, "tie_word_embeddings": False,
              "rope_scaling": None, "hidden_act": "silu"},
    "qwen2": {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96, "vocab_size": 300,
              "max_position_embeddings": 32, "rms_norm_eps": 1e-6, "rope_theta": 500.0, "tie_word_embeddings": True,
              "use_sliding_window": False, "hidden_act": "silu"},
}


def hf_weights(kind, cfg, gen):
    """Random weights under Hugging Face's names and shapes (GPT-2: Conv1D (in, out))."""
    def w(*shape, scale=0.08):
        return (torch.randn(*shape, generator=gen) * scale).numpy()

    def norm(n):
        return (1 + torch.randn(n, generator=gen) * 0.1).numpy()

    sd = {}
    if kind == "gpt2":
        C, V, P = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"]
        # Names without 'transformer.' and the causal-mask buffers, as some saved GPT-2 files have.
        sd["wte.weight"], sd["wpe.weight"] = w(V, C), w(P, C)
        for l in range(cfg["n_layer"]):
            h = f"h.{l}."
            sd[h + "ln_1.weight"], sd[h + "ln_1.bias"] = norm(C), w(C)
            sd[h + "attn.c_attn.weight"], sd[h + "attn.c_attn.bias"] = w(C, 3 * C), w(3 * C)
            sd[h + "attn.c_proj.weight"], sd[h + "attn.c_proj.bias"] = w(C, C), w(C)
            sd[h + "attn.bias"] = np.tril(np.ones((P, P), np.float32)).reshape(1, 1, P, P)
            sd[h + "ln_2.weight"], sd[h + "ln_2.bias"] = norm(C), w(C)
            sd[h + "mlp.c_fc.weight"], sd[h + "mlp.c_fc.bias"] = w(C, 4 * C), w(4 * C)
            sd[h + "mlp.c_proj.weight"], sd[h + "mlp.c_proj.bias"] = w(4 * C, C), w(C)
        sd["ln_f.weight"], sd["ln_f.bias"] = norm(C), w(C)
        return sd
    C, V, F = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
    NH, NKV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    HS = C // NH
    sd["model.embed_tokens.weight"] = w(V, C)
    for l in range(cfg["num_hidden_layers"]):
        b = f"model.layers.{l}."
        sd[b + "input_layernorm.weight"] = norm(C)
        for name, heads in (("q", NH), ("k", NKV), ("v", NKV)):
            sd[b + f"self_attn.{name}_proj.weight"] = w(heads * HS, C)
            if kind == "qwen2":
                sd[b + f"self_attn.{name}_proj.bias"] = w(heads * HS)
        sd[b + "self_attn.o_proj.weight"] = w(C, C)
        sd[b + "post_attention_layernorm.weight"] = norm(C)
        sd[b + "mlp.gate_proj.weight"], sd[b + "mlp.up_proj.weight"] = w(F, C), w(F, C)
        sd[b + "mlp.down_proj.weight"] = w(C, F)
    sd["model.norm.weight"] = norm(C)
    if not cfg["tie_word_embeddings"]:
        sd["lm_head.weight"] = w(V, C)
    return sd


def trident_model(kind, cfg, sd):
    """Hugging Face tensors under the trident names the PyTorch models of the reference checks
    take, and those models' settings."""
    sd = {k[len("transformer."):] if k.startswith("transformer.") else k: torch.as_tensor(v) for k, v in sd.items()}
    p = {}
    if kind == "gpt2":
        p["wte"], p["wpe"] = sd["wte.weight"], sd["wpe.weight"]
        for l in range(cfg["n_layer"]):
            h, b = f"h.{l}.", f"blocks.{l}."
            for hf, mine in (("ln_1", "ln1"), ("ln_2", "ln2")):
                p[b + mine + ".weight"], p[b + mine + ".bias"] = sd[h + hf + ".weight"], sd[h + hf + ".bias"]
            for hf, mine in (("attn.c_attn", "attn.qkv"), ("attn.c_proj", "attn.proj"), ("mlp.c_fc", "mlp.fc"),
                             ("mlp.c_proj", "mlp.proj")):
                p[b + mine + ".weight"] = sd[h + hf + ".weight"].T   # Conv1D holds (in, out)
                p[b + mine + ".bias"] = sd[h + hf + ".bias"]
        p["lnf.weight"], p["lnf.bias"] = sd["ln_f.weight"], sd["ln_f.bias"]
        mine = {"n_embd": cfg["n_embd"], "n_head": cfg["n_head"], "n_layer": cfg["n_layer"],
                "ln_eps": cfg["layer_norm_epsilon"]}
        return p, mine
    p["wte"], p["lnf.weight"] = sd["model.embed_tokens.weight"], sd["model.norm.weight"]
    if "lm_head.weight" in sd and not cfg["tie_word_embeddings"]:
        p["lm_head"] = sd["lm_head.weight"]
    for l in range(cfg["num_hidden_layers"]):
        h, b = f"model.layers.{l}.", f"blocks.{l}."
        p[b + "ln1.weight"], p[b + "ln2.weight"] = sd[h + "input_layernorm.weight"], sd[h + "post_attention_layernorm.weight"]
        for name in "qkv":
            p[b + f"attn.{name}.weight"] = sd[h + f"self_attn.{name}_proj.weight"]
            if kind == "qwen2":
                p[b + f"attn.{name}.bias"] = sd[h + f"self_attn.{name}_proj.bias"]
        p[b + "attn.proj.weight"] = sd[h + "self_attn.o_proj.weight"]
        for name in ("gate", "up", "down"):
            p[b + f"mlp.{name}.weight"] = sd[h + f"mlp.{name}_proj.weight"]
    mine = {"n_embd": cfg["hidden_size"], "n_head": cfg["num_attention_heads"], "n_kv_head": cfg["num_key_value_heads"],
            "n_layer": cfg["num_hidden_layers"], "ln_eps": cfg["rms_norm_eps"], "rope_theta": cfg["rope_theta"],
            "qkv_bias": kind == "qwen2", "tied": cfg["tie_word_embeddings"]}
    return p, mine


def hf_logits(kind, cfg, sd, tokens):
    """The PyTorch models of the reference checks on Hugging Face tensors, mapped here."""
    p, mine = trident_model(kind, cfg, sd)
    return (gpt2_forward if kind == "gpt2" else llama_forward)(p, tokens, mine)


REWARD_CLASSES = {"gpt2": "GPT2ForSequenceClassification", "llama": "LlamaForSequenceClassification",
                  "qwen2": "Qwen2ForSequenceClassification"}


def reward_config(kind, cfg):
    """The variant as a reward model: its *ForSequenceClassification with one label, padded with 0."""
    return {**cfg, "architectures": [REWARD_CLASSES[kind]], "id2label": {"0": "LABEL_0"},
            "label2id": {"LABEL_0": 0}, "pad_token_id": 0}


def hf_scores(kind, cfg, sd, tokens):
    """What transformers' *ForSequenceClassification computes (modeling_layers.py
    GenericForSequenceClassification, GPT2ForSequenceClassification): score.weight on the final
    norm's output, pooled at each row's rightmost token that is not pad_token_id; (B,)."""
    p, mine = trident_model(kind, cfg, sd)
    h = (gpt2_hidden if kind == "gpt2" else llama_hidden)(p, tokens, mine)
    logits = h @ torch.as_tensor(sd["score.weight"]).T
    non_pad = (tokens != cfg["pad_token_id"]).int()
    last = (torch.arange(tokens.shape[-1], dtype=torch.int32) * non_pad).argmax(-1)
    return logits[torch.arange(tokens.shape[0]), last, 0]


def reward_rows(V, pad, gen, tmp):
    """Token rows (B, T) of two lengths, T and T - 5, in [1, V) and right-padded with `pad`, and the
    targets trident's preference data gives them: the next token, -1 over a 3-token prompt and
    the padding. Written to tmp; returns (tokens, tokens file, targets file)."""
    lengths = [T, T - 5]
    tokens = torch.randint(1, V, (B, T), generator=gen)
    targets = torch.full((B, T), -1, dtype=torch.int64)
    for b, n in enumerate(lengths):
        tokens[b, n:] = pad
        targets[b, 3:n - 1] = tokens[b, 4:n]
    files = (os.path.join(tmp, "reward_tokens.bin"), os.path.join(tmp, "reward_targets.bin"))
    for t, f in zip((tokens, targets), files):
        t.numpy().astype(np.int32).tofile(f)
    return tokens, files[0], files[1]


def trident_scores(hf_logits_bin, ckpt, tokens_file, targets_file, tmp):
    """A reward checkpoint's CPU scores (B,) on those rows (tests' hf_logits with targets)."""
    out = os.path.join(tmp, "scores.bin")
    run(hf_logits_bin, ckpt, tokens_file, B, T, out, targets_file)
    return torch.tensor(np.fromfile(out, np.float32))


def trident_logits(hf_logits_bin, ckpt, tokens_file, tmp, V):
    """trident's CPU logits (B, T, V) of a checkpoint on the tokens in tokens_file (tests' hf_logits)."""
    out = os.path.join(tmp, "logits.bin")
    run(hf_logits_bin, ckpt, tokens_file, B, T, out)
    return torch.tensor(np.fromfile(out, np.float32).reshape(B, T, V))


def model_flags(kind, cfg):
    """The [model] section of a run on this model, as command-line flags."""
    if kind == "gpt2":
        return ["--model.n_layer", cfg["n_layer"], "--model.n_head", cfg["n_head"], "--model.n_embd", cfg["n_embd"],
                "--model.vocab_size", cfg["vocab_size"], "--model.n_positions", cfg["n_positions"]]
    return ["--model.arch", "llama", "--model.n_layer", cfg["num_hidden_layers"], "--model.n_head",
            cfg["num_attention_heads"], "--model.n_kv_head", cfg["num_key_value_heads"], "--model.n_embd",
            cfg["hidden_size"], "--model.ffn_hidden_size", cfg["intermediate_size"], "--model.vocab_size",
            cfg["vocab_size"], "--model.n_positions", cfg["max_position_embeddings"], "--model.norm_eps", cfg["rms_norm_eps"], "--model.rope_theta", cfg["rope_theta"],
            "--model.tie_embeddings", str(cfg["tie_word_embeddings"]).lower(), "--model.qkv_bias",
            "true" if kind == "qwen2" else "false"]


failures = []


def train_two_steps(trident, root, kind, cfg, ckpt, ck_dir):
    """A run started from ckpt (train --init.from) trains two small steps; returns its checkpoint."""
    run(trident, "train", "--backend", "cpu", "--init.from", ckpt, *model_flags(kind, cfg), "--model.seq_len", T,
        "--data.train", os.path.join(root, "data/fortunes_byte"), "--train.steps", 2, "--train.micro_batch_size", 2,
        "--train.global_batch_size", 2, "--train.warmup_steps", 1, "--train.lr", 1e-5, "--train.min_lr", 1e-5,
        "--checkpoint.dir", ck_dir)
    return os.path.join(ck_dir, "step_2.h5")


def exit_with_result():
    """Exit 1 naming the failed checks, else say all passed."""
    if failures:
        print(f"FAILED: {len(failures)} checks: {', '.join(failures[:8])}")
        sys.exit(1)
    print("all checks passed")


def check(what, err, tol):
    ok = err <= tol
    print(f"  {what:<58} {err:.3e}  (tol {tol:.0e})  {'ok' if ok else 'FAIL'}")
    if not ok:
        failures.append(what)


def exported_tensors(what, out, sd):
    """The tensors of the export in out, their names checked against those of sd (the weights
    written here: GPT-2's without 'transformer.', its mask buffers aside)."""
    tensors = read_safetensors(os.path.join(out, "model.safetensors"))
    names = {k[len("transformer."):] if k.startswith("transformer.") else k for k in tensors}
    expected = {k for k in sd if not k.endswith(".attn.bias")}
    check(f"{what}: tensor names (missing + extra)", len(names ^ expected), 0)
    return tensors


def check_reward(trident, hf_logits_bin, kind, cfg, gen, tmp):
    """The variant as a reward model: written here, converted in, exported (f32, bf16); its
    scores as transformers computes them against trident's."""
    rcfg = reward_config(kind, cfg)
    sd = hf_weights(kind, cfg, gen)
    sd.pop("lm_head.weight", None)
    C = cfg.get("n_embd", cfg.get("hidden_size"))
    sd["score.weight"] = (torch.randn(1, C, generator=gen) * 0.5).numpy()
    src = os.path.join(tmp, kind + "-rm-hf")
    os.makedirs(src)
    write_safetensors(os.path.join(src, "model.safetensors"), sd)
    json.dump(rcfg, open(os.path.join(src, "config.json"), "w"))
    ckpt = os.path.join(tmp, kind + "-rm.h5")
    run(trident, "convert", "--from-hf", src, "--out", ckpt)
    tokens, tokens_file, targets_file = reward_rows(cfg["vocab_size"], rcfg["pad_token_id"], gen, tmp)
    mine = trident_scores(hf_logits_bin, ckpt, tokens_file, targets_file, tmp)
    with torch.no_grad():
        check("reward import: trident scores vs PyTorch at the last non-pad token",
              rel(mine, hf_scores(kind, rcfg, sd, tokens)), TOL)
    for dtype, tol in (("f32", TOL), ("bf16", 3e-2)):
        out = os.path.join(tmp, f"{kind}-rm-out-{dtype}")
        run(trident, "convert", "--to-hf", ckpt, "--out", out, "--dtype", dtype)
        exported = json.load(open(os.path.join(out, "config.json")))
        wrong = [k for k, v in {**rcfg, "num_labels": 1}.items() if k != "rope_scaling" and exported.get(k) != v]
        check(f"reward export {dtype}: config.json fields differing {wrong}", len(wrong), 0)
        check(f"reward export {dtype}: no generation_config.json",
              int(os.path.exists(os.path.join(out, "generation_config.json"))), 0)
        tensors = exported_tensors(f"reward export {dtype}", out, sd)
        check(f"reward export {dtype}: score.weight of shape [1, C]",
              0 if list(tensors["score.weight"].shape) == [1, C] else 1, 0)
        with torch.no_grad():
            check(f"reward export {dtype}: PyTorch scores on the HF tensors vs trident",
                  rel(hf_scores(kind, exported, tensors, tokens), mine), tol)


def main(trident, hf_logits_bin, root):
    gen = torch.Generator().manual_seed(25)
    with tempfile.TemporaryDirectory() as tmp:
        for kind, cfg in VARIANTS.items():
            print(kind)
            V = cfg["vocab_size"]
            tokens = torch.randint(0, V, (B, T), generator=gen)
            tokens_file = os.path.join(tmp, "tokens.bin")
            tokens.numpy().astype(np.int32).tofile(tokens_file)

            # Import: Hugging Face weights written here, converted in by trident.
            src = os.path.join(tmp, kind + "-hf")
            os.makedirs(src)
            sd = hf_weights(kind, cfg, gen)
            write_safetensors(os.path.join(src, "model.safetensors"), sd)
            json.dump(cfg, open(os.path.join(src, "config.json"), "w"))
            ckpt = os.path.join(tmp, kind + ".h5")
            run(trident, "convert", "--from-hf", src, "--out", ckpt)
            with torch.no_grad():
                want = hf_logits(kind, cfg, sd, tokens)
            check("import: trident logits vs PyTorch on the HF weights", rel(trident_logits(hf_logits_bin, ckpt, tokens_file, tmp, V), want),
                  TOL)

            # Export: a run started from the converted weights trains two steps; its checkpoint goes out.
            trained = train_two_steps(trident, root, kind, cfg, ckpt, os.path.join(tmp, kind + "-run"))
            mine = trident_logits(hf_logits_bin, trained, tokens_file, tmp, V)
            # Two small steps move the logits a little from the imported model's, not to a random one's.
            moved = rel(mine, want)
            check("init.from: trained logits near the imported model's", moved, 1e-2)
            check("init.from: ... but not equal (the run trained)", 0 if moved > 1e-7 else 1, 0)
            for dtype, tol in (("f32", TOL), ("bf16", 3e-2)):
                out = os.path.join(tmp, f"{kind}-out-{dtype}")
                run(trident, "convert", "--to-hf", trained, "--out", out, "--dtype", dtype)
                exported = json.load(open(os.path.join(out, "config.json")))
                for key, value in cfg.items():
                    if key not in ("rope_scaling",):
                        check(f"export {dtype}: config.json {key}", 0 if exported.get(key) == value else 1, 0)
                tensors = exported_tensors(f"export {dtype}", out, sd)
                with torch.no_grad():
                    check(f"export {dtype}: PyTorch on the HF tensors vs trident logits",
                          rel(hf_logits(kind, cfg, tensors, tokens), mine), tol)
            check_reward(trident, hf_logits_bin, kind, cfg, gen, tmp)

    exit_with_result()


if __name__ == "__main__":
    main(*sys.argv[1:4])
