// Writes parquet files and datasets.save_to_disk-style Arrow stream folders with independent writers
// (parquet-wasm: the Rust parquet crate; apache-arrow: Arrow's JavaScript RecordBatchStreamWriter) plus the
// rows they hold as JSON, for tests/integration/test_columnar_data.cpp.
//
// Usage: NODE_PATH=/opt/hftrain-npm/node_modules node columnar_fixtures.js <out_dir>
// Writes into <out_dir>: expected.json (the rows), parquet/<case>.parquet (one file per writer setting:
// codec x data page version x dictionary or plain or DELTA encodings, several row groups and pages),
// hub/data/{train,validation}-0000N-of-0000M.parquet (a Hub dataset's shards), saved/ (a Dataset saved by
// save_to_disk: two .arrow shards, state.json, dataset_info.json), dict/ (a DatasetDict: dataset_dict.json,
// train/ and validation/), corrupt/ (truncated, bad magic and damaged-page files) and lm.jsonl /
// lm.parquet (the same text rows for a training comparison).
"use strict";
const fs = require("fs");
const path = require("path");
const arrow = require("apache-arrow");
const pq = require("parquet-wasm");

const out = process.argv[2];
if (!out) throw new Error("usage: columnar_fixtures.js <out_dir>");

// ---- the rows ------------------------------------------------------------------------------------
const roles = ["system", "user", "assistant"];
const words = ["alpha", "beta", "gamma", "delta", "héllo", "naïve", "日本", "x"];
function rowAt(i) {
  const text = i % 7 === 3 ? null : `${words[i % 8]} ${words[(i * 3) % 8]} row ${i}`;
  const tags = i % 5 === 0 ? null : i % 5 === 1 ? [] : Array.from({length: i % 4}, (_, k) => (k === 1 && i % 3 === 0 ? null : `t${i}_${k}`));
  const messages = i % 9 === 4 ? null : Array.from({length: 1 + (i % 3)}, (_, k) => ({
    role: roles[k % 3], content: k === 2 && i % 2 === 0 ? null : `turn ${k} of ${i}: ${words[(i + k) % 8]}`}));
  return {
    text, id: i * 1000003 - 5, small: (i % 11) - 5, score: i % 6 === 2 ? null : i / 8, flag: i % 3 === 0,
    ratio: Math.fround(i / 4), tags, messages, label: ["neg", "pos", "neutral"][i % 3],
  };
}
const N = 37;
const rows = Array.from({length: N}, (_, i) => rowAt(i));

const msgType = new arrow.Struct([new arrow.Field("role", new arrow.Utf8(), true), new arrow.Field("content", new arrow.Utf8(), true)]);
const types = {
  text: new arrow.Utf8(), id: new arrow.Int64(), small: new arrow.Int32(), score: new arrow.Float64(), flag: new arrow.Bool(),
  ratio: new arrow.Float32(), tags: new arrow.List(new arrow.Field("item", new arrow.Utf8(), true)),
  messages: new arrow.List(new arrow.Field("item", msgType, true)), label: new arrow.Utf8(),
};
// The Arrow streams carry `label` dictionary-encoded (as pyarrow writes a dictionary column).
const streamTypes = {...types, label: new arrow.Dictionary(new arrow.Utf8(), new arrow.Int32())};
function arrowTable(rs, cols = Object.keys(types), typeOf = types) {
  const vectors = {};
  for (const c of cols) {
    const vals = rs.map((r) => (c === "id" && r[c] !== null ? BigInt(r[c]) : r[c]));
    vectors[c] = arrow.vectorFromArray(vals, typeOf[c]);
  }
  return new arrow.Table(vectors);
}

// ---- parquet through parquet-wasm ------------------------------------------------------------------
function writeParquet(file, table, configure) {
  let props = new pq.WriterPropertiesBuilder().setMaxRowGroupSize(10).setDataPageSizeLimit(64).setWriteBatchSize(4);
  props = configure(props);
  const wasmTable = pq.Table.fromIPCStream(arrow.tableToIPC(table, "stream"));
  fs.mkdirSync(path.dirname(file), {recursive: true});
  fs.writeFileSync(file, pq.writeParquet(wasmTable, props.build()));
}
const C = pq.Compression, V = pq.WriterVersion, E = pq.Encoding;
const cases = {
  plain_v1_uncompressed: (p) => p.setCompression(C.UNCOMPRESSED).setWriterVersion(V.V1).setDictionaryEnabled(false),
  dict_v1_snappy: (p) => p.setCompression(C.SNAPPY).setWriterVersion(V.V1).setDictionaryEnabled(true),
  dict_v2_gzip: (p) => p.setCompression(C.GZIP).setWriterVersion(V.V2).setDictionaryEnabled(true),
  plain_v2_zstd: (p) => p.setCompression(C.ZSTD).setWriterVersion(V.V2).setDictionaryEnabled(false),
  dict_v1_zstd: (p) => p.setCompression(C.ZSTD).setWriterVersion(V.V1).setDictionaryEnabled(true),
  delta_v2_snappy: (p) => p.setCompression(C.SNAPPY).setWriterVersion(V.V2).setDictionaryEnabled(false)
      .setColumnEncoding("id", E.DELTA_BINARY_PACKED).setColumnEncoding("small", E.DELTA_BINARY_PACKED)
      .setColumnEncoding("text", E.DELTA_BYTE_ARRAY).setColumnEncoding("label", E.DELTA_LENGTH_BYTE_ARRAY),
};
for (const [name, configure] of Object.entries(cases)) writeParquet(path.join(out, "parquet", name + ".parquet"), arrowTable(rows), configure);

