#!/usr/bin/env python3
"""Independent reader of TensorBoard event files, standard library only.

Parses the TFRecord framing (uint64 length, masked CRC-32C of the length, data, masked CRC-32C of the
data), verifies both CRCs, and decodes tensorflow.Event / Summary protos from the protobuf wire format
by hand. Field numbers are those of tensorflow/core/util/event.proto and framework/summary.proto:
Event{wall_time=1 double, step=2 int64, file_version=3 string, summary=5 Summary},
Summary{value=1 repeated Value}, Value{tag=1, simple_value=2 float, tensor=8 TensorProto,
metadata=9 SummaryMetadata}, SummaryMetadata{plugin_data=1 {plugin_name=1, content=2}},
TensorProto{dtype=1, tensor_shape=2, string_val=8}.

Usage: tensorboard_reader.py PATH   (an event file, or a directory searched for events.out.tfevents.*)
Prints one JSON object {"files": [{"path", "records", "events": [...]}]}; exits 1 on any corruption.
"""
import json
import os
import struct
import sys


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class Corrupt(Exception):
    pass


def read_records(blob):
    pos = 0
    records = []
    while pos < len(blob):
        if pos + 12 > len(blob):
            raise Corrupt("truncated record header at byte %d" % pos)
        header = blob[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", blob[pos + 8:pos + 12])
        if masked_crc32c(header) != length_crc:
            raise Corrupt("length CRC mismatch at byte %d" % pos)
        start = pos + 12
        end = start + length
        if end + 4 > len(blob):
            raise Corrupt("truncated record data at byte %d" % pos)
        data = blob[start:end]
        (data_crc,) = struct.unpack("<I", blob[end:end + 4])
        if masked_crc32c(data) != data_crc:
            raise Corrupt("data CRC mismatch in record at byte %d" % pos)
        records.append(data)
        pos = end + 4
    return records


def read_varint(buf, pos):
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise Corrupt("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise Corrupt("varint too long")


def fields(buf):
    """Yields (field_number, wire_type, value): int for varint, bytes for the rest."""
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = read_varint(buf, pos)
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise Corrupt("unsupported wire type %d" % wire)
        if pos > len(buf):
            raise Corrupt("field %d runs past the end of its message" % number)
        yield number, wire, value


def to_int64(v):
    return v - (1 << 64) if v >= (1 << 63) else v


def decode_value(buf):
    out = {}
    for number, wire, v in fields(buf):
        if number == 1 and wire == 2:
            out["tag"] = v.decode("utf-8")
        elif number == 2 and wire == 5:
            out["simple_value"] = struct.unpack("<f", v)[0]
        elif number == 9 and wire == 2:
            for n2, w2, v2 in fields(v):
                if n2 == 1 and w2 == 2:
                    for n3, w3, v3 in fields(v2):
                        if n3 == 1 and w3 == 2:
                            out["plugin_name"] = v3.decode("utf-8")
        elif number == 8 and wire == 2:
            tensor = {"string_val": [], "dims": []}
            for n2, w2, v2 in fields(v):
                if n2 == 1 and w2 == 0:
                    tensor["dtype"] = v2
                elif n2 == 2 and w2 == 2:
                    for n3, w3, v3 in fields(v2):
                        if n3 == 2 and w3 == 2:
                            size = 0
                            for n4, w4, v4 in fields(v3):
                                if n4 == 1 and w4 == 0:
                                    size = to_int64(v4)
                            tensor["dims"].append(size)
                elif n2 == 8 and w2 == 2:
                    tensor["string_val"].append(v2.decode("utf-8"))
            out["tensor"] = tensor
    return out


def decode_event(buf):
    event = {"wall_time": None, "step": 0}
    for number, wire, v in fields(buf):
        if number == 1 and wire == 1:
            event["wall_time"] = struct.unpack("<d", v)[0]
        elif number == 2 and wire == 0:
            event["step"] = to_int64(v)
        elif number == 3 and wire == 2:
            event["file_version"] = v.decode("utf-8")
        elif number == 5 and wire == 2:
            event["values"] = [decode_value(v2) for n2, w2, v2 in fields(v) if n2 == 1 and w2 == 2]
    return event


def read_event_file(path):
    with open(path, "rb") as f:
        blob = f.read()
    records = read_records(blob)
    return {"path": path, "records": len(records), "events": [decode_event(r) for r in records]}


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    target = sys.argv[1]
    paths = []
    if os.path.isdir(target):
        for root, _, names in os.walk(target):
            paths += [os.path.join(root, n) for n in names if n.startswith("events.out.tfevents.")]
    else:
        paths = [target]
    try:
        files = [read_event_file(p) for p in sorted(paths)]
    except (Corrupt, UnicodeDecodeError) as e:
        print("corrupt event file: %s" % e, file=sys.stderr)
        return 1
    json.dump({"files": files}, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
