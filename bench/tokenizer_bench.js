// The HF tokenizers side of bench/tokenizer_bench.cpp: the same rows (code points of TEXT_FILE, repeated), encoded
// by HF tokenizers' native binding (npm package `tokenizers`), best of --repeats. Encodes without special tokens.
// Usage: NODE_PATH=<folder holding node_modules> node bench/tokenizer_bench.js TOKENIZER_JSON TEXT_FILE [LENGTH ...]
const fs = require('fs');
const { Tokenizer } = require('tokenizers');

async function main() {
  const args = process.argv.slice(2);
  let repeats = 3;
  const lengths = [];
  for (let i = 2; i < args.length; ++i) {
    if (args[i] === '--repeats') repeats = Number(args[++i]);
    else lengths.push(Number(args[i]));
  }
  if (!lengths.length) lengths.push(1000, 8000, 32000, 128000);
  const tok = Tokenizer.fromFile(args[0]);
  const cps = Array.from(fs.readFileSync(args[1], 'utf8'));
  console.log('chars\tids\tseconds');
  for (const n of lengths) {
    let row = '';
    for (let k = 0; k < n; ++k) row += cps[k % cps.length];
    let best = Infinity, ids = 0;
    for (let r = 0; r < repeats; ++r) {
      const t0 = process.hrtime.bigint();
      const enc = await tok.encode(row, null, { addSpecialTokens: false });
      best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
      ids = enc.getIds().length;
    }
    console.log(`${n}\t${ids}\t${best.toFixed(4)}`);
  }
}
main().catch((e) => { console.error(e); process.exit(1); });
