#!/usr/bin/python3
"""st_reference.py -- an independent safetensors reader/writer (json, struct and numpy only)
that makes tg's safetensors fixtures and checks files written by tg.

    /usr/bin/python3 tests/st_reference.py            # (re)write the fixtures below
    /usr/bin/python3 tests/st_reference.py check F..  # validate files (e.g. one tg wrote)

Fixtures (committed; the C tests never run Python):
  tests/fixtures/io_dtypes.safetensors   every dtype, edge values and awkward names, written
      the way the reference implementation (huggingface/safetensors) writes: tensors ordered
      by dtype alignment (largest first) then name, compact JSON, keys in data order, padded
      with spaces to a multiple of 8. tg reads it (values compared with io_safetensors.h), and
      tg_safetensors_save of the same tensors must reproduce it byte for byte.
  tests/fixtures/io_foreign.safetensors  the same tensors laid out differently but validly:
      shuffled keys, indented JSON with \\u escapes (ensure_ascii), "__metadata__" in the middle,
      data in another order and an unpadded header. tg must read the same values.
  tests/fixtures/io_safetensors.h        the expected names, dtypes, shapes, raw little-endian
      bytes and float64 values of those tensors, as C literals.
"""
import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")

# name in the file -> (numpy dtype or None for bfloat16, element size, reference alignment
# rank (the order of the Dtype enum of huggingface/safetensors), tg enum name)
DTYPES = {
    "BOOL": (np.bool_, 1, 0, "TG_BOOL"),
    "U8": (np.uint8, 1, 1, "TG_UINT8"),
    "I8": (np.int8, 1, 2, "TG_INT8"),
    "I16": (np.int16, 2, 5, "TG_INT16"),
    "U16": (np.uint16, 2, 6, "TG_UINT16"),
    "F16": (np.float16, 2, 7, "TG_FLOAT16"),
    "BF16": (None, 2, 8, "TG_BFLOAT16"),
    "I32": (np.int32, 4, 9, "TG_INT32"),
    "U32": (np.uint32, 4, 10, "TG_UINT32"),
    "F32": (np.float32, 4, 11, "TG_FLOAT32"),
    "F64": (np.float64, 8, 12, "TG_FLOAT64"),
    "I64": (np.int64, 8, 13, "TG_INT64"),
    "U64": (np.uint64, 8, 14, "TG_UINT64"),
}
MAX_HEADER = 100_000_000


# ---------------------------------------------------------------- tensors as (dtype, shape, bytes)

def bf16_bytes(values):
    """float32 values -> bfloat16 bits (round to nearest even), little-endian bytes."""
    bits = np.asarray(values, dtype="<f4").view("<u4").astype(np.uint64)
    nan = np.isnan(np.asarray(values, dtype=np.float32))
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    out = np.where(nan, (bits >> 16) | 0x40, rounded).astype("<u2")
    return out.tobytes()


def bf16_values(raw):
    bits = np.frombuffer(raw, dtype="<u2").astype("<u4") << 16
    return bits.view("<f4").astype(np.float64)


def tensor(dtype, shape, values):
    if dtype == "BF16":
        return (dtype, list(shape), bf16_bytes(values))
    arr = np.array(values, dtype=DTYPES[dtype][0]).reshape(shape)
    return (dtype, list(shape), arr.astype(arr.dtype.newbyteorder("<")).tobytes())


def as_float64(dtype, raw):
    if dtype == "BF16":
        return bf16_values(raw)
    return np.frombuffer(raw, dtype=np.dtype(DTYPES[dtype][0]).newbyteorder("<")).astype(np.float64)


