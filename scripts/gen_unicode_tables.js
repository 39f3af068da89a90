// Writes lib/tokenizers/unicode_tables.cpp: the Unicode facts HF tokenizers (Rust) uses, measured by sweeping
// every code point (U+0000..U+10FFFF without the surrogates) through the npm package of its native binding
// (installed by scripts/install-deps.sh). The tables are facts about that library, committed so the build never
// needs the package; rerun this script when moving to a newer HF tokenizers and review the diff.
//   NODE_PATH=/opt/hftrain-npm/node_modules node scripts/gen_unicode_tables.js > lib/tokenizers/unicode_tables.cpp
// What is measured, and how:
//  - Oniguruma's \s, \p{L} and \p{N} (HF's regex engine for Split / ByteLevel patterns): a Split pre-tokenizer
//    with the class as its regex and behavior "Removed" runs over strings of 4096 consecutive code points; the
//    code points that are not left over are the class.
//  - BertNormalizer(clean_text) drops a code point (its is_control, an old Unicode category table; unassigned
//    code points are kept): normalizeString("a" + c + "b") == "ab".
//  - BertPreTokenizer / Punctuation isolate c (its is_punctuation, the same old table):
//    preTokenizeString("a" + c + "b") gives three pieces and c is no whitespace.
//  - StripAccents removes c (is_combining_mark: Mn, Mc, Me).
//  - BertNormalizer's strip_accents removes c after NFD (is_mark_nonspacing: Mn of the old table):
//    normalizeString("a" + c) == "a" for a c that HF's NFD leaves as it is.
//  - Lowercase (Rust's char::to_lowercase, full mappings): normalizeString(c) where it differs from c.
//  - NFD: code points that JavaScript's String.prototype.normalize("NFD") decomposes but HF's NFD keeps (its
//    decomposition table is older than the Unicode in use elsewhere).
//  - Grapheme cluster breaks (the unicode-segmentation crate, which the Precompiled normalizer cuts text with): a
//    Precompiled normalizer whose charsmap (built here: a Darts double array of one-byte keys) maps "a" to "b"
//    and every UTF-8 lead byte to "Z" replaces a cluster under 6 bytes whole, else character by character, so
//    a cluster shows in its output. c joins a preceding "a" (Extend, SpacingMark, ZWJ): "a" + c gives "b";
//    c joins a following "a" (Prepend): c + "a" gives "Z"; for c in U+0080..U+FFFF, U+0300 does not join c
//    (Control): c + "\u0300" gives more than "Z".
const t = require('tokenizers');

const cps = [];
for (let c = 0; c < 0x110000; ++c) if (c < 0xd800 || c > 0xdfff) cps.push(c);

function toRanges(list) {
  const r = [];
  for (const c of list) {
    if (r.length && r[r.length - 1][1] === c - 1) r[r.length - 1][1] = c;
    else r.push([c, c]);
  }
  return r;
}

function regexClass(pattern) {
  const tok = t.Tokenizer.fromString(JSON.stringify({
    version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null, post_processor: null,
    decoder: null, pre_tokenizer: { type: 'Split', pattern: { Regex: pattern }, behavior: 'Removed', invert: false },
    model: { type: 'WordLevel', vocab: { x: 0 }, unk_token: 'x' },
  }));
  const pre = tok.getPreTokenizer();
  const left = new Set();
  for (let i = 0; i < cps.length; i += 4096) {
    const s = cps.slice(i, i + 4096).map((c) => String.fromCodePoint(c)).join('');
    for (const [piece] of pre.preTokenizeString(s)) for (const ch of piece) left.add(ch.codePointAt(0));
  }
  return cps.filter((c) => !left.has(c));
}

const clean = t.bertNormalizer({ cleanText: true, handleChineseChars: false, stripAccents: false, lowercase: false });
const bertPre = t.bertPreTokenizer();
const lower = t.lowercase(), strip = t.stripAccentsNormalizer(), nfd = t.nfdNormalizer();
const bertStrip = t.bertNormalizer({ cleanText: false, handleChineseChars: false, stripAccents: true, lowercase: false });
const control = [], punct = [], mark = [], bertMark = [], lowerSingle = [], lowerMulti = [], nfdKept = [];
for (const c of cps) {
  const ch = String.fromCodePoint(c);
  if (c !== 0 && c !== 0xfffd && clean.normalizeString('a' + ch + 'b') === 'ab') control.push(c);
  const pieces = bertPre.preTokenizeString('a' + ch + 'b');
  if (pieces.length === 3 && pieces[1][0] === ch) punct.push(c);
  if (strip.normalizeString(ch) === '') mark.push(c);
  if (nfd.normalizeString(ch) === ch && bertStrip.normalizeString('a' + ch) === 'a') bertMark.push(c);
  const l = lower.normalizeString(ch);
  if (l !== ch) {
    const lc = Array.from(l);
    if (lc.length === 1) lowerSingle.push([c, lc[0].codePointAt(0)]);
    else lowerMulti.push([c, lc.map((x) => x.codePointAt(0))]);
  }
  if (ch.normalize('NFD') !== ch && nfd.normalizeString(ch) === ch) nfdKept.push(c);
}

