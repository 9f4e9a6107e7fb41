#!/usr/bin/env bash
# e2e: bad inputs of `trident convert` and `train --init.from` exit 2 with one line naming the
# file and the tensor or setting, and an existing --out is left as it was without --overwrite.
#   hf_bad_input.sh TRIDENT REPO_ROOT
set -uo pipefail
source "$(dirname "$0")/lib.sh"
fail() { echo "FAIL: $*"; exit 1; }
mha=(--backend cpu --data.train "$data" --model.arch llama --model.n_layer 2 --model.n_head 4
     --model.n_embd 64 --model.ffn_hidden_size 96 --model.vocab_size 300 --model.seq_len 16
     --train.micro_batch_size 2 --train.global_batch_size 2)
llama=("${mha[@]}" --model.n_kv_head 2)
"$trident" train "${llama[@]}" --train.steps 1 --checkpoint.dir "$out/ck" >"$out/train.log" 2>&1 ||
  { cat "$out/train.log"; fail "training"; }
"$trident" convert --to-hf "$out/ck/step_1.h5" --out "$out/hf" --dtype f32 >/dev/null || fail "to-hf"

# expect WHAT PATTERN COMMAND...: exit 2, one line on stderr matching PATTERN.
expect() {
  local what=$1 pattern=$2
  shift 2
  "$@" >"$out/stdout" 2>"$out/stderr"
  local rc=$?
  [[ $rc == 2 ]] || { cat "$out/stderr"; fail "$what: exit $rc, expected 2"; }
  [[ $(wc -l <"$out/stderr") == 1 ]] || { cat "$out/stderr"; fail "$what: not one line"; }
  grep -q -- "$pattern" "$out/stderr" || { cat "$out/stderr"; fail "$what: message does not match '$pattern'"; }
  echo "ok   $what: $(cat "$out/stderr")"
}
# A copy of the exported model whose config.json has KEY = VALUE (JSON), for each pair given.
variant() {
  rm -rf "$out/v" && cp -r "$out/hf" "$out/v"
  /usr/bin/python3 -c "import json,sys; p=sys.argv[1]; c=json.load(open(p))
for k, v in zip(sys.argv[2::2], sys.argv[3::2]): c[k] = json.loads(v)
json.dump(c, open(p,'w'))" "$out/v/config.json" "$@"
}
convert_v() { "$trident" convert --from-hf "$out/v" --out "$out/v.h5"; }

mkdir -p "$out/empty"
expect "no config.json" "empty/config.json: missing" "$trident" convert --from-hf "$out/empty" --out "$out/x.h5"
expect "not a directory" "nowhere: not a directory" "$trident" convert --from-hf "$out/nowhere" --out "$out/x.h5"
variant architectures '["MistralForCausalLM"]'
expect "unsupported architecture" "v/config.json: architecture \"MistralForCausalLM\" is not supported" convert_v
# A reward model (*ForSequenceClassification) has one label, and score.weight in place of lm_head.
variant architectures '["LlamaForSequenceClassification"]'
expect "classifier of 2 labels" "v/config.json: the classifier has 2 labels (\"id2label\", \"num_labels\"): trident's reward model has one score" convert_v
variant architectures '["LlamaForSequenceClassification"]' id2label '{"0": "A", "1": "B", "2": "C"}'
expect "classifier of 3 labels" "the classifier has 3 labels" convert_v
variant architectures '["LlamaForSequenceClassification"]' num_labels 1
expect "reward model without score.weight" "v: tensor 'score.weight' is missing" convert_v
variant rope_scaling '{"rope_type": "llama3", "factor": 8.0}'
expect "llama3 rope scaling" "rope_scaling\" of type 'llama3' is not implemented" convert_v
variant head_dim 64
expect "head_dim" "\"head_dim\" = 64" convert_v
variant mlp_bias true
expect "mlp_bias" "\"mlp_bias\" = true" convert_v
variant attention_bias true
expect "attention_bias (o_proj bias)" "\"attention_bias\" = true: it puts a bias on o_proj" convert_v
variant num_hidden_layers 3
expect "missing tensor" "v: tensor 'model.layers.2.input_layernorm.weight' is missing" convert_v
variant intermediate_size 128
expect "mis-shaped tensor" "v/model.safetensors: tensor 'model.layers.0.mlp.gate_proj.weight' has shape \[96, 64\]" convert_v
variant num_hidden_layers 1
expect "extra tensor" "v/model.safetensors: tensor 'model.layers.1.[a-z_.]*' is not part of a LlamaForCausalLM" convert_v
variant architectures '["Qwen2ForCausalLM"]'
expect "Qwen2 without its q/k/v biases" "tensor 'model.layers.0.self_attn.q_proj.bias' is missing" convert_v
rm -rf "$out/v" && cp -r "$out/hf" "$out/v"
/usr/bin/python3 -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); c['architectures']=['Qwen2ForCausalLM']; c['use_sliding_window']=True; json.dump(c, open(p,'w'))" "$out/v/config.json"
expect "sliding window" "\"use_sliding_window\" = true: sliding-window attention is not implemented" convert_v

# Existing outputs are not replaced without --overwrite, and are left as they were.
echo "earlier" >"$out/existing.h5"
expect "existing --out" "existing.h5: exists; pass --overwrite" "$trident" convert --from-hf "$out/hf" --out "$out/existing.h5"
[[ $(cat "$out/existing.h5") == earlier ]] || fail "the existing --out was changed"
"$trident" convert --from-hf "$out/hf" --out "$out/existing.h5" --overwrite >/dev/null || fail "--overwrite"
cp "$out/hf/config.json" "$out/config.before"
expect "non-empty --out directory" "hf: is not empty; pass --overwrite" \
  "$trident" convert --to-hf "$out/ck/step_1.h5" --out "$out/hf"
cmp -s "$out/hf/config.json" "$out/config.before" || fail "the existing model directory was changed"
expect "missing checkpoint" "checkpoint $out/none.h5: no such file" "$trident" convert --to-hf "$out/none.h5" --out "$out/o"
expect "bad --dtype" "--dtype 'fp8': must be bf16, f32 or f16" \
  "$trident" convert --to-hf "$out/ck/step_1.h5" --out "$out/o" --dtype fp8
expect "no direction" "give one of --from-hf DIR or --to-hf CKPT.h5" "$trident" convert --out "$out/o"

# init.from: the run's [model] must be the weights' model, named field by field.
expect "init.from of another model" "init.from $out/hf: model.n_kv_head = 4 but the weights' model has 2" \
  "$trident" train "${mha[@]}" --init.from "$out/hf" --train.steps 1
expect "init.from of another rope_theta" "model.rope_theta = 500 but the weights' model has 10000" \
  "$trident" train "${llama[@]}" --model.rope_theta 500 --init.from "$out/existing.h5" --train.steps 1
expect "init.from missing" "init.from: checkpoint $out/none.h5: no such file" \
  "$trident" train "${llama[@]}" --init.from "$out/none.h5" --train.steps 1
echo "all checks passed"
