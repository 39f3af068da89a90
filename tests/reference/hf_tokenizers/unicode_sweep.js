// Sweep of every code point of planes 0-1 and the CJK extension planes 2-3 (U+20000..U+323AF) through HF
// tokenizers (the npm package of its native binding, installed by scripts/install-deps.sh) and hftrain, for the
// GPT-2, Llama-3 and BERT files of tests/data/hf_tokenizers_unicode: HF's ids go to a JSON file that the hidden
// Catch2 case "[unicode_sweep]" of hftrain_unit_tests compares with hftrain's, string by string.
// Usage: NODE_PATH=<folder holding node_modules> node unicode_sweep.js DATA_DIR UNIT_TESTS WORKDIR
// Without the package it prints HFTRAIN_TEST_SKIPPED (ctest reports the test skipped) and exits 0.
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');

let Tokenizer;
try {
  ({ Tokenizer } = require('tokenizers'));
} catch (e) {
  console.log('HFTRAIN_TEST_SKIPPED: the npm package "tokenizers" is not installed (scripts/install-deps.sh); no sweep');
  process.exit(0);
}

async function main() {
  const [dir, unitTests, workdir] = process.argv.slice(2);
  fs.mkdirSync(workdir, { recursive: true });
  const cps = [];
  for (let c = 0; c <= 0x323af; ++c) if (c < 0xd800 || c > 0xdfff) cps.push(c);
  // Each code point alone, beside letters, spaces, digits and itself: its class shows in the splits.
  const strings = cps.map((c) => {
    const ch = String.fromCodePoint(c);
    return 'a' + ch + 'a ' + ch + ch + ' 1' + ch + '\n' + ch + ' ';
  });
  const files = ['gpt2_bytelevel.json', 'llama3_split.json', 'bert_wordpiece.json'];
  const out = {};
  for (const f of files) {
    const file = path.join(dir, f);
    const tok = Tokenizer.fromFile(file);
    const ids = [];
    for (let i = 0; i < strings.length; i += 8192) {
      const encs = await tok.encodeBatch(strings.slice(i, i + 8192), { addSpecialTokens: false });
      for (const e of encs) ids.push(Array.from(e.getIds()));
    }
    out[file] = { strings, ids };
    console.log(`${f}: ${strings.length} strings through HF tokenizers`);
  }
  const target = path.join(workdir, 'unicode_sweep.json');
  fs.writeFileSync(target, JSON.stringify(out));
  const r = spawnSync(unitTests, ['[unicode_sweep]'], {
    stdio: 'inherit', env: Object.assign({}, process.env, { HFTRAIN_UNICODE_SWEEP: target }),
  });
  process.exit(r.status === null ? 1 : r.status);
}
main().catch((e) => { console.error(e); process.exit(1); });