// A charsmap of one-byte keys: "a" -> "b", each UTF-8 lead byte -> "Z" (trie units 0..255 hold the keys' labels,
// 256 + key their values; spm_precompiled's layout: trie size, little-endian units, NUL-terminated replacements).
function graphemeProbe() {
  const units = new Uint32Array(512);
  const keys = [0x61];
  for (let b = 0xc2; b <= 0xf4; ++b) keys.push(b);
  for (const c of keys) {
    units[c] = c | (1 << 8) | (256 << 10);  // label c, has a leaf, offset 256
    units[256 + c] = (0x80000000 | (c === 0x61 ? 0 : 2)) >>> 0;  // leaf: offset of "b" or "Z"
  }
  const head = Buffer.alloc(4);
  head.writeUInt32LE(units.length * 4);
  return t.precompiled(Array.from(Buffer.concat([head, Buffer.from(units.buffer), Buffer.from('b\0Z\0', 'latin1')])));
}
const probe = graphemeProbe();
const graphemeExtend = [], graphemePrepend = [], graphemeControl = [];
for (const c of cps) {
  const ch = String.fromCodePoint(c);
  if (probe.normalizeString('a' + ch) === 'b') graphemeExtend.push(c);
  if (c >= 0x80 && probe.normalizeString(ch + 'a') === 'Z') graphemePrepend.push(c);
  if (c >= 0x80 && c < 0x10000 && probe.normalizeString(ch + '\u0300') !== 'Z') graphemeControl.push(c);
}

// Lowercase runs {first, last, stride, delta}: every stride-th code point from first to last maps to itself + delta.
function lowerRuns(pairs) {
  const runs = [];
  for (const [c, l] of pairs) {
    const d = l - c, r = runs[runs.length - 1];
    const gap = r ? c - r.last : 0;
    if (r && r.delta === d && ((r.first === r.last && gap <= 2) || gap === r.stride)) {
      r.stride = gap;
      r.last = c;
    } else runs.push({ first: c, last: c, stride: 1, delta: d });
  }
  return runs;
}

const hex = (c) => '0x' + c.toString(16).toUpperCase();
function emit(name, items, perLine) {
  const lines = [];
  for (let i = 0; i < items.length; i += perLine) lines.push('    ' + items.slice(i, i + perLine).join(', ') + ',');
  return `const ${name}[] = {\n${lines.join('\n')}\n};\n`;
}
const rangeItems = (list) => toRanges(list).map(([a, b]) => `{${hex(a)}, ${hex(b)}}`);

let out = '';
out += '// GENERATED by scripts/gen_unicode_tables.js from HF tokenizers (npm tokenizers@' +
  require('tokenizers/package.json').version + '); do not edit. The Unicode facts HF tokenizers\n';
out += '// uses, by sweeping every code point through it (see the script for how each table is measured).\n';
out += '#include "tokenizers/unicode_tables.h"\n\nnamespace hftrain::unicode::tables {\nnamespace {\n\n';
const tables = [
  ['kSpace', regexClass('\\s')], ['kLetter', regexClass('\\p{L}')], ['kNumber', regexClass('\\p{N}')],
  ['kBertControl', control], ['kBertPunctuation', punct], ['kCombiningMark', mark], ['kBertNonspacingMark', bertMark],
  ['kGraphemeExtend', graphemeExtend], ['kGraphemePrepend', graphemePrepend], ['kGraphemeControl', graphemeControl],
];
for (const [name, list] of tables) out += `// ${list.length} code points\n` + emit('Range ' + name, rangeItems(list), 6) + '\n';
const runs = lowerRuns(lowerSingle);
out += `// ${lowerSingle.length} one-to-one lowercase mappings as runs\n`;
out += emit('LowerRun kLowerRuns', runs.map((r) => `{${hex(r.first)}, ${hex(r.last)}, ${r.stride}, ${r.delta}}`), 4) + '\n';
out += emit('MultiLower kLowerMulti', lowerMulti.map(([c, l]) => `{${hex(c)}, {${l.map(hex).join(', ')}}}`), 4) + '\n';
out += emit('char32_t kNfdKept', nfdKept.map(hex), 8) + '\n';
out += '}  // namespace\n\n';
const views = [['regex_space', 'kSpace'], ['regex_letter', 'kLetter'], ['regex_number', 'kNumber'],
  ['bert_control', 'kBertControl'], ['bert_punctuation', 'kBertPunctuation'], ['combining_mark', 'kCombiningMark'], ['bert_nonspacing_mark', 'kBertNonspacingMark'],
  ['grapheme_extend', 'kGraphemeExtend'], ['grapheme_prepend', 'kGraphemePrepend'], ['grapheme_control', 'kGraphemeControl']];
for (const [fn, arr] of views)
  out += `RangeTable ${fn}() { return {${arr}, sizeof(${arr}) / sizeof(${arr}[0])}; }\n`;
out += 'LowerTable lowercase() {\n  return {kLowerRuns, sizeof(kLowerRuns) / sizeof(kLowerRuns[0]), kLowerMulti,\n' +
  '          sizeof(kLowerMulti) / sizeof(kLowerMulti[0])};\n}\n';
out += 'CodePointList nfd_kept() { return {kNfdKept, sizeof(kNfdKept) / sizeof(kNfdKept[0])}; }\n';
out += '\n}  // namespace hftrain::unicode::tables\n';
process.stdout.write(out);
