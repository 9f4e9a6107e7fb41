#!/usr/bin/env node
// Writes src/io/nfc_tables.inc: Unicode NFC data (canonical decompositions, combining-class
// order, primary compositions) as this node's String.prototype.normalize sees them, so that
// trident's NFC (src/io/nfc.cpp) matches the tokenizer.json reference encoder, which runs on node.
//   node tools/gen_nfc_tables.js > src/io/nfc_tables.inc
// JavaScript exposes no combining classes, only normalize(); their order is recovered by asking
// which pairs of marks canonical ordering swaps. The script then runs the same NFC algorithm on
// the tables and refuses to write them unless it agrees with normalize('NFC') on every code point
// and on random mark sequences.
'use strict';

const kHangulFirst = 0xac00, kHangulLast = 0xd7a3;
const cps = [];
for (let cp = 0; cp <= 0x10ffff; cp++) {
  // Lone surrogates cannot occur in valid UTF-8; Hangul syllables are composed by arithmetic.
  if ((cp >= 0xd800 && cp <= 0xdfff) || (cp >= kHangulFirst && cp <= kHangulLast)) continue;
  cps.push(cp);
}
const str = (...a) => String.fromCodePoint(...a);
const points = (s) => Array.from(s, (c) => c.codePointAt(0));

// Full canonical decompositions.
const decomposition = new Map();
for (const cp of cps) {
  const d = str(cp).normalize('NFD');
  if (d !== str(cp)) decomposition.set(cp, points(d));
}

// Non-starters (combining class > 0): U+0334 has class 1 and U+0301 class 230, so a mark of
// class > 1 moves after U+0334 and one of class in (0, 230) moves before U+0301.
const kLow = 0x334, kHigh = 0x301;
const marks = cps.filter((cp) => !decomposition.has(cp) &&
  ((str(cp, kLow).normalize('NFD') === str(kLow, cp)) || (str(kHigh, cp).normalize('NFD') === str(cp, kHigh))));
// Order of classes: b a reorders to a b exactly when class(a) < class(b).
const compare = (a, b) => {
  if (str(b, a).normalize('NFD') === str(a, b)) return -1;
  if (str(a, b).normalize('NFD') === str(b, a)) return 1;
  return 0;
};
marks.sort(compare);
const cccRank = new Map();
let rank = 0;
marks.forEach((cp, i) => {
  if (i === 0 || compare(marks[i - 1], cp) !== 0) rank++;
  cccRank.set(cp, rank);
});
if (rank > 255) throw new Error(`${rank} combining classes do not fit a byte`);
const ccc = (cp) => cccRank.get(cp) || 0;

// Primary compositions: a composite that NFC keeps, split into (NFC of all but its last
// character, last character), checked by composing the pair back.
const composition = new Map();   // "first,second" -> composite
for (const [cp, d] of decomposition) {
  if (str(cp).normalize('NFC') !== str(cp) || d.length < 2) continue;
  const first = points(str(...d.slice(0, -1)).normalize('NFC'));
  const second = d[d.length - 1];
  if (first.length !== 1 || str(first[0], second).normalize('NFC') !== str(cp))
    throw new Error(`cannot split U+${cp.toString(16)} into a composable pair`);
  composition.set(`${first[0]},${second}`, cp);
}
const seconds = new Set([...composition.keys()].map((k) => Number(k.split(',')[1])));

