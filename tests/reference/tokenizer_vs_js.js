// Reference side of tokenizer_vs_js.sh: writes the adversarial cases, and compares a dataset
// written by `trident tokenize` with what GPT-2's JS reference encoder (Encoder.js) produces.
//   node tokenizer_vs_js.js cases OUT.jsonl
//   node tokenizer_vs_js.js compare GPT2_DIR PREFIX eot|no-eot jsonl FILE
//   node tokenizer_vs_js.js compare GPT2_DIR PREFIX eot|no-eot text-separated SEPARATOR FILE...
// The reference works on JS strings, so only valid UTF-8 is compared (invalid bytes would reach
// it as U+FFFD); tokenizer_roundtrip covers invalid UTF-8 on the C++ side.
'use strict';
const fs = require('fs');
const path = require('path');

const kEot = 50256;

// Strings that stress each branch of the pre-tokenization regex and BPE.
function adversarialCases() {
  const cases = [
    'Hello world', 'hello  world', '  leading spaces', 'trailing spaces   ', 'trailing newline\n',
    'tabs\tand\t\ttabs\t', 'new\nlines\n\n\nmore\n\n', '\r\n windows \r\n line\r\nends', ' \n \t \n',
    'nbsp\u00a0here \u00a0 and ideographic\u3000space', 'line\u2028and\u2029paragraph separators',
    '\ufeffbyte order mark', 'zero\u200bwidth\u200cnon\u200djoiner', 'soft\u00adhyphen',
    ' ', '\n', '\t', 'a', '  ', ' a', 'a ', ' \u00a0a',
    // contractions, lower and upper case, and apostrophes that are not contractions
    "don't can't won't I'm you're they've we'll he'd it's", "DON'T I'M YOU'RE THEY'VE WE'LL HE'D IT'S",
    "'s 't 're 've 'm 'll 'd", "'S 'T 'RE 'VE 'M 'LL 'D", "''s'''t''", "rock 'n' roll", "o'clock", "'sup",
    "ma'am y'all'd've", "rock'n'roll's", " 's", "'", "''", "'re'", "it\u2019s curly",
    // numbers
    '123 4567 89.01 1,000,000', '3.14159e-10 0x1F 1e9 -42 +7', '\u00bd \u00be \u00b2 \u00b3 \u2155',
    '\u0663\u0664\u0665 \u096c\u096d\u096e \u216b \u2460 \u4e00\u4e8c\u4e09', 'abc123def 123abc abc 123',
    // punctuation runs, including the pairs Encoder.js keys by a comma-joined string
    '!!!??? ... --- === *** ### @@@ $$$ %%%', '...\"hello\",\'world\'...', '","', '"],"', "'],['",
    '["a","b"]', "{'a','b'}", '.","', '),"', '},"', "',\"", ' ","', '.,"', "','", ',,,,,,,,,,,,',
    '<<>>//\\\\||', '```js\nconst x = {a: [1, 2]};\n```', '<div class="x">&amp;</div>',
    // scripts
    '\u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440', '\u0393\u03b5\u03b9\u03ac \u03c3\u03bf\u03c5 \u039a\u03cc\u03c3\u03bc\u03b5',
    '\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645', '\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd',
    '\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e', '\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e0a\u0e32\u0e27\u0e42\u0e25\u0e01',
    '\u4f60\u597d\uff0c\u4e16\u754c\u3002\u3053\u3093\u306b\u3061\u306f\u4e16\u754c \uc548\ub155\ud558\uc138\uc694',
    '\u10d2\u10d0\u10db\u10d0\u10e0\u10ef\u10dd\u10d1\u10d0 \u0532\u0561\u0580\u0565\u0582 \u1230\u120b\u121d',
    // combining marks, precomposed and decomposed
    'e\u0301 a\u0308 n\u0303 \u00e9 \u00e4 \u00f1', 'Z\u0324\u0354\u0367\u0311\u0313a\u0308\u0356\u032dl\u036e\u0312\u036bg\u030c\u0317\u031ao\u0319\u0314\u036e',
    'cafe\u0301 na\u00efve r\u00e9sum\u00e9',
    // emoji, modifiers, ZWJ sequences, flags
    '\u{1F44D} \u{1F44D}\u{1F3FD} \u{1F468}\u200d\u{1F469}\u200d\u{1F467}\u200d\u{1F466}', '\u{1F3F3}\ufe0f\u200d\u{1F308} \u2764\ufe0f \u{1F1FA}\u{1F1F8}\u{1F1E9}\u{1F1EA}',
    'emoji\u{1F44D}in\u{1F389}words', '\u{1F916}\u{1F916}\u{1F916}', ' \u{1F600}',
    // symbols and supplementary-plane letters
    '\u2200x\u2208\u211d: x\u00b2\u2265 0', '\u2192 \u2190 \u21d2 \u2211 \u222b \u00a9\u00ae\u2122',
    '\u{1D518}\u{1D52B}\u{1D526}\u{1D520}\u{1D52C}\u{1D521}\u{1D522} \u{1D41B}\u{1D428}\u{1D425}\u{1D41D}', '\u{20000}\u{20001} \u{10330}\u{10331}',
    // long runs (BPE on long words, whitespace backtracking)
    ' '.repeat(1000) + 'x', '='.repeat(5000), 'a'.repeat(3000), '\n'.repeat(100) + 'end', 'ab'.repeat(1500),
    ' \t'.repeat(200) + '\n',
    // the literal end-of-text marker is ordinary text to the reference encoder
    '<|endoftext|>', 'text<|endoftext|>more', ' <|endoftext|> ', '<|endoftext|><|endoftext|>',
    "Mr. O'Neil's 3rd-place finish\u2014wasn't it?\u2014cost $1,234.56 (\u2248\u20ac1.1k).",
  ];
  // Deterministic fuzz over a mixed alphabet, for combinations nobody thought of.
  const alphabet = Array.from("aZ'sSdtmlrve 0 9 \t\n\r.,!?\"'-_()[]{}<>|=+*&^%$#@~`/\\;:" +
                              '\u00a0\u3000\u2028\u00e9e\u0301\u00df\u0416\u05d0\u0928\u094d\u4e2d\u{1F44D}\u200d\u00bd\u0663');
  let seed = 12345;
  const rand = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return Math.floor((seed / 2147483648) * n); };
  for (let i = 0; i < 3000; i++) {
    let s = '';
    const len = 1 + rand(24);
    for (let j = 0; j < len; j++) s += alphabet[rand(alphabet.length)];
    cases.push(s);
  }
  return cases;
}

