#!/usr/bin/env bash
# e2e: supervised fine-tuning from a generated chat set. Synthetic arithmetic Q&A (tools/
# make_arithmetic_chat.py) plus bad records is tokenized with the byte tokenizer and the plain
# template (the bad records counted by reason in the summary), then llama-tiny trains on it with
# --task sft over train.epochs and its masked loss falls; packed (data.pack) the same records fill
# fewer, fuller sequences; a pre-training dataset is refused for sft.
#   sft_chat.sh TRIDENT REPO_ROOT [MPIRUN ARGS...]
set -euo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
/usr/bin/python3 "$root/tools/make_arithmetic_chat.py" --records 400 --seed 3 --system "" > "$out/chat.jsonl"
cat >> "$out/chat.jsonl" <<'JSONL'
{"prompt": "What is 1 + 1?"}
{"messages": [{"role": "user", "content": "What is 2 + 2?"}, {"role": "robot", "content": "4"}]}
{"messages": [{"role": "user", "content": "What is 3 + 3?"}, {"role": "assistant", "content": ""}]}
JSONL
"$trident" tokenize --input "$out/chat.jsonl" --output "$out/arith" --tokenizer byte --format chat \
  --chat-template plain --max-len 64 2> "$out/tokenize.err" | tee "$out/tokenize.log"
grep -q "403 records: 400 written, 3 bad: 1 empty assistant turn, 1 missing field, 1 wrong roles" "$out/tokenize.log" \
  || { echo "tokenize summary line is wrong"; cat "$out/tokenize.err"; exit 1; }

"$@" "$trident" train --config "$root/inputs/models/llama-tiny.cfg" --backend cpu --task sft \
  --data.train "$out/arith" --data.split 0.9 --model.seq_len 48 --train.micro_batch_size 8 \
  --train.global_batch_size 16 --train.epochs 2 --train.warmup_steps 5 --train.lr 3e-3 --train.eval_every 45 \
  --train.eval_steps 2 --log.every 15 --log.metrics "$out/m.jsonl" | tee "$out/train.log"
grep -q "train.epochs = 2 of 360 sequences: train.steps = 45" "$out/train.log" || { echo "epochs not resolved"; exit 1; }
/usr/bin/python3 - "$out/m.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 45, f"expected 45 metrics rows, got {len(rows)}"
first = sum(r["loss"] for r in rows[:3]) / 3
last = sum(r["loss"] for r in rows[-5:]) / 5
val = [r["val_loss"] for r in rows if r.get("val_loss") is not None]
print(f"masked loss of steps 1-3: {first:.3f}, of steps 41-45: {last:.3f}; validation {val}")
# Only the answer digits and the end token train: uniform over 257 bytes is ln(257) = 5.55; the
# answers' digits and <|endoftext|> are learned fast.
assert first > 4.5, f"initial masked loss {first:.3f} should be near ln(257) = 5.55"
assert last < 2.5, f"masked loss after 2 epochs {last:.3f} is not below 2.5"
assert val and val[-1] < 2.5, f"validation masked loss {val} is not below 2.5"
PY

# Packed into sequences of 128: the data line reports fewer sequences per epoch, each holding more
# record tokens than one record per sequence of 48 did.
"$@" "$trident" train --config "$root/inputs/models/llama-tiny.cfg" --backend cpu --task sft --data.pack true \
  --data.train "$out/arith" --data.split 0.9 --model.seq_len 128 --train.micro_batch_size 8 \
  --train.global_batch_size 16 --train.steps 2 --log.every 1 | tee "$out/packed.log"
/usr/bin/python3 - "$out/train.log" "$out/packed.log" <<'PY'
import re, sys
def train_line(path):
    return next(l for l in open(path) if l.startswith("train ") and "records [0, 360)" in l)
one, packed = train_line(sys.argv[1]), train_line(sys.argv[2])
fill = lambda line: float(re.search(r"\(([0-9.]+)% filled", line).group(1)) / 100
sequences = int(re.search(r"packed into (\d+) sequences per epoch", packed).group(1))
one_tokens, packed_tokens = fill(one) * 49, fill(packed) * 129   # record tokens per sequence
print(f"one record per sequence of 49 tokens: {one_tokens:.1f} record tokens each; packed into {sequences} "
      f"sequences of 129: {packed_tokens:.1f} each ({100 * fill(packed):.1f}% filled)")
assert sequences < 360 / 2 and packed_tokens > 2 * one_tokens and fill(packed) > 0.8, (one, packed)
PY

set +e
"$trident" train --config "$root/inputs/models/llama-tiny.cfg" --backend cpu --task sft --data.train "$data" \
  --train.steps 1 > "$out/bad.log" 2>&1
rc=$?
set -e
[[ $rc == 2 ]] || { echo "sft on pre-training data: exit $rc, expected 2"; cat "$out/bad.log"; exit 1; }
grep -q "fortunes_byte_mask.idx: cannot open.*loss mask" "$out/bad.log" || { cat "$out/bad.log"; exit 1; }
echo "sft_chat: ok"