def fixture_tensors():
    inf, nan = float("inf"), float("nan")
    return {
        "bool": tensor("BOOL", (5,), [True, False, True, True, False]),
        "u8": tensor("U8", (2, 3), [0, 1, 127, 128, 254, 255]),
        "i8": tensor("I8", (6,), [-128, -1, 0, 1, 100, 127]),
        "i16": tensor("I16", (2, 2), [-32768, -2, 300, 32767]),
        "u16": tensor("U16", (3,), [0, 1000, 65535]),
        "i32": tensor("I32", (2, 2, 1), [-2147483648, -7, 123456789, 2147483647]),
        "u32": tensor("U32", (2,), [0, 4294967295]),
        "i64": tensor("I64", (3,), [-2**63, -1, 2**63 - 1]),
        "u64": tensor("U64", (2,), [0, 2**64 - 1]),
        "f16": tensor("F16", (2, 4), [0.0, -0.0, 1.5, -2.25, 65504.0, 6e-8, inf, nan]),
        "bf16": tensor("BF16", (4,), [1.0, -3.140625, 1e30, -inf]),
        "f32": tensor("F32", (2, 3), [0.1, -1e-40, 3.4e38, -inf, nan, 1.0]),
        "f64": tensor("F64", (2, 2), [np.pi, -1e-310, 1e308, 0.5]),
        "layer.0.weight": tensor("F32", (3, 2), [1, 2, 3, 4, 5, 6]),
        "Zlayer.bias": tensor("F32", (3,), [-1, 0, 1]),
        "scalar": tensor("F64", (), [42.5]),
        "empty": tensor("F32", (0, 3), []),
        'quote"back\\slash/': tensor("I32", (1,), [5]),
        "tab\tnew\nline\x01\x1f": tensor("U8", (2,), [9, 10]),
        "\u00fcn\u00efcode \U0001F600": tensor("I16", (1,), [-5]),
    }


# ---------------------------------------------------------------- writing

def header_entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}  # reference key order


def write_reference(path, tensors):
    """The layout of huggingface/safetensors' serialize(): sort by (alignment desc, name)."""
    names = sorted(tensors, key=lambda n: (-DTYPES[tensors[n][0]][2], n.encode("utf-8")))
    header, offset = {}, 0
    for name in names:
        dtype, shape, raw = tensors[name]
        header[name] = header_entry(dtype, shape, offset, offset + len(raw))
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(tensors[n][2] for n in names))


def write_foreign(path, tensors):
    """A valid but different layout: other key and data orders, escapes, whitespace, metadata."""
    names = sorted(tensors, key=lambda n: n[::-1])
    data_order = list(reversed(names))
    offsets, offset = {}, 0
    for name in data_order:
        offsets[name] = (offset, offset + len(tensors[name][2]))
        offset += len(tensors[name][2])
    header = {}
    for i, name in enumerate(names):
        if i == len(names) // 2:
            header["__metadata__"] = {"format": "pt", "note": "written by st_reference.py \u2713"}
        dtype, shape, _ = tensors[name]
        header[name] = {"data_offsets": list(offsets[name]), "shape": shape, "dtype": dtype}
    text = json.dumps(header, indent=1, ensure_ascii=True).encode("ascii")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(tensors[n][2] for n in data_order))


# ---------------------------------------------------------------- reading (strict)

