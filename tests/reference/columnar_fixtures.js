// Writes parquet files and datasets.save_to_disk-style Arrow stream folders with independent writers
// (parquet-wasm: the Rust parquet crate; apache-arrow: Arrow's JavaScript RecordBatchStreamWriter) plus the
// rows they hold as JSON, for tests/integration/test_columnar_data.cpp.
//
// Usage: NODE_PATH=/opt/hftrain-npm/node_modules node columnar_fixtures.js <out_dir>
// Writes into <out_dir>: expected.json (the rows), parquet/<case>.parquet (one file per writer setting:
// codec x data page version x dictionary or plain or DELTA encodings, several row groups and pages, and the
// dictionary file relabelled with the old PLAIN_DICTIONARY id),
// hub/data/{train,validation}-0000N-of-0000M.parquet (a Hub dataset's shards), saved/ (a Dataset saved by
// save_to_disk: two .arrow shards, state.json, dataset_info.json), dict/ (a DatasetDict: dataset_dict.json,
// train/ and validation/), zstd/ (saved/ with zstd-compressed record batches; only where the zstd command
// is installed), corrupt/ (truncated, bad magic and damaged-page files) and lm.jsonl /
// lm.parquet (the same text rows for a training comparison).
"use strict";
const fs = require("fs");
const path = require("path");
const arrow = require("apache-arrow");
const pq = require("parquet-wasm");
const {execFileSync} = require("child_process");

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

// ---- PLAIN_DICTIONARY (encoding 2), the dictionary encoding id of parquet-mr 1.x and other format-1.0 writers --
// Neither writer here produces it: the Rust crate writes a PLAIN dictionary page and RLE_DICTIONARY (8) data
// pages, and refuses PLAIN_DICTIONARY as a column encoding. The bytes of such pages are the same under either
// id (the format names PLAIN_DICTIONARY the old name of that layout), so parquet-wasm's dictionary file is
// relabelled: the encoding of every dictionary page and RLE_DICTIONARY data page, and RLE_DICTIONARY in the
// column chunks' encoding lists and page encoding stats, becomes 2. Each id is a one-byte varint (zigzag 0x00,
// 0x10 -> 0x04), so nothing moves. The Thrift compact protocol is read just far enough to find them.
class CompactReader {
  constructor(buf, at) { this.b = buf; this.p = at; }
  varint() {
    let v = 0n, shift = 0n;
    for (;;) {
      const x = this.b[this.p++];
      v |= BigInt(x & 0x7f) << shift;
      if (!(x & 0x80)) return v;
      shift += 7n;
    }
  }
  zigzag() { const v = this.varint(); return Number((v >> 1n) ^ -(v & 1n)); }
  list() {
    const h = this.b[this.p++];
    return [(h >> 4) === 15 ? Number(this.varint()) : h >> 4, h & 15];
  }
  skip(type, inList = false) {
    if (type === 1 || type === 2) this.p += inList ? 1 : 0;
    else if (type === 3) this.p += 1;
    else if (type === 4 || type === 5 || type === 6) this.varint();
    else if (type === 7) this.p += 8;
    else if (type === 8) {
      const n = Number(this.varint());
      this.p += n;
    }
    else if (type === 9 || type === 10) { const [n, t] = this.list(); for (let i = 0; i < n; ++i) this.skip(t, true); }
    else if (type === 11) {
      const n = Number(this.varint());
      if (n) { const kv = this.b[this.p++]; for (let i = 0; i < n; ++i) { this.skip(kv >> 4, true); this.skip(kv & 15, true); } }
    } else if (type === 12) this.struct(() => false);
    else throw new Error(`thrift type ${type} at ${this.p}`);
  }
  // visit(field id, type) reads the value and returns true, or returns false to have it skipped.
  struct(visit) {
    for (let last = 0;;) {
      const h = this.b[this.p++];
      if (h === 0) return;
      const id = h >> 4 ? last + (h >> 4) : this.zigzag();
      last = id;
      if (!visit(id, h & 15)) this.skip(h & 15);
    }
  }
  // An i32 field whose value `from` (one byte) becomes `to`.
  relabel(from, to) {
    const at = this.p, v = this.zigzag();
    if (v === from) this.b[at] = to * 2;
    return true;
  }
}
function relabelDictionaryPages(file) {
  const b = fs.readFileSync(file);
  const r = new CompactReader(b, b.length - 8 - b.readUInt32LE(b.length - 8));  // FileMetaData
  const chunks = [];  // [first page offset, total compressed size] of each column chunk
  const each = (visit) => { const [n] = r.list(); for (let i = 0; i < n; ++i) visit(); };
  const field = (want, read) => (id) => (id === want ? (read(), true) : false);
  const columnMeta = () => {
    let data = 0, dict = null, size = 0;
    r.struct((id) => {
      if (id === 2) each(() => r.relabel(8, 2));  // encodings
      else if (id === 13) each(() => {  // encoding_stats: {page_type, encoding, count}
        let pageType = 0;
        r.struct((sid) => (sid === 1 ? ((pageType = r.zigzag()), true) : sid === 2 ? r.relabel(pageType === 2 ? 0 : 8, 2) : false));
      });
      else if (id === 7) size = Number(r.varint() >> 1n);  // total_compressed_size
      else if (id === 9) data = Number(r.varint() >> 1n);  // data_page_offset
      else if (id === 11) dict = Number(r.varint() >> 1n);  // dictionary_page_offset
      else return false;
      return true;
    });
    chunks.push([dict ?? data, size]);
  };
  // row_groups -> columns -> meta_data
  r.struct(field(4, () => each(() => r.struct(field(1, () => each(() => r.struct(field(3, columnMeta))))))));
  for (const [start, size] of chunks) {
    for (let at = start; at < start + size;) {
      const page = new CompactReader(b, at);
      let pageType = 0, pageSize = 0;
      page.struct((id) => {
        if (id === 1) pageType = page.zigzag();
        else if (id === 3) pageSize = page.zigzag();
        else if (id === 5 || id === 7) page.struct((hid) => (hid === 2 ? page.relabel(pageType === 2 ? 0 : 8, 2) : false));
        else return false;
        return true;
      });
      at = page.p + pageSize;
    }
  }
  return b;
}
const dictFile = path.join(out, "parquet", "dict_v1_snappy.parquet");
fs.writeFileSync(path.join(out, "parquet", "plain_dictionary_v1_snappy.parquet"), relabelDictionaryPages(dictFile));