function readDataset(prefix) {
  const idx = fs.readFileSync(prefix + '.idx');
  const bin = fs.readFileSync(prefix + '.bin');
  if (idx.subarray(0, 9).toString('latin1') !== 'MMIDIDX\0\0') throw new Error(`${prefix}.idx: bad magic`);
  if (idx.readBigUInt64LE(9) !== 1n) throw new Error(`${prefix}.idx: bad version`);
  const code = idx.readUInt8(17);
  const width = { 4: 4, 8: 2 }[code];
  if (!width) throw new Error(`${prefix}.idx: dtype code ${code}, expected 8 (uint16) or 4 (int32)`);
  const nseq = Number(idx.readBigUInt64LE(18));
  const ndoc = Number(idx.readBigUInt64LE(26));
  let off = 34;
  const sequences = [];
  for (let i = 0; i < nseq; i++) {
    const size = idx.readInt32LE(off + 4 * i);
    const ptr = Number(idx.readBigInt64LE(off + 4 * nseq + 8 * i));
    const ids = [];
    for (let k = 0; k < size; k++) ids.push(width === 2 ? bin.readUInt16LE(ptr + 2 * k) : bin.readInt32LE(ptr + 4 * k));
    sequences.push(ids);
  }
  off += 12 * nseq;
  if (Number(idx.readBigInt64LE(off + 8 * (ndoc - 1))) !== nseq) throw new Error(`${prefix}.idx: doc_idx does not end at ${nseq}`);
  return sequences;
}