def read(path):
    """Parse and validate a safetensors file; returns ({name: (dtype, shape, bytes)}, metadata)."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError("file too short")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > MAX_HEADER or 8 + n > len(blob):
        raise ValueError("bad header length %d" % n)

    def no_duplicates(pairs):
        keys = [k for k, _ in pairs]
        if len(keys) != len(set(keys)):
            raise ValueError("duplicate keys")
        return dict(pairs)

    header = json.loads(blob[8:8 + n].decode("utf-8"), object_pairs_hook=no_duplicates)
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not all(isinstance(v, str) for v in metadata.values()):
        raise ValueError("metadata values must be strings")
    data = blob[8 + n:]
    entries = sorted(header.items(), key=lambda kv: tuple(kv[1]["data_offsets"]))
    covered, out = 0, {}
    for name, info in entries:
        if set(info) != {"dtype", "shape", "data_offsets"}:
            raise ValueError("%r: bad keys %s" % (name, sorted(info)))
        dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        if dtype not in DTYPES or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise ValueError("%r: bad dtype or shape" % name)
        if begin != covered or end - begin != int(np.prod(shape, dtype=np.int64)) * DTYPES[dtype][1]:
            raise ValueError("%r: bad data_offsets %r" % (name, info["data_offsets"]))
        out[name] = (dtype, shape, data[begin:end])
        covered = end
    if covered != len(data):
        raise ValueError("data section has %d bytes, tensors cover %d" % (len(data), covered))
    return out, metadata


def check(paths):
    """Validate files (e.g. written by tg) and say whether they are in the reference layout."""
    ok = True
    for path in paths:
        try:
            tensors, metadata = read(path)
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
            print("%s: INVALID: %s" % (path, e))
            ok = False
            continue
        tmp = path + ".reference"
        write_reference(tmp, tensors)
        with open(tmp, "rb") as a, open(path, "rb") as b:
            canonical = a.read() == b.read()
        os.remove(tmp)
        print("%s: valid, %d tensors, metadata %r, reference layout: %s"
              % (path, len(tensors), metadata, "yes" if canonical else "NO"))
        for name, (dtype, shape, raw) in tensors.items():
            print("  %-24r %-4s %-12s %s" % (name, dtype, tuple(shape), as_float64(dtype, raw)[:6]))
        ok = ok and canonical
    return ok


# ---------------------------------------------------------------- the C header

def c_string(s):
    out = '"'
    for b in s.encode("utf-8"):
        ch = chr(b)
        if ch in '"\\':
            out += "\\" + ch
        elif 0x20 <= b < 0x7F:
            out += ch
        else:
            out += '\\%03o' % b  # octal escapes cannot swallow the following characters
    return out + '"'


def c_double(v):
    if np.isnan(v):
        return "NAN"
    if np.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    return float(v).hex()


def write_header(path, tensors):
    lines = [
        "/* io_safetensors.h -- generated by tests/st_reference.py; do not edit.",
        " * The tensors of io_dtypes.safetensors and io_foreign.safetensors: name, dtype,",
        " * shape, raw little-endian bytes and the values as float64 (numpy's conversion). */",
        "#include <math.h>",
        "#include <stdint.h>",
        "typedef struct io_st_fixture {",
        "  const char *name;",
        "  tg_dtype dtype;",
        "  int ndim;",
        "  int64_t shape[4];",
        "  int nbytes;",
        "  const unsigned char *bytes;",
        "  const double *values;",
        "} io_st_fixture;",
        "",
    ]
    rows = []
    for i, (name, (dtype, shape, raw)) in enumerate(tensors.items()):
        lines.append("static const unsigned char io_st_bytes_%d[] = {%s};"
                     % (i, ", ".join(str(b) for b in raw) or "0"))
        vals = as_float64(dtype, raw)
        lines.append("static const double io_st_values_%d[] = {%s};"
                     % (i, ", ".join(c_double(v) for v in vals) or "0"))
        dims = ", ".join(str(d) for d in shape) or "0"
        rows.append("    {%s, %s, %d, {%s}, %d, io_st_bytes_%d, io_st_values_%d},"
                    % (c_string(name), DTYPES[dtype][3], len(shape), dims, len(raw), i, i))
    lines += ["", "static const io_st_fixture io_st_fixtures[] = {"] + rows + ["};", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def generate():
    tensors = fixture_tensors()
    dtypes_path = os.path.join(FIXTURES, "io_dtypes.safetensors")
    foreign_path = os.path.join(FIXTURES, "io_foreign.safetensors")
    write_reference(dtypes_path, tensors)
    write_foreign(foreign_path, tensors)
    write_header(os.path.join(FIXTURES, "io_safetensors.h"), tensors)
    for path in (dtypes_path, foreign_path):  # the reader agrees with the writers
        back, _ = read(path)
        assert back == {k: (d, s, r) for k, (d, s, r) in tensors.items()}, path
    print("wrote %s, %s and io_safetensors.h" % (dtypes_path, foreign_path))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "check":
        sys.exit(0 if check(sys.argv[2:]) else 1)
    generate()