// A Hub dataset's shards: data/train-0000N-of-00002.parquet and data/validation-00000-of-00001.parquet.
const snappy = (p) => p.setCompression(C.SNAPPY);
writeParquet(path.join(out, "hub/data/train-00000-of-00002.parquet"), arrowTable(rows.slice(0, 20)), snappy);
writeParquet(path.join(out, "hub/data/train-00001-of-00002.parquet"), arrowTable(rows.slice(20, 30)), snappy);
writeParquet(path.join(out, "hub/data/validation-00000-of-00001.parquet"), arrowTable(rows.slice(30)), snappy);
fs.writeFileSync(path.join(out, "hub/README.md"), "# a dataset card\n");

// ---- Arrow streams laid out as datasets.save_to_disk -----------------------------------------------
function writeStream(file, table, batchRows) {
  const writer = new arrow.RecordBatchStreamWriter();
  for (let at = 0; at < table.numRows; at += batchRows) for (const b of table.slice(at, at + batchRows).batches) writer.write(b);
  writer.finish();
  fs.mkdirSync(path.dirname(file), {recursive: true});
  fs.writeFileSync(file, writer.toUint8Array(true));
}
function saveToDisk(dir, rs, shards, split) {
  const files = [];
  const per = Math.ceil(rs.length / shards);
  for (let s = 0; s < shards; ++s) {
    const name = `data-${String(s).padStart(5, "0")}-of-${String(shards).padStart(5, "0")}.arrow`;
    writeStream(path.join(dir, name), arrowTable(rs.slice(s * per, (s + 1) * per), Object.keys(types), streamTypes), 6);
    files.push({filename: name});
  }
  fs.writeFileSync(path.join(dir, "state.json"), JSON.stringify({
    _data_files: files, _fingerprint: "0123456789abcdef", _format_columns: null, _format_kwargs: {}, _format_type: null,
    _output_all_columns: false, _split: split}, null, 2));
  fs.writeFileSync(path.join(dir, "dataset_info.json"), JSON.stringify({citation: "", description: "", features: {}, homepage: "", license: ""}));
}
saveToDisk(path.join(out, "saved"), rows, 2, "train");
// state.json lists the shards in its own order: the second shard first here, and the reader must follow it.
const state = JSON.parse(fs.readFileSync(path.join(out, "saved/state.json")));
state._data_files.reverse();
fs.mkdirSync(path.join(out, "saved_reordered"), {recursive: true});
for (const f of fs.readdirSync(path.join(out, "saved"))) fs.copyFileSync(path.join(out, "saved", f), path.join(out, "saved_reordered", f));
fs.writeFileSync(path.join(out, "saved_reordered/state.json"), JSON.stringify(state));
saveToDisk(path.join(out, "dict/train"), rows.slice(0, 30), 2, "train");
saveToDisk(path.join(out, "dict/validation"), rows.slice(30), 1, "validation");
fs.writeFileSync(path.join(out, "dict/dataset_dict.json"), JSON.stringify({splits: ["train", "validation"]}));

// ---- corrupt files --------------------------------------------------------------------------------
const good = fs.readFileSync(path.join(out, "parquet/plain_v1_uncompressed.parquet"));
fs.mkdirSync(path.join(out, "corrupt"), {recursive: true});
fs.writeFileSync(path.join(out, "corrupt/truncated.parquet"), good.subarray(0, good.length - 100));
fs.writeFileSync(path.join(out, "corrupt/bad_magic.parquet"), Buffer.concat([Buffer.from("PAR0"), good.subarray(4)]));
// One string column, uncompressed: its first page's bytes overwritten after the magic.
writeParquet(path.join(out, "corrupt/damaged_page.parquet"), arrowTable(rows, ["text"]),
             (p) => p.setCompression(C.UNCOMPRESSED).setDictionaryEnabled(false));
const damaged = fs.readFileSync(path.join(out, "corrupt/damaged_page.parquet"));
damaged.fill(0xff, 4, 40);
fs.writeFileSync(path.join(out, "corrupt/damaged_page.parquet"), damaged);
const stream = fs.readFileSync(path.join(out, "saved/data-00000-of-00002.arrow"));
fs.writeFileSync(path.join(out, "corrupt/truncated.arrow"), stream.subarray(0, stream.length - 200));

// ---- the same text rows as JSON Lines and parquet, for a training comparison -----------------------
const lm = rows.filter((r) => r.text !== null).map((r) => ({text: r.text + " " + r.text, id: r.id}));
fs.writeFileSync(path.join(out, "lm.jsonl"), lm.map((r) => JSON.stringify(r)).join("\n") + "\n");
writeParquet(path.join(out, "lm.parquet"), arrowTable(lm, ["text", "id"]), snappy);

fs.writeFileSync(path.join(out, "expected.json"), JSON.stringify(rows));
console.log(`columnar fixtures: ${Object.keys(cases).length} parquet cases, ${N} rows`);