// A Hub dataset's shards: data/train-0000N-of-00002.parquet and data/validation-00000-of-00001.parquet.
const snappy = (p) => p.setCompression(C.SNAPPY);
writeParquet(path.join(out, "hub/data/train-00000-of-00002.parquet"), arrowTable(rows.slice(0, 20)), snappy);
writeParquet(path.join(out, "hub/data/train-00001-of-00002.parquet"), arrowTable(rows.slice(20, 30)), snappy);
writeParquet(path.join(out, "hub/data/validation-00000-of-00001.parquet"), arrowTable(rows.slice(30)), snappy);
fs.writeFileSync(path.join(out, "hub/README.md"), "# a dataset card\n");

// ---- Arrow streams laid out as datasets.save_to_disk -----------------------------------------------
function writeStream(file, table, batchRows, options = {}) {
  compressed.length = 0;
  const writer = new arrow.RecordBatchStreamWriter(options);
  for (let at = 0; at < table.numRows; at += batchRows) for (const b of table.slice(at, at + batchRows).batches) writer.write(b);
  writer.finish();
  fs.mkdirSync(path.dirname(file), {recursive: true});
  fs.writeFileSync(file, fixLengthPrefixes(writer.toUint8Array(true)));
}
// apache-arrow 21.2.0 prefixes each compressed body buffer with the compressed length where the format wants
// the uncompressed one (fixed upstream in arrow-js pull request 470, not yet released; PyArrow refuses such
// streams too). Every buffer the codec compressed is recorded, and its prefix is set as the fixed writer sets it.
const compressed = [];  // {frame, raw}: each compressed buffer and its uncompressed length, in writing order
function fixLengthPrefixes(bytes) {
  const out = Buffer.from(bytes);
  let from = 0;
  for (const {frame, raw} of compressed) {
    const prefixed = Buffer.alloc(8 + frame.length);
    prefixed.writeBigInt64LE(BigInt(frame.length));
    prefixed.set(frame, 8);
    const at = out.indexOf(prefixed, from);
    if (at < 0) throw new Error("a compressed buffer is missing from the stream");
    out.writeBigInt64LE(BigInt(raw), at);
    from = at + prefixed.length;
  }
  return out;
}
function saveToDisk(dir, rs, shards, split, options = {}) {
  const files = [];
  const per = Math.ceil(rs.length / shards);
  for (let s = 0; s < shards; ++s) {
    const name = `data-${String(s).padStart(5, "0")}-of-${String(shards).padStart(5, "0")}.arrow`;
    writeStream(path.join(dir, name), arrowTable(rs.slice(s * per, (s + 1) * per), Object.keys(types), streamTypes), 6, options);
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

// ---- zstd-compressed record batches -------------------------------------------------------------------
// Arrow's writer compresses each body buffer with the codec registered for ZSTD (here Debian's zstd command),
// keeping a buffer uncompressed (length -1) where zstd does not make it smaller. Skipped without zstd.
let haveZstd = true;
try {
  execFileSync("zstd", ["--version"], {stdio: "ignore"});
} catch (e) {
  haveZstd = false;
}
if (haveZstd) {
  arrow.compressionRegistry.set(arrow.CompressionType.ZSTD, {encode: (data) => {
    const frame = new Uint8Array(execFileSync("zstd", ["-q", "-c", "-19"], {input: data}));
    if (frame.length < data.length) compressed.push({frame, raw: data.length});  // the writer keeps it
    return frame;
  }});
  saveToDisk(path.join(out, "zstd"), rows, 2, "train", {compressionType: arrow.CompressionType.ZSTD});
}

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
console.log(`columnar fixtures: ${Object.keys(cases).length + 1} parquet cases, ${N} rows`);