function validUtf8(buf, file) {
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(buf);
  } catch (e) {
    throw new Error(`${file} is not valid UTF-8; the JS reference can only compare valid text`);
  }
}

// The documents `trident tokenize --doc-separator SEP` reads: lines up to a line equal to SEP,
// newlines kept, empty documents skipped, never spanning files.
function separatedDocuments(files, separator) {
  const docs = [];
  for (const file of files) {
    const parts = validUtf8(fs.readFileSync(file), file).split('\n');
    let doc = '';
    parts.forEach((line, i) => {
      const terminated = i < parts.length - 1;
      if (!terminated && line === '') return;
      if (line === separator) {
        if (doc) docs.push(doc);
        doc = '';
      } else {
        doc += line + (terminated ? '\n' : '');
      }
    });
    if (doc) docs.push(doc);
  }
  return docs;
}

function jsonlDocuments(file) {
  return validUtf8(fs.readFileSync(file), file).split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l).text)
    .filter((t) => t !== '');
}

// Every document's ids in PREFIX must be encoder.encode(text), then `eotId` when given;
// `what` names the inputs, `reference` the encoder.
function compareIds(encoder, eotId, prefix, docs, what, reference) {
  const got = readDataset(prefix);
  if (got.length !== docs.length) {
    console.error(`FAIL ${what}: trident wrote ${got.length} documents, the reference split ${docs.length}`);
    return false;
  }
  let tokens = 0;
  for (let d = 0; d < docs.length; d++) {
    const want = encoder.encode(docs[d]);
    if (eotId !== null) want.push(eotId);
    const have = got[d];
    tokens += want.length;
    const n = Math.max(want.length, have.length);
    for (let k = 0; k < n; k++) {
      if (want[k] === have[k]) continue;
      const lo = Math.max(0, k - 3);
      console.error(`FAIL ${what}: document ${d}, first mismatch at token ${k} of ${want.length} (trident has ${have.length})`);
      console.error(`  text:      ${JSON.stringify(docs[d].length > 300 ? docs[d].slice(0, 300) + '...' : docs[d])}`);
      console.error(`  reference: ...${JSON.stringify(want.slice(lo, k + 4))} = ${JSON.stringify(encoder.decode(want.slice(lo, k + 4)))}`);
      console.error(`  trident:   ...${JSON.stringify(have.slice(lo, k + 4))}`);
      return false;
    }
  }
  console.log(`OK ${what}: ${docs.length} documents, ${tokens} tokens identical to ${reference}`);
  return true;
}

function compare(gpt2Dir, prefix, eot, docs, what) {
  const encoder = require(path.resolve(gpt2Dir, 'Encoder.js'));
  return compareIds(encoder, eot ? kEot : null, prefix, docs, what, 'Encoder.js');
}

function main(argv) {
  const [cmd, ...rest] = argv;
  if (cmd === 'cases') {
    fs.writeFileSync(rest[0], adversarialCases().map((text) => JSON.stringify({ text })).join('\n') + '\n');
    return true;
  }
  if (cmd === 'compare') {
    const [gpt2Dir, prefix, eotFlag, kind, ...inputs] = rest;
    const eot = eotFlag === 'eot';
    if (kind === 'jsonl') return compare(gpt2Dir, prefix, eot, jsonlDocuments(inputs[0]), inputs[0]);
    if (kind === 'text-separated') {
      const [separator, ...files] = inputs;
      return compare(gpt2Dir, prefix, eot, separatedDocuments(files, separator), `${files.length} text files`);
    }
  }
  console.error('usage: see the header of tokenizer_vs_js.js');
  return false;
}

// hf_tokenizer_vs_js.js reuses the cases, the readers and the comparison.
module.exports = { adversarialCases, compareIds, separatedDocuments, jsonlDocuments };
if (require.main === module) process.exitCode = main(process.argv.slice(2)) ? 0 : 1;
