// Reference side of hf_tokenizer_vs_js.sh: writes the adversarial cases for tokenizer.json
// tokenizers, and compares a dataset written by `trident tokenize --tokenizer DIR` with the ids
// of the JS reference encoder (@lenml/tokenizers, a fork of transformers.js) on the same files.
//   node hf_tokenizer_vs_js.js cases OUT.jsonl
//   node hf_tokenizer_vs_js.js compare NODE_MODULES MODEL PREFIX eot|no-eot jsonl FILE
//   node hf_tokenizer_vs_js.js compare NODE_MODULES MODEL PREFIX eot|no-eot text-separated SEPARATOR FILE...
// MODEL is llama3 or qwen3 (the package @lenml/tokenizer-MODEL). The document end is the
// tokenizer_config.json eos_token, which `trident tokenize` appends.
'use strict';
const path = require('path');
const gpt2 = require('./tokenizer_vs_js.js');

// GPT-2's cases, plus what only these tokenizers have: added tokens inside text, Llama 3's digit
// groups, case-insensitive contractions, line-break rules, and NFC (Qwen normalizes).
function cases() {
  const extra = [
    '<|begin_of_text|>', '<|end_of_text|>', 'a<|end_of_text|>b', '<|begin_of_text|>Hello<|eot_id|>',
    ' <|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>', '<|reserved_special_token_5|><|reserved_special_token_250|>',
    '<|im_start|>system\nYou are<|im_end|>\n<|im_start|>user\n', '<think>\nhmm\n</think>\n\n', '<tool_call>{"a":1}</tool_call>',
    '<|fim_prefix|>def f(<|fim_suffix|>)<|fim_middle|>', '<|endoftext|>x<|endoftext|>', '<|im_sta', '<|im_start', '<|<|im_end|>|>',
    '<|end_of_text', 'x<|reserved_special_token_0', '<<|im_end|>>', '<think><think></think>',
    '1 12 123 1234 12345 123456 1234567', '\u0661\u0662\u0663\u0664\u0665 \u0967\u0968\u0969\u096a', 'v1.2.3-rc45 3.14159265358979',
    'a1b22c333d4444', '\u00bd\u00bc 1\u00bd \u2460\u2461\u2462\u2463', "I'M YOU'RE He'S THEY'Ve 'LL 'Ll 'D \u00c9'S",
    "'S 'T 'RE 'VE 'M 'LL 'D", "x'sy 'Sup", 'a\r\nb\r\n\r\nc\n\r\n d', '.\n\n\nx', '!!!\r\n\r\n', ' \n \n x', '\t\n\tx',
    'a\n\n b \n\n', '   \r\n   x', '\u3000\u3000x \u00a0\u00a0x', '(x) [y] {z} "w"', '\u00bfQu\u00e9? \u00a1S\u00ed!',
    // NFC: decomposed letters, singletons, reordering of marks, Hangul jamo, excluded compositions
    'e\u0301 o\u0308 A\u030a n\u0303', '\u212b \u2126 \u212a', 'a\u0323\u0302 a\u0302\u0323 q\u0307\u0323', '\u1100\u1161\u11a8 \u1100\u1161',
    '\u0344 \u0958 \u2adc \ufb1d', 'caf\u00e9 cafe\u0301', '\u1e9b\u0323', '\u0041\u0328\u0301\u0307',
  ];
  return [...gpt2.adversarialCases(), ...extra];
}

function compare(modules, model, prefix, eot, docs, what) {
  const tok = require(path.join(modules, `@lenml/tokenizer-${model}`)).fromPreTrained();
  return gpt2.compareIds(tok, eot ? tok.eos_token_id : null, prefix, docs, `${model} ${what}`, `@lenml/tokenizer-${model}`);
}

function main(argv) {
  const [cmd, ...rest] = argv;
  if (cmd === 'cases') {
    require('fs').writeFileSync(rest[0], cases().map((text) => JSON.stringify({ text })).join('\n') + '\n');
    return true;
  }
  if (cmd === 'compare') {
    const [modules, model, prefix, eotFlag, kind, ...inputs] = rest;
    const eot = eotFlag === 'eot';
    if (kind === 'jsonl') return compare(modules, model, prefix, eot, gpt2.jsonlDocuments(inputs[0]), inputs[0]);
    if (kind === 'text-separated') {
      const [separator, ...files] = inputs;
      return compare(modules, model, prefix, eot, gpt2.separatedDocuments(files, separator), `${files.length} text files`);
    }
  }
  console.error('usage: see the header of hf_tokenizer_vs_js.js');
  return false;
}

process.exitCode = main(process.argv.slice(2)) ? 0 : 1;