// The algorithm of src/io/nfc.cpp, on the tables above.
const kSBase = 0xac00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11a7, kLCount = 19, kVCount = 21, kTCount = 28;
function decompose(cp, out) {
  if (cp >= kHangulFirst && cp <= kHangulLast) {
    const s = cp - kSBase;
    out.push(kLBase + Math.floor(s / (kVCount * kTCount)), kVBase + Math.floor((s % (kVCount * kTCount)) / kTCount));
    if (s % kTCount) out.push(kTBase + (s % kTCount));
  } else out.push(...(decomposition.get(cp) || [cp]));
}
function compose(a, b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a <= kHangulLast && (a - kSBase) % kTCount === 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  return composition.get(`${a},${b}`);
}
function nfc(s) {
  const buf = [];
  for (const cp of points(s)) decompose(cp, buf);
  for (let i = 1; i < buf.length; i++) {   // canonical ordering: stable insertion sort of marks
    const c = ccc(buf[i]);
    if (c === 0) continue;
    let j = i;
    while (j > 0 && ccc(buf[j - 1]) > c) { [buf[j - 1], buf[j]] = [buf[j], buf[j - 1]]; j--; }
  }
  if (buf.length === 0) return '';
  let starter = ccc(buf[0]) === 0 ? 0 : -1, last = starter === 0 ? 0 : 256, n = 1;
  for (let i = 1; i < buf.length; i++) {
    const c = ccc(buf[i]);
    const composite = starter >= 0 && (last < c || last === 0) ? compose(buf[starter], buf[i]) : undefined;
    if (composite !== undefined) { buf[starter] = composite; continue; }
    if (c === 0) starter = n;
    last = c;
    buf[n++] = buf[i];
  }
  return str(...buf.slice(0, n));
}
let checked = 0;
const expect = (s) => {
  checked++;
  if (nfc(s) !== s.normalize('NFC')) throw new Error(`table NFC differs from node on ${JSON.stringify(s)}`);
};
for (let cp = 0; cp <= 0x10ffff; cp++) if (cp < 0xd800 || cp > 0xdfff) { expect(str(cp)); expect(str(cp).normalize('NFD')); }
const pool = [...marks.slice(0, 400), ...seconds, ...[...composition.keys()].map((k) => Number(k.split(',')[0])),
  0x1100, 0x1161, 0x11a8, 0xac00, 0xac01, 0x41, 0x61, 0x20];
let seed = 7;
const rand = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return Math.floor((seed / 2147483648) * n); };
for (let i = 0; i < 200000; i++) {
  const a = [];
  for (let k = 1 + rand(6); k > 0; k--) a.push(pool[rand(pool.length)]);
  expect(str(...a));
}

// Code points that NFC changes or that may combine with what precedes them (Unicode's NFC_QC
// No and Maybe; Hangul trailing jamo included): text without them is NFC already, which keeps
// nearly all text on the fast path.
const unstable = cps.filter((cp) => str(cp).normalize('NFC') !== str(cp) || ccc(cp) > 0 || seconds.has(cp) ||
                                    (cp > kTBase && cp < kTBase + kTCount) || (cp >= kVBase && cp < kVBase + kVCount));
const ranges = [];
for (const cp of unstable) {
  const last = ranges[ranges.length - 1];
  if (last && last[1] === cp - 1) last[1] = cp;
  else ranges.push([cp, cp]);
}

const hex = (n) => '0x' + n.toString(16).toUpperCase();
const rows = (items, per) => {
  const out = [];
  for (let i = 0; i < items.length; i += per) out.push('    ' + items.slice(i, i + per).join(', ') + ',');
  return out;
};
const decomp = [...decomposition.entries()].sort((a, b) => a[0] - b[0]);
const flat = [];
const decompRows = decomp.map(([cp, d]) => { const at = flat.length; flat.push(...d); return `{${hex(cp)}, ${at}, ${d.length}}`; });
const comp = [...composition.entries()].map(([k, v]) => [...k.split(',').map(Number), v])
  .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
const lines = [
  `// Generated by tools/gen_nfc_tables.js with node ${process.version} (Unicode ${process.versions.unicode}); ` +
    'do not edit. Regenerate with:',
  '//   node tools/gen_nfc_tables.js > src/io/nfc_tables.inc',
  `// Checked against node's normalize('NFC') on ${checked} strings. Included by src/io/nfc.cpp.`,
  '',
  `// Code points NFC may change or combine with what precedes them: ${ranges.length} ranges`,
  'constexpr NfcRange kNfcUnstable[] = {',
  ...rows(ranges.map(([a, b]) => `{${hex(a)}, ${hex(b)}}`), 6),
  '};',
  '',
  `// Combining classes as ranks that keep their order (${rank} classes), for ${marks.length} marks`,
  'constexpr NfcClass kNfcClasses[] = {',
  ...rows(marks.slice().sort((a, b) => a - b).map((cp) => `{${hex(cp)}, ${cccRank.get(cp)}}`), 6),
  '};',
  '',
  `// Full canonical decompositions (Hangul syllables excepted): ${decomp.length}`,
  'constexpr NfcDecomposition kNfcDecompositions[] = {',
  ...rows(decompRows, 4),
  '};',
  'constexpr uint32_t kNfcDecompositionPoints[] = {',
  ...rows(flat.map(hex), 8),
  '};',
  '',
  `// Primary compositions (first, second) -> composite, sorted: ${comp.length}`,
  'constexpr NfcComposition kNfcCompositions[] = {',
  ...rows(comp.map(([a, b, c]) => `{${hex(a)}, ${hex(b)}, ${hex(c)}}`), 3),
  '};',
];
process.stdout.write(lines.join('\n') + '\n');
