// Writes expected_ids.json next to the tokenizer.json files of a folder: the ids HF tokenizers (the npm package
// of its native binding, installed by scripts/install-deps.sh) gives for each string of strings.json, without
// special tokens. Usage: NODE_PATH=<folder holding node_modules> node expected_ids.js DATA_DIR [--check]
// With --check, compares against the committed expected_ids.json instead of writing it (exit 1 on a difference).
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('tokenizers');

async function main() {
  const dir = process.argv[2];
  const check = process.argv.includes('--check');
  const strings = JSON.parse(fs.readFileSync(path.join(dir, 'strings.json'), 'utf8'));
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.json') && f !== 'strings.json' && f !== 'expected_ids.json').sort();
  const out = {};
  for (const f of files) {
    const tok = Tokenizer.fromFile(path.join(dir, f));
    out[f] = [];
    for (const s of strings) {
      const enc = await tok.encode(s, null, { addSpecialTokens: false });
      out[f].push(Array.from(enc.getIds()));
    }
  }
  const text = JSON.stringify(out) + '\n';
  const target = path.join(dir, 'expected_ids.json');
  if (check) {
    if (fs.readFileSync(target, 'utf8') !== text) {
      console.error('expected_ids.json differs from what HF tokenizers gives now');
      process.exit(1);
    }
    console.log(`expected_ids.json matches HF tokenizers (${files.length} files x ${strings.length} strings)`);
  } else {
    fs.writeFileSync(target, text);
    console.log(`wrote ${target} (${files.length} files x ${strings.length} strings)`);
  }
}
main().catch((e) => { console.error(e); process.exit(1); });
