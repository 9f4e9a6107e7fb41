#!/usr/bin/env bash
# e2e: `tokenize --chat-template hf` with Hugging Face templates (tests/fixtures/chat_templates) in a
# tokenizer_config.json beside byte-level tokenizer.json files holding Llama 3's and ChatML's special
# tokens. Llama 3's template writes the same .bin/.idx and mask as the built-in llama3, Qwen2.5's the
# same as chatml on conversations with a system message (without one it adds its default system
# prompt, which chatml does not); bad templates exit 2 with one line and leave existing output alone.
#   chat_template_hf.sh TRIDENT REPO_ROOT
set -uo pipefail
trident=$1 root=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
fixtures=$root/tests/fixtures/chat_templates

# tok DIR TEMPLATE_FILE|- CONFIG_JSON: a tokenizer.json of the 256 bytes plus Llama 3's and ChatML's
# special tokens, and a tokenizer_config.json of CONFIG_JSON with chat_template from TEMPLATE_FILE.
tok() {
  mkdir -p "$1"
  /usr/bin/python3 - "$@" <<'PY'
import json, sys
d, template, config = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
vocab = {chr(c): b for b, c in zip(bs, cs)}
names = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
         "<|im_start|>", "<|im_end|>", "<|endoftext|>"]
added = [{"id": 256 + i, "content": t, "special": True} for i, t in enumerate(names)]
json.dump({"version": "1.0", "added_tokens": added, "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
           "post_processor": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"},
           "model": {"type": "BPE", "vocab": vocab, "merges": []}}, open(d + "/tokenizer.json", "w"))
if template != "-":
    config["chat_template"] = open(template, encoding="utf-8").read()
json.dump(config, open(d + "/tokenizer_config.json", "w"))
PY
}
llama_cfg='{"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}'
qwen_cfg='{"bos_token": null, "eos_token": "<|im_end|>"}'
tok "$out/llama3" "$fixtures/llama3.jinja" "$llama_cfg"
tok "$out/qwen" "$fixtures/qwen2_5.jinja" "$qwen_cfg"

cat > "$out/chat.jsonl" <<'JSONL'
{"messages": [{"role": "system", "content": " Answer with the number only. "}, {"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "5"}, {"role": "user", "content": "And 2 + 4?\n"}, {"role": "assistant", "content": " 6\n"}]}
{"messages": [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Ça va ?"}, {"role": "assistant", "content": "Oui, très bien — merci !"}]}
{"messages": [{"role": "system", "content": "Tu es bref."}, {"role": "user", "content": "{{ not a tag }}"}, {"role": "assistant", "content": "\"quoted\" \\ text"}]}
JSONL
/usr/bin/python3 -c "
import json
for l in open('$out/chat.jsonl'):
    r = json.loads(l); print(json.dumps({'prompt': r['messages'][1]['content'], 'chosen': r['messages'][2]['content'], 'rejected': 'no'}))
" > "$out/pref.jsonl"

# same A B: the two datasets (tokens and mask) are byte for byte equal.
same() {
  for f in .bin .idx _mask.bin _mask.idx; do
    cmp -s "$1$f" "$2$f" || fail "$1$f and $2$f differ"
  done
  echo "ok   $1 and $2: identical tokens and masks"
}
run() { "$trident" tokenize --input "$out/chat.jsonl" --format chat "$@" > "$out/log" 2>&1 || { cat "$out/log"; fail "tokenize $*"; }; }
run --tokenizer "$out/llama3" --chat-template llama3 --output "$out/l_builtin"
run --tokenizer "$out/llama3/tokenizer.json" --chat-template hf --output "$out/l_hf"
grep -q "with the hf:.*tokenizer_config.json template" "$out/log" || { cat "$out/log"; fail "summary names the hf template"; }
same "$out/l_builtin" "$out/l_hf"
run --tokenizer "$out/qwen" --chat-template chatml --output "$out/q_builtin"
run --tokenizer "$out/qwen" --chat-template "hf:$out/qwen/tokenizer_config.json" --output "$out/q_hf"
same "$out/q_builtin" "$out/q_hf"
"$trident" tokenize --input "$out/pref.jsonl" --format preference --tokenizer "$out/qwen" --chat-template hf \
  --output "$out/pref" > "$out/log" 2>&1 || { cat "$out/log"; fail "preference with hf"; }
grep -q "3 records: 3 written" "$out/log" || { cat "$out/log"; fail "preference summary"; }
echo "ok   preference records through Qwen2.5's template"

# expect WHAT PATTERN ARGS...: tokenize into the existing $out/l_hf exits 2 with one line on stderr
# matching PATTERN, and leaves $out/l_hf as it was.
cp "$out/l_hf.bin" "$out/kept.bin"
expect() {
  local what=$1 pattern=$2
  shift 2
  "$trident" tokenize --input "$out/chat.jsonl" --format chat --output "$out/l_hf" "$@" >"$out/stdout" 2>"$out/stderr"
  local rc=$?
  [[ $rc == 2 ]] || { cat "$out/stderr"; fail "$what: exit $rc, expected 2"; }
  [[ $(wc -l <"$out/stderr") == 1 ]] || { cat "$out/stderr"; fail "$what: not one line"; }
  grep -q -- "$pattern" "$out/stderr" || { cat "$out/stderr"; fail "$what: message does not match '$pattern'"; }
  cmp -s "$out/kept.bin" "$out/l_hf.bin" || fail "$what: the existing output changed"
  echo "ok   $what: $(cat "$out/stderr")"
}
tok "$out/none" - "$llama_cfg"
expect "no chat_template field" "hf:.*none/tokenizer_config.json: no chat_template field" \
  --tokenizer "$out/none" --chat-template hf
expect "byte tokenizer with hf" "--chat-template hf reads the tokenizer_config.json beside a tokenizer.json" \
  --tokenizer byte --chat-template hf
bad() { printf '%s' "$2" > "$out/$1.jinja" && tok "$out/$1" "$out/$1.jinja" "$llama_cfg"; }
bad syntax "{% for m in messages %}{{ m.content }"
expect "syntax error" "chat_template line 1: the tag opened here has no }}" --tokenizer "$out/syntax" --chat-template hf
bad macro $'{% if true %}\n{% macro f() %}x{% endmacro %}{% endif %}'
expect "unsupported statement" "chat_template line 2: the statement {% macro %} is not supported" \
  --tokenizer "$out/macro" --chat-template hf
bad rewrites "{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>{{ m.content | replace('5', 'five') }}<|eot_id|>{% endfor %}"
expect "content rewritten" "chat.jsonl:1: .*changes message 2's content" --tokenizer "$out/rewrites" --chat-template hf
bad no_eot "{% for m in messages %}{{ m.role }}: {{ m.content }}
{% endfor %}"
expect "no end-of-turn token" "chat.jsonl:1: .*after an assistant's content where an end-of-turn token" \
  --tokenizer "$out/no_eot" --chat-template hf
tok "$out/gemma" "$fixtures/gemma2.jinja" "$llama_cfg"
expect "raise_exception" "chat.jsonl:1: .*the template raised: System role not supported" \
  --tokenizer "$out/gemma" --chat-template hf
echo "chat_template_hf: ok"
