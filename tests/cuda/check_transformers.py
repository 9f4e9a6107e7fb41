#!/usr/bin/env python3
"""trident convert against Hugging Face transformers itself (where it is installed: the GPU nodes;
exits 77 elsewhere). For GPT2LMHeadModel, LlamaForCausalLM and Qwen2ForCausalLM of
check_hf_convert.py's shapes:
  import: a randomly initialised transformers model, save_pretrained (safetensors), converted in;
          trident's CPU logits against the transformers model's within 1e-5 (relative norm);
  export: a run started from it trains two steps, its checkpoint is exported (f32 and bf16) and
          loaded by AutoModelForCausalLM.from_pretrained; its logits against trident's;
  reward: the same model as transformers' *ForSequenceClassification with one label converts in
          with trident's scores equal to its logits (rows of two lengths, right-padded with
          pad_token_id), and that reward checkpoint's f32 export loads with
          AutoModelForSequenceClassification as the same class, with logits equal to trident's.
    check_transformers.py TRIDENT HF_LOGITS REPO_ROOT"""
import os
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
from check_hf_convert import (B, T, TOL, VARIANTS, check, exit_with_result, reward_config, reward_rows,  # noqa: E402
                              run, train_two_steps, trident_logits, trident_scores)
from check_vs_torch import rel  # noqa: E402

try:
    import transformers
except ImportError:
    print("check_transformers: skipped, transformers is not installed for this python")
    sys.exit(77)


def hf_model_logits(model, tokens):
    with torch.no_grad():
        return model(tokens).logits.float()


def load(path, auto=None):
    """from_pretrained in fp32 (transformers 5 calls the argument dtype, 4 torch_dtype)."""
    auto = auto or transformers.AutoModelForCausalLM
    try:
        return auto.from_pretrained(path, dtype=torch.float32).eval()
    except TypeError:
        return auto.from_pretrained(path, torch_dtype=torch.float32).eval()


def made_by_transformers(cfg, auto):
    """A randomly initialised transformers model of cfg, norms away from 1 and biases away from 0 so
    that a swap would show."""
    config = transformers.AutoConfig.for_model(**{k: v for k, v in cfg.items() if k != "architectures"})
    config.architectures = cfg["architectures"]
    model = auto.from_config(config).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    return model


def check_reward(trident, hf_logits_bin, kind, cfg, tmp):
    """The variant as transformers' *ForSequenceClassification: in, and out again."""
    auto = transformers.AutoModelForSequenceClassification
    rcfg = reward_config(kind, cfg)
    model = made_by_transformers(rcfg, auto)
    src = os.path.join(tmp, kind + "-rm-hf")
    model.save_pretrained(src, safe_serialization=True)
    ckpt = os.path.join(tmp, kind + "-rm.h5")
    run(trident, "convert", "--from-hf", src, "--out", ckpt)
    tokens, tokens_file, targets_file = reward_rows(cfg["vocab_size"], model.config.pad_token_id,
                                                    torch.Generator().manual_seed(27), tmp)
    mine = trident_scores(hf_logits_bin, ckpt, tokens_file, targets_file, tmp)
    with torch.no_grad():
        check("reward import: trident scores vs transformers logits", rel(mine, model(tokens).logits[:, 0]), TOL)
    out = os.path.join(tmp, kind + "-rm-out")
    run(trident, "convert", "--to-hf", ckpt, "--out", out, "--dtype", "f32")
    exported = load(out, auto)
    check(f"reward export: from_pretrained is {rcfg['architectures'][0]}",
          0 if type(exported).__name__ == rcfg["architectures"][0] else 1, 0)
    with torch.no_grad():
        check("reward export: transformers logits vs trident scores", rel(exported(tokens).logits[:, 0], mine), TOL)


def main(trident, hf_logits_bin, root):
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    torch.manual_seed(28)
    with tempfile.TemporaryDirectory() as tmp:
        for kind, cfg in VARIANTS.items():
            print(kind)
            V = cfg["vocab_size"]
            tokens = torch.randint(0, min(V, 256), (B, T))
            tokens_file = os.path.join(tmp, "tokens.bin")
            tokens.numpy().astype(np.int32).tofile(tokens_file)

            model = made_by_transformers(cfg, transformers.AutoModelForCausalLM)
            src = os.path.join(tmp, kind + "-hf")
            model.save_pretrained(src, safe_serialization=True)
            ckpt = os.path.join(tmp, kind + ".h5")
            run(trident, "convert", "--from-hf", src, "--out", ckpt)
            want = hf_model_logits(model, tokens)
            check("import: trident logits vs transformers", rel(trident_logits(hf_logits_bin, ckpt, tokens_file, tmp, V),
                                                                 want), TOL)

            trained = train_two_steps(trident, root, kind, cfg, ckpt, os.path.join(tmp, kind + "-run"))
            mine = trident_logits(hf_logits_bin, trained, tokens_file, tmp, V)
            for dtype, tol in (("f32", TOL), ("bf16", 3e-2)):
                out = os.path.join(tmp, f"{kind}-out-{dtype}")
                run(trident, "convert", "--to-hf", trained, "--out", out, "--dtype", dtype)
                exported = load(out)
                check(f"export {dtype}: from_pretrained is {cfg['architectures'][0]}",
                      0 if type(exported).__name__ == cfg["architectures"][0] else 1, 0)
                check(f"export {dtype}: transformers logits vs trident", rel(hf_model_logits(exported, tokens), mine), tol)
            check_reward(trident, hf_logits_bin, kind, cfg, tmp)

    exit_with_result()


if __name__ == "__main__":
    main(*sys.argv[1:4])
