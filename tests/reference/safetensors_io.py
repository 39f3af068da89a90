# The safetensors format written and read by the reference scripts themselves (no safetensors package):
# 8-byte little-endian header length, JSON header {name: {dtype, shape, data_offsets}} with optional
# "__metadata__", then the raw little-endian tensor bytes. F32, F64, I64, U8 and I8 tensors.
import json
import struct

import torch

DTYPES = {torch.float32: ("F32", "f", 4), torch.float64: ("F64", "d", 8), torch.int64: ("I64", "q", 8), torch.uint8: ("U8", "B", 1),
          torch.int8: ("I8", "b", 1)}
BY_CODE = {code: (dtype, fmt, size) for dtype, (code, fmt, size) in DTYPES.items()}


def write_safetensors(path, named, metadata=None):
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, t in named:
        t = t.detach().contiguous()
        if t.dtype not in DTYPES:
            raise RuntimeError("%s: tensor %s has dtype %s (F32, F64, I64, U8 or I8 only)" % (path, name, t.dtype))
        code, fmt, _ = DTYPES[t.dtype]
        blob = struct.pack("<%d%s" % (t.numel(), fmt), *t.flatten().tolist())
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text.encode("utf-8"))
        for blob in blobs:
            f.write(blob)


def read_safetensors(path):
    """Returns (tensors by name, metadata or None)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        if e["dtype"] not in BY_CODE:
            raise RuntimeError("%s: tensor %s has dtype %s" % (path, name, e["dtype"]))
        dtype, fmt, size = BY_CODE[e["dtype"]]
        b, en = e["data_offsets"]
        vals = struct.unpack("<%d%s" % ((en - b) // size, fmt), data[base + b:base + en])
        out[name] = torch.tensor(vals, dtype=dtype).reshape(e["shape"])
    return out, header.get("__metadata__")
