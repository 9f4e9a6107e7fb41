# shellcheck shell=bash disable=SC2034   # the variables are the sourcing script's
# The start the e2e training scripts share (source it with no arguments, before anything reads
# "$@"): TRIDENT and REPO_ROOT from the first two arguments (the launcher and its arguments stay in
# "$@"), the byte-level fortunes corpus as $data, and a scratch directory $out removed on exit.
trident=$1 root=$2
shift 2
data=$root/data/fortunes_byte
[[ -f $data.bin ]] || { echo "missing $data.bin: run 'make data' first" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# The start of the online-RL tests: a 2-layer llama-tiny ($arith_model) fine-tuned (sft, packed) on
# single-digit arithmetic for STEPS steps into $out/sft/step_STEPS.h5, and 100 such questions with
# their answers in $out/prompts.jsonl (rl.prompts). Further arguments go to make_arithmetic_chat.py.
#   arith_sft STEPS [--ops +]
arith_model=(--config "$root/inputs/models/llama-tiny.cfg" --backend cpu --model.n_layer 2 --model.n_embd 64
             --model.ffn_hidden_size 176 --model.n_positions 128)
arith_sft() {
  local steps=$1
  shift
  /usr/bin/python3 "$root/tools/make_arithmetic_chat.py" --max-operand 9 "$@" --records 3000 --seed 1 --system "" \
    > "$out/train.jsonl"
  /usr/bin/python3 "$root/tools/make_arithmetic_chat.py" --max-operand 9 "$@" --format eval --records 100 --seed 2 \
    > "$out/prompts.jsonl"
  "$trident" tokenize --input "$out/train.jsonl" --output "$out/arith" --tokenizer byte --format chat \
    --chat-template plain > "$out/tokenize.log"
  "$trident" train "${arith_model[@]}" --task sft --model.seq_len 128 --data.train "$out/arith" --data.pack true \
    --train.steps "$steps" --train.micro_batch_size 8 --train.global_batch_size 16 --train.lr 3e-3 \
    --train.warmup_steps 10 --log.every 50 --checkpoint.dir "$out/sft" > "$out/sft.log" || { cat "$out/sft.log"; exit 1; }
}
