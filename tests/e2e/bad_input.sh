#!/usr/bin/env bash
# e2e: bad input exits with status 2 and one line on stderr, before anything is written.
#   bad_input.sh TRIDENT REPO_ROOT
set -uo pipefail
trident=$1 root=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0
expect_2() {   # description, expected fragment, args...
  local what=$1 fragment=$2
  shift 2
  "$trident" "$@" >"$out/stdout" 2>"$out/stderr"
  local rc=$? lines
  lines=$(wc -l <"$out/stderr")
  if [[ $rc -ne 2 || $lines -ne 1 ]] || ! grep -q -- "$fragment" "$out/stderr"; then
    echo "FAIL $what: rc=$rc, $lines stderr lines:"; cat "$out/stderr"; fail=1
  else
    echo "ok   $what: $(cat "$out/stderr")"
  fi
}
printf '[model]\nn_layer = 2\nnot a key value line\n' >"$out/bad.cfg"
expect_2 "malformed INI line" "bad.cfg:3" train --config "$out/bad.cfg"
expect_2 "n_embd vs n_head" "model.n_embd" train --config "$root/inputs/models/tiny.cfg" --model.n_head 5
expect_2 "missing data file" "nonexistent" train --config "$root/inputs/models/tiny.cfg" --data.train "$out/nonexistent"
expect_2 "unknown option" "model.n_layers" train --model.n_layers 3
expect_2 "removed option as a flag" "parallel.dp_copy_engine was removed (NCCL's reduce-scatter" train \
  --config "$root/inputs/models/tiny.cfg" --parallel.dp_copy_engine false
printf '[parallel]\nzero = 1\ndp_copy_engine = true\n' >"$out/removed.cfg"
expect_2 "removed option in a file" "removed.cfg:3: parallel.dp_copy_engine was removed .*: delete the line" train \
  --config "$root/inputs/models/tiny.cfg" --config "$out/removed.cfg"
llama=(train --config "$root/inputs/models/llama-tiny.cfg")
expect_2 "n_kv_head not dividing n_head" "model.n_kv_head = 3: must divide model.n_head = 4" "${llama[@]}" \
  --model.n_kv_head 3
expect_2 "GQA on gpt2" "model.n_kv_head = 2: needs model.arch = llama" train --config "$root/inputs/models/tiny.cfg" \
  --model.n_kv_head 2
expect_2 "unknown arch" "model.arch = mamba: must be gpt2 or llama" train --model.arch mamba
expect_2 "virtual stages without interleaved" "parallel.virtual_stages = 2: applies to parallel.schedule = interleaved" \
  train --config "$root/inputs/models/tiny.cfg" --parallel.virtual_stages 2
expect_2 "ZeRO-4 to train" "parallel.zero = 4: must be 0, 1, 2 or 3" train --config "$root/inputs/models/tiny.cfg" \
  --parallel.zero 4
expect_2 "unknown command" "frobnicate" frobnicate
expect_2 "generate batch of 0" "--batch = 0: must be at least 1" generate --checkpoint "$out/none.h5" --batch 0
expect_2 "generate with --prompt and --prompts" "--prompt and --prompts: give one of them" generate \
  --checkpoint "$out/none.h5" --prompt a --prompts "$out/none.txt"
expect_2 "stray argument to train" "unexpected argument 'stray'" train --config "$root/inputs/models/tiny.cfg" stray
expect_2 "stray argument to bench" "unexpected argument 'stray'" bench --config "$root/inputs/models/tiny.cfg" stray
expect_2 "metrics path is a directory" "log.metrics" train --config "$root/inputs/models/tiny.cfg" \
  --data.train "$root/data/fortunes_byte" --log.metrics "$out"
expect_2 "negative bench.profile_steps" "bench.profile_steps" bench --config "$root/inputs/models/tiny.cfg" \
  --backend cpu --bench.profile_steps -1
expect_2 "directory as --config" "is a directory" train --config "$out"
printf '[model]\nn_layer = 2\nn_layer = 3\n' >"$out/dup.cfg"
expect_2 "key twice in one INI file" "dup.cfg:3: model.n_layer is set again (first at line 2)" train --config "$out/dup.cfg"
expect_2 "tp*pp overflowing an int" "parallel.tp\*parallel.pp = 4294967296" train --parallel.tp 65536 --parallel.pp 65536
expect_2 "micro-batch overflowing an int" "1099511627776 rows per micro-batch" train --train.micro_batch_size 1073741824 \
  --train.global_batch_size 1073741824
expect_2 "n_layer beyond the bound" "model.n_layer = 1000000000" train --model.n_layer 1000000000
# Checked against the memory estimate before anything is allocated (or any data opened).
expect_2 "model larger than memory" "GiB per rank" train --backend cpu --model.vocab_size 16777216 --model.n_embd 8192 \
  --model.n_head 8
expect_2 "bench of a model larger than memory" "GiB per rank" bench --backend cpu --model.vocab_size 16777216 \
  --model.n_embd 8192 --model.n_head 8
expect_2 "binary bytes echoed quoted" '\\x01\\x02' train --model.n_layer "$(printf 'x\001\002')"
expect_2 "100 KB value cut" "(100000 bytes)" train --model.n_layer "$(head -c 100000 /dev/zero | tr '\0' 7)"
# An exception other than InputError (here std::bad_alloc: a 400 MB document whose 1.6 GB of
# token ids exceed a 1.5 GB address-space limit) is one line and exit status 1, not an abort.
truncate -s 400M "$out/huge.txt"
(ulimit -v 1500000; "$trident" tokenize --input "$out/huge.txt" --output "$out/huge" --tokenizer byte --threads 1) \
  >"$out/stdout" 2>"$out/stderr"
rc=$?
if [[ $rc -ne 1 || $(wc -l <"$out/stderr") -ne 1 ]] || ! grep -q "out of memory" "$out/stderr"; then
  echo "FAIL out of memory: rc=$rc:"; cat "$out/stderr"; fail=1
else
  echo "ok   out of memory: $(cat "$out/stderr")"
fi
rm -f "$out/huge.txt"
"$trident" train --help >"$out/help" 2>&1 || { echo "FAIL train --help"; fail=1; }
grep -q "parallel.schedule" "$out/help" || { echo "FAIL train --help lacks parallel.schedule"; fail=1; }
exit $fail
