#!/usr/bin/env python3
"""Generate tests/fixtures/elementwise.h: inputs and numpy/torch reference outputs for
tests/test_elementwise.c.

Run from the repository root with /usr/bin/python3 (needs numpy and torch):

    /usr/bin/python3 tests/gen_fixtures_elementwise.py

The dtype rules are those of docs/semantics.md, not numpy's own (e.g. uint64 + int64 is
float64, int / int is float32, *_s scalars are weak).  Every value is computed exactly or
in float64 and then rounded to the result dtype:
  * float16 bit patterns come from numpy (float64 -> float16 rounds directly),
  * bfloat16 bit patterns come from torch (from a float32 value; the rounding to bfloat16
    itself is done exactly here and cross-checked against torch's float32 -> bfloat16),
  * float32/float64 bit patterns come from numpy.
Floats are stored as their bit patterns (uint16/32/64), so -0.0, NaN and denormals survive.
"""
import math
import os
import sys
from fractions import Fraction

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "elementwise.h")

# ----------------------------------------------------------------------------- dtypes
DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "bfloat16", "float32", "float64"]          # ABI order of tg_dtype
ENUM = {d: "TG_" + d.upper() for d in DTYPES}
SIZE = {"bool": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint8": 1, "uint16": 2,
        "uint32": 4, "uint64": 8, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
FLOATS = ("float16", "bfloat16", "float32", "float64")
SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
INTS = SIGNED + UNSIGNED
SIGNED_OF_SIZE = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}
UNSIGNED_OF_SIZE = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}
SHORT = {"bool": "b", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
         "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
         "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64"}


def is_float(d):
    return d in FLOATS


def int_range(d):
    if d == "bool":
        return 0, 1
    bits = 8 * SIZE[d]
    if d in SIGNED:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def promote(a, b):
    """tg_promote_types, from the table in docs/semantics.md."""
    if a == b:
        return a
    if a == "bool":
        return b
    if b == "bool":
        return a
    fa, fb = is_float(a), is_float(b)
    if fa and fb:
        if {a, b} == {"float16", "bfloat16"}:
            return "float32"
        return a if SIZE[a] > SIZE[b] else b
    if fa:
        return a
    if fb:
        return b
    sa, sb = a in SIGNED, b in SIGNED
    if sa == sb:
        return a if SIZE[a] > SIZE[b] else b
    s, u = (a, b) if sa else (b, a)
    if u == "uint64":
        return "float64"
    if SIZE[s] > SIZE[u]:
        return s
    return SIGNED_OF_SIZE[2 * SIZE[u]]


# ----------------------------------------------------------------- exact float rounding
FMT = {"float16": (11, -14, 15), "bfloat16": (8, -126, 127),
       "float32": (24, -126, 127), "float64": (53, -1022, 1023)}


def round_exact(q, d):
    """Round the exact rational q to dtype d, nearest-even, with overflow to inf."""
    p, emin, emax = FMT[d]
    q = Fraction(q)
    if q == 0:
        return 0.0
    s = -1.0 if q < 0 else 1.0
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    e = max(e, emin)
    ulp = Fraction(2) ** (e - p + 1)
    v = round(a / ulp) * ulp            # Fraction.__round__ is half-to-even
    if v >= Fraction(2) ** (emax + 1):
        return s * math.inf
    return math.copysign(float(v), s)


def round_float(x, d):
    """Round the float64 value x to dtype d (result is a Python float)."""
    x = float(x)
    if math.isnan(x) or math.isinf(x) or x == 0 or d == "float64":
        return x
    r = round_exact(Fraction(x), d)
    # cross-check with the libraries the bit patterns come from
    if d == "float16":
        ref = float(np.float64(x).astype(np.float16))
        assert ref == r or (ref == 0 and r == 0), (x, d, r, ref)
    elif d == "float32":
        ref = float(np.float32(x))
        assert ref == r or (ref == 0 and r == 0), (x, d, r, ref)
    elif d == "bfloat16" and float(np.float32(x)) == x:
        ref = torch.tensor([x], dtype=torch.float32).to(torch.bfloat16).float().item()
        assert ref == r or (ref == 0 and r == 0), (x, d, r, ref)
    return r


def int_to_float(v, d):
    """Exact integer -> float dtype d (nearest even)."""
    if v == 0:
        return 0.0
    return round_exact(Fraction(v), d)


# ------------------------------------------------------------------------ encoding
CTYPE = {"bool": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t",
         "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t",
         "uint64": "uint64_t", "float16": "uint16_t", "bfloat16": "uint16_t",
         "float32": "uint32_t", "float64": "uint64_t"}


def float_bits(x, d):
    """Bit pattern of x (already representable in d)."""
    if d == "float64":
        return int(np.array([x], dtype=np.float64).view(np.uint64)[0])
    if d == "float32":
        a = np.array([x], dtype=np.float32)
        assert math.isnan(x) or float(a[0]) == x
        return int(a.view(np.uint32)[0])
    if d == "float16":
        a = np.array([x], dtype=np.float64).astype(np.float16)
        assert math.isnan(x) or float(a[0]) == x
        return int(a.view(np.uint16)[0])
    if d == "bfloat16":
        if math.isnan(x):
            return 0x7FC0 if math.copysign(1.0, x) > 0 else 0xFFC0
        t = torch.tensor([x], dtype=torch.float32).to(torch.bfloat16)
        assert t.float().item() == x
        return int(t.view(torch.int16).item()) & 0xFFFF
    raise ValueError(d)


def bits_to_float(b, d):
    if d == "float64":
        return float(np.array([b], dtype=np.uint64).view(np.float64)[0])
    if d == "float32":
        return float(np.array([b], dtype=np.uint32).view(np.float32)[0])
    if d == "float16":
        return float(np.array([b], dtype=np.uint16).view(np.float16)[0])
    if d == "bfloat16":
        return float(np.array([b << 16], dtype=np.uint32).view(np.float32)[0])
    raise ValueError(d)


def raw_bits(v, d):
    """Element -> unsigned bit pattern of SIZE[d] bytes."""
    if is_float(d):
        return float_bits(v, d)
    return v % (1 << (8 * SIZE[d]))


def from_raw_bits(b, d):
    if is_float(d):
        return bits_to_float(b, d)
    lo, hi = int_range(d)
    if d in SIGNED and b > hi:
        b -= 1 << (8 * SIZE[d])
    assert lo <= b <= hi
    return b


def c_literal(v, d):
    if is_float(d):
        b = float_bits(v, d)
        return {2: "0x%04x", 4: "0x%08x", 8: "0x%016xULL"}[SIZE[d]] % b
    lo, hi = int_range(d)
    assert lo <= v <= hi, (v, d)
    if d == "int64":
        return "INT64_MIN" if v == lo else "%dLL" % v
    if d == "int32" and v == lo:
        return "INT32_MIN"
    if d == "uint64":
        return "%dULL" % v
    if d == "uint32":
        return "%dU" % v
    return "%d" % v


# --------------------------------------------------------------- value canonicalisation
def canon(v, d):
    """A Python value representable in d (floats rounded, ints range-checked)."""
    if is_float(d):
        return round_float(float(v), d)
    if d == "bool":
        return int(bool(v))
    v = int(v)
    lo, hi = int_range(d)
    assert lo <= v <= hi, (v, d)
    return v


def truth(v, d):
    if is_float(d):
        return int(v != 0 or math.isnan(v))
    return int(v != 0)


def convert(v, src, dst):
    """tg_cast semantics for one element."""
    if dst == "bool":
        return truth(v, src)
    if is_float(dst):
        if is_float(src):
            return round_float(v, dst)
        return int_to_float(v, dst)
    # integer destination
    if is_float(src):
        assert math.isfinite(v)
        t = math.trunc(v)
        lo, hi = int_range(dst)
        assert lo <= t <= hi, (v, src, dst)
        return t
    return wrap(v, dst)


def wrap(v, d):
    lo, hi = int_range(d)
    n = 1 << (8 * SIZE[d])
    return ((v - lo) % n) + lo


def emap(f, *arrays):
    """Apply f elementwise over broadcast object arrays; returns an object array."""
    bs = np.broadcast_arrays(*[np.asarray(a, dtype=object) for a in arrays])
    out = np.empty(bs[0].shape if bs else (), dtype=object)
    for idx in np.ndindex(out.shape):
        out[idx] = f(*[b[idx] for b in bs])
    return out


F = np.float64

# ------------------------------------------------------------------------ op semantics
FLOAT_BIN = {
    "add": lambda a, b: F(a) + F(b),
    "sub": lambda a, b: F(a) - F(b),
    "mul": lambda a, b: F(a) * F(b),
    "div": lambda a, b: F(a) / F(b),
    "floordiv": lambda a, b: F(a) // F(b),
    "mod": lambda a, b: F(a) % F(b),
    "pow": lambda a, b: F(a) ** F(b),
    "maximum": lambda a, b: np.maximum(F(a), F(b)),
    "minimum": lambda a, b: np.minimum(F(a), F(b)),
}


def c_idiv(a, b):
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


INT_BIN = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b,
    "idiv": c_idiv,
    "mod": lambda a, b: a % b,
    "pow": lambda a, b: a ** b,
    "maximum": max,
    "minimum": min,
    "bitwise_and": lambda a, b: a & b,
    "bitwise_or": lambda a, b: a | b,
    "bitwise_xor": lambda a, b: a ^ b,
}
CMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
       "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}
LOGICAL = {"logical_and": lambda a, b: a and b, "logical_or": lambda a, b: a or b,
           "logical_xor": lambda a, b: a != b}
# unsigned wrap-around is well defined (numpy and C); signed overflow is never generated
WRAP_OK = {"add", "sub", "mul", "neg", "add_s", "sub_s", "mul_s", "rsub_s", "shl"}


def sigmoid(x):
    x = F(x)
    return F(1) / (F(1) + np.exp(-x))


FLOAT_UN = {
    "neg": lambda x: -F(x), "exp": lambda x: np.exp(F(x)), "exp2": lambda x: np.exp2(F(x)),
    "log": lambda x: np.log(F(x)), "log2": lambda x: np.log2(F(x)),
    "sqrt": lambda x: np.sqrt(F(x)), "rsqrt": lambda x: F(1) / np.sqrt(F(x)),
    "relu": lambda x: np.maximum(F(x), F(0)), "abs": lambda x: np.abs(F(x)),
    "sign": lambda x: np.sign(F(x)), "reciprocal": lambda x: F(1) / F(x),
    "square": lambda x: F(x) * F(x), "sin": lambda x: np.sin(F(x)),
    "cos": lambda x: np.cos(F(x)), "tan": lambda x: np.tan(F(x)),
    "tanh": lambda x: np.tanh(F(x)), "sigmoid": sigmoid,
    "floor": lambda x: np.floor(F(x)), "ceil": lambda x: np.ceil(F(x)),
    "round": lambda x: np.rint(F(x)), "trunc": lambda x: np.trunc(F(x)),
}


def int_un(op, x, d):
    lo, hi = int_range(d)
    if op == "neg":
        return -x
    if op == "abs":
        return abs(x)
    if op == "sign":
        return (x > 0) - (x < 0)
    if op == "relu":
        return max(x, 0)
    if op == "square":
        return x * x
    if op == "bitwise_not":
        if d == "bool":
            return 1 - x
        return ~x if d in SIGNED else hi - x
    raise KeyError(op)


def finish(v, d, op):
    """Round/wrap a computed element to the result dtype."""
    if is_float(d):
        return round_float(v, d)
    if d == "bool":
        return int(bool(v))
    v = int(v)
    lo, hi = int_range(d)
    if not lo <= v <= hi:
        assert d in UNSIGNED and op in WRAP_OK, ("overflow", op, d, v)
        v = wrap(v, d)
    return v


def compute(op, ins, sargs):
    """Reference result: ins is a list of (dtype, object ndarray); returns (dtype, array)."""
    if op in ("cast", "bitcast"):
        (d, a), dst = ins[0], sargs[0]
        if op == "cast":
            return dst, emap(lambda v: convert(v, d, dst), a)
        return dst, emap(lambda v: from_raw_bits(raw_bits(v, d), dst), a)
    if op == "where":
        (dc, c), (da, a), (db, b) = ins
        d = promote(da, db)
        return d, emap(lambda cv, av, bv: convert(av, da, d) if truth(cv, dc)
                       else convert(bv, db, d), c, a, b)
    if op in ("shl", "shr"):
        (d, a), bits = ins[0], int(sargs[0])
        assert d in INTS
        if op == "shl":
            return d, emap(lambda v: finish(v << bits, d, op), a)
        return d, emap(lambda v: v >> bits, a)
    if op == "clip":
        (d, a), (lo, hi) = ins[0], sargs
        lo_, hi_ = canon(lo, d), canon(hi, d)
        assert lo_ == lo and hi_ == hi
        if is_float(d):
            return d, emap(lambda v: round_float(np.minimum(np.maximum(F(v), F(lo)), F(hi)), d), a)
        return d, emap(lambda v: min(max(v, lo_), hi_), a)
    if op.endswith("_s"):
        (d, a), s = ins[0], sargs[0]
        s_t = canon(s, d)                 # weak scalar: converted to t's dtype
        if not is_float(d):
            assert s_t == s
        base = {"add_s": "add", "sub_s": "sub", "mul_s": "mul", "div_s": "div",
                "pow_s": "pow", "rsub_s": "sub"}[op]
        sarr = np.asarray(s_t, dtype=object)
        pair = [(d, sarr), (d, a)] if op == "rsub_s" else [(d, a), (d, sarr)]
        rd, r = compute(base, pair, ())
        assert rd == d or (op == "div_s" and rd == "float32")
        if op != "div_s":
            rd = d
        return rd, r
    if len(ins) == 1:
        d, a = ins[0]
        if op in ("isnan", "isinf"):
            f = math.isnan if op == "isnan" else math.isinf
            return "bool", emap(lambda v: int(is_float(d) and f(v)), a)
        if op == "logical_not":
            return "bool", emap(lambda v: 1 - truth(v, d), a)
        if is_float(d):
            f = FLOAT_UN[op]
            return d, emap(lambda v: round_float(f(v), d), a)
        return d, emap(lambda v: finish(int_un(op, v, d), d, op), a)
    (da, a), (db, b) = ins
    if op in LOGICAL:
        f = LOGICAL[op]
        return "bool", emap(lambda x, y: int(bool(f(truth(x, da), truth(y, db)))), a, b)
    d = promote(da, db)
    if op == "div" and not is_float(d):
        d = "float32"
    if op in CMP:
        f = CMP[op]
        return "bool", emap(lambda x, y: int(bool(f(F(convert(x, da, d)) if is_float(d) else
                                                    convert(x, da, d),
                                                    F(convert(y, db, d)) if is_float(d) else
                                                    convert(y, db, d)))), a, b)
    if is_float(d):
        f = FLOAT_BIN[op]
        return d, emap(lambda x, y: round_float(f(convert(x, da, d), convert(y, db, d)), d), a, b)
    f = INT_BIN[op]

    def g(x, y):
        x, y = convert(x, da, d), convert(y, db, d)
        if op in ("floordiv", "idiv", "mod"):
            lo, _ = int_range(d)
            assert y != 0 and not (x == lo and y == -1)
        if op == "pow":
            assert y >= 0
        return finish(f(x, y), d, op)
    return d, emap(g, a, b)


# ------------------------------------------------------------------ tolerance choice
BITS_OPS = {"add", "sub", "mul", "div", "neg", "abs", "sqrt", "reciprocal", "square",
            "where", "cast", "add_s", "sub_s", "mul_s", "div_s", "rsub_s"}
CLOSE_OPS = {"exp", "exp2", "log", "log2", "rsqrt", "sin", "cos", "tan", "tanh",
             "sigmoid", "pow", "pow_s"}
# absolute tolerance (float32/float64) for results near 0
ATOL = {"sin": 4e-7, "cos": 4e-7, "tan": 4e-7, "tanh": 4e-7, "sigmoid": 4e-7,
        "log": 4e-7, "log2": 4e-7}
CMP_CODE = {"bits": "EW_CMP_BITS", "value": "EW_CMP_VALUE", "close": "EW_CMP_CLOSE",
            "strict": "EW_CMP_STRICT"}


def tolerance(op, d):
    """(mode, rtol, atol) for comparing results of op with dtype d."""
    if not is_float(d):
        return "bits", 0.0, 0.0
    if op == "bitcast":
        return "strict", 0.0, 0.0
    if op in BITS_OPS:
        return "bits", 0.0, 0.0
    if op not in CLOSE_OPS:
        return "value", 0.0, 0.0
    if d == "float16":      # 1 ulp of float16 (computed in float32, rounded once more)
        return "close", 1e-3, 1e-6
    if d == "bfloat16":     # 1 ulp of bfloat16
        return "close", 8e-3, 1e-6
    return "close", 2e-6, ATOL.get(op, 1e-37)


# ------------------------------------------------------------------ case construction
END = "END"
VIEW_CODE = {"permute": 1, "slice": 2, "expand": 3, "flip": 4}


class Inp:
    """An input tensor: base data of shape `shape`, then movement views applied in order."""

    def __init__(self, d, vals, shape=None, views=()):
        vals = list(np.asarray(vals, dtype=object).reshape(-1))
        self.d = d
        self.vals = [canon(v, d) for v in vals]
        self.shape = tuple(shape) if shape is not None else (len(self.vals),)
        assert int(np.prod(self.shape, dtype=np.int64)) == len(self.vals)
        self.views = list(views)
        assert len(self.views) <= 2

    def array(self):
        a = np.empty(len(self.vals), dtype=object)
        a[:] = self.vals
        a = a.reshape(self.shape)
        for v in self.views:
            kind = v[0]
            if kind == "permute":
                a = np.transpose(a, v[1])
            elif kind == "slice":
                _, axis, start, stop, step = v
                idx = [slice(None)] * a.ndim
                idx[axis] = slice(start, None if stop == END else stop, step)
                a = a[tuple(idx)]
            elif kind == "expand":
                shp = list(v[1])
                off = len(shp) - a.ndim
                shp = [a.shape[i - off] if s == -1 else s for i, s in enumerate(shp)]
                a = np.broadcast_to(a, shp)
            elif kind == "flip":
                a = np.flip(a, axis=tuple(v[1]))
        return a


CASES = []


def case(group, op, inputs, sargs=(), desc=""):
    ins = [(i.d, i.array()) for i in inputs]
    d, out = compute(op, ins, sargs)
    out = np.asarray(out, dtype=object)
    mode, rtol, atol = tolerance(op, d)
    label = " ".join(SHORT[i.d] for i in inputs)
    if op in ("cast", "bitcast"):
        label += "->" + SHORT[d]
    flat = list(out.reshape(-1))
    if op == "bitcast":     # keep NaN payloads: expected values as raw bit patterns
        flat = [raw_bits(v, inputs[0].d) for v in inputs[0].vals]
    CASES.append(dict(group=group, op=op, inputs=inputs, sargs=list(sargs), out_dtype=d,
                      out_shape=out.shape, out=flat, raw=op == "bitcast", mode=mode, rtol=rtol,
                      atol=atol, desc=(label + (" " + desc if desc else "")).strip()))


def nice_shape(n):
    for k in (4, 3, 5, 2):
        if n % k == 0 and n // k > 1:
            return (k, n // k)
    return (n,)


def pairs_case(group, op, da, db, pairs, desc=""):
    if not pairs:
        return
    shp = nice_shape(len(pairs))
    case(group, op, [Inp(da, [p[0] for p in pairs], shp), Inp(db, [p[1] for p in pairs], shp)],
         desc=desc)


def unary_case(group, op, d, vals, desc="", sargs=()):
    vals = dedup([canon(v, d) for v in vals], d)
    case(group, op, [Inp(d, vals, nice_shape(len(vals)))], sargs=sargs, desc=desc)


def dedup(vals, d):
    out, seen = [], set()
    for v in vals:
        key = raw_bits(v, d) if (is_float(d) and not math.isnan(v)) else ("nan" if is_float(d) else v)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out


rng = np.random.default_rng(20240601)
INF, NAN = math.inf, math.nan
FLT_MAX, FLT_MIN = 3.4028234663852886e38, 1.1754943508222875e-38
DBL_MAX, DBL_MIN = sys.float_info.max, sys.float_info.min
TINY = {"float32": 1e-40, "bfloat16": 1e-40, "float16": 6e-8, "float64": 1e-310}   # denormals
BIG = {"float32": FLT_MAX, "bfloat16": 3.3895313892515355e38, "float16": 65504.0,
       "float64": DBL_MAX}
NORM_MIN = {"float32": FLT_MIN, "bfloat16": FLT_MIN, "float16": 6.103515625e-05,
            "float64": DBL_MIN}
ULP_TIE = {"float32": 16777216.0, "bfloat16": 256.0, "float16": 2048.0, "float64": 2.0 ** 53}

SPECIALS = [0.0, -0.0, 1.0, -1.5, INF, -INF, NAN]


def float_pairs(d):
    """7x7 specials plus 11 edge/rounding pairs, as values representable in d."""
    pairs = [(a, b) for a in SPECIALS for b in SPECIALS]
    t, big = TINY[d], BIG[d]
    pairs += [(t, 2 * t), (t, -t), (big, big), (-big, big / 2), (0.1, 0.2), (ULP_TIE[d], 1.0),
              (1.0, {"float16": 1e-4, "bfloat16": 1e-3, "float32": 1e-8, "float64": 1e-17}[d]),
              (NORM_MIN[d], 0.5), (3.0, 7.0), (-2.75, 0.3),
              ({"float16": 1000.0, "float64": 1e300}.get(d, 1e30), 1e10 if d != "float16" else 0.01)]
    return [(canon(a, d), canon(b, d)) for a, b in pairs]


INT_POOL = {
    "int8": [0, 1, -1, 5, -7, 100, -128, 127],
    "int16": [0, 1, -1, 300, -7, 255, -32768, 32767],
    "int32": [0, 1, -1, 7, -46341, 65536, -2 ** 31, 2 ** 31 - 1],
    "int64": [0, 1, -1, 7, -3037000500, 2 ** 32, -2 ** 63, 2 ** 63 - 1],
    "uint8": [0, 1, 2, 7, 100, 128, 200, 255],
    "uint16": [0, 1, 7, 255, 256, 40000, 65535],
    "uint32": [0, 1, 7, 65536, 2 ** 31, 3000000000, 2 ** 32 - 1],
    "uint64": [0, 1, 7, 2 ** 32, 2 ** 63, 10 ** 19, 2 ** 64 - 1],
    "bool": [0, 1],
}
SMALL_POOL = {  # exact in float32, for true division
    "int8": [-7, -1, 0, 1, 2, 3, 100, -128], "int16": [-300, -7, 0, 1, 3, 1000],
    "int32": [-7, -1, 0, 1, 3, 100, 1000000, -16777215], "int64": [-7, 0, 1, 3, 16777215],
    "uint8": [0, 1, 3, 7, 255], "uint16": [0, 3, 65535], "uint32": [0, 1, 3, 16777215],
    "uint64": [0, 1, 3, 1000], "bool": [0, 1],
}


def int_pairs(d, op):
    pool = INT_POOL[d]
    if op == "div":
        pool = SMALL_POOL[d]
    lo, hi = int_range(d)
    out = []
    for a in pool:
        for b in pool:
            if op in ("floordiv", "idiv", "mod", "div") and (b == 0 or (a == lo and b == -1)):
                continue
            if op in ("add", "sub", "mul") and d in SIGNED:
                r = INT_BIN[op](a, b)
                if not lo <= r <= hi:
                    continue
            if op == "mul" and d == "uint16" and a * b > 2 ** 31 - 1:
                continue        # uint16*uint16 overflows C int
            out.append((a, b))
    return out


def int_pow_pairs(d):
    lo, hi = int_range(d)
    base = [(0, 0), (2, 0), (0, 5), (1, 100), (2, 1), (3, 4), (10, 2), (2, 6), (-2, 3), (-2, 4),
            (-1, 7), (-1, 8), (-3, 0)]
    extra = {"int8": [(-2, 7), (11, 2)], "int16": [(3, 9), (-2, 15), (181, 2)],
             "int32": [(7, 11), (2, 30), (-2, 31), (46340, 2)],
             "int64": [(3, 39), (-2, 63), (10, 18), (3037000499, 2)],
             "uint8": [(3, 5), (2, 7), (15, 2)], "uint32": [(3, 20), (2, 31), (65535, 2)],
             "uint64": [(3, 40), (2, 63), (4294967295, 2)], "uint16": [(3, 10), (255, 2)]}[d]
    return [(a, b) for a, b in base + extra if lo <= a <= hi and b >= 0 and lo <= a ** b <= hi]


BIN_FLOAT_OPS = ["add", "sub", "mul", "div", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge"]
BIN_INT_OPS = ["add", "sub", "mul", "div", "floordiv", "idiv", "mod", "maximum", "minimum",
               "eq", "ne", "lt", "le", "gt", "ge", "bitwise_and", "bitwise_or", "bitwise_xor"]
INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint32", "uint64"]


def gen_binary():
    for op in BIN_FLOAT_OPS:
        for d in FLOATS:
            pairs_case("values", op, d, d, float_pairs(d))
    for op in BIN_INT_OPS:
        dts = INT_DTYPES + (["uint16"] if op in ("add", "mul", "bitwise_xor", "lt") else [])
        for d in dts:
            pairs_case("values", op, d, d, int_pairs(d, op))
    # bool operands
    bb = [(a, b) for a in (0, 1) for b in (0, 1)]
    for op in ["eq", "ne", "lt", "le", "gt", "ge", "maximum", "minimum",
               "bitwise_and", "bitwise_or", "bitwise_xor",
               "logical_and", "logical_or", "logical_xor"]:
        pairs_case("values", op, "bool", "bool", bb)
    # logical ops on numbers (non-zero is true, NaN is true)
    for op in ["logical_and", "logical_or", "logical_xor"]:
        for d in ["int32", "uint8", "float32", "float16"]:
            pool = [0, 1, -1, NAN, -0.0, 0.5] if is_float(d) else INT_POOL[d][:5]
            pairs_case("values", op, d, d, [(canon(a, d), canon(b, d)) for a in pool for b in pool])
    # pow
    fpow = [(2, 3), (2, -1), (2, 0.5), (-2, 3), (-2, 2), (-2, -1), (-2, 0.5), (0, 0), (0, 2),
            (0, -1), (1, NAN), (NAN, 0), (NAN, 1), (2, NAN), (INF, 2), (INF, -1), (-INF, 3),
            (0.5, INF), (-1, INF), (1.5, 10), (10, -3), (3, 0.5), (7.5, 2.2), (0.3, -1.7),
            (100, 0.25), (-1.5, 4), (-INF, 2), (2, 127), (2, 128), (1e-3, 2), (2.5, -2.5),
            (-0.5, 3)]
    for d in FLOATS:
        pairs_case("values", "pow", d, d, [(canon(a, d), canon(b, d)) for a, b in fpow])
    for d in INT_DTYPES + ["uint16"]:
        pairs_case("values", "pow", d, d, int_pow_pairs(d))
    # float floordiv / mod: values where floor(a/b) is unambiguous
    fa = [-7, -6.5, -1, 0, 1, 2.5, 7, 100, -0.75]
    fb = [2, -2, 3, -3, 0.5, -0.25]
    for op in ("floordiv", "mod"):
        for d in FLOATS:
            pairs_case("values", op, d, d, [(canon(a, d), canon(b, d)) for a in fa for b in fb])


UN_FLOAT_OPS = {
    # op: values (float32 scale; rounded to each dtype)
    "neg": "general", "abs": "general", "sign": "general", "square": "general",
    "reciprocal": "general", "relu": "general", "isnan": "general", "isinf": "general",
    "floor": "rounding", "ceil": "rounding", "round": "rounding", "trunc": "rounding",
    "sqrt": [0.0, -0.0, "tiny", 0.25, 1, 2, 3, 1e10, "big", INF, -1, -INF, NAN, 0.1, 12345.678],
    "rsqrt": [0.0, -0.0, "tiny", 0.25, 1, 2, 3, 1e10, "big", INF, -1, -INF, NAN, 0.1, 12345.678],
    "exp": [-100, -20, -1, -0.5, -1e-7, 0.0, -0.0, 1e-7, 0.5, 1, 2.3, 10, 20, 88, 89, 100,
            INF, -INF, NAN, "tiny", -7.25, 3.3],
    "exp2": [-150, -126, -10.5, -1, 0.0, 0.5, 1, 3, 10.25, 127, 128, INF, -INF, NAN, 0.1, -0.3],
    "log": [0.0, -0.0, "tiny", "normmin", 1e-5, 0.5, 1, 1.0000001, 2, 2.718281828, 10, 1e10,
            "big", INF, -1, -INF, NAN, 0.3],
    "log2": [0.0, -0.0, "tiny", "normmin", 1e-5, 0.5, 1, 1.0000001, 2, 3, 1024, 1e10, "big",
             INF, -1, -INF, NAN, 0.3],
    "sin": [0.0, -0.0, 1e-5, 0.5, 1, -1, 1.5707964, 3.1415927, -3.1415927, 6.2831855, 10, -10,
            20, 30, 100, INF, -INF, NAN, 2.5, -0.75],
    "cos": [0.0, -0.0, 1e-5, 0.5, 1, -1, 1.5707964, 3.1415927, -3.1415927, 6.2831855, 10, -10,
            20, 30, 100, INF, -INF, NAN, 2.5, -0.75],
    "tan": [0.0, -0.0, 1e-5, 0.5, 1, -1, 1.2, 1.5, -1.5, 3, 10, -0.3, INF, NAN, 2.5],
    "tanh": [0.0, -0.0, 1e-5, 0.1, 0.5, 1, -1, 2, 5, 10, 20, -20, 100, INF, -INF, NAN, -0.3],
    "sigmoid": [0.0, -0.0, 0.1, 1, -1, 5, -5, 20, -20, 100, -100, INF, -INF, NAN, 0.3, -2.5],
}
GENERAL = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.75, "tiny", "-tiny", "big", "-big", "normmin",
           INF, -INF, NAN, 0.1, 1e20, -7, 100.25, 2.5, -0.5, 1.5, 1e-20, 12345.678]
ROUNDING = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -0.0, 0.0, -0.4, 0.49999997, 1.7, -1.7,
            8388607.5, 8388609, -8388609, 1e30, -1e30, INF, -INF, NAN, "tiny", "-tiny",
            4503599627370497.0, 1000.5, 1001.5, -1001.5, 0.75, -3.25, 2047.5, 255.5, -128.5]


def float_values(spec, d):
    sym = {"tiny": TINY[d], "-tiny": -TINY[d], "big": BIG[d], "-big": -BIG[d],
           "normmin": NORM_MIN[d]}
    vals = GENERAL if spec == "general" else ROUNDING if spec == "rounding" else spec
    return [sym.get(v, v) if isinstance(v, str) else v for v in vals]


def gen_unary():
    for op, spec in UN_FLOAT_OPS.items():
        for d in FLOATS:
            vals = float_values(spec, d)
            if d == "float64" and op in ("exp", "sin", "cos", "log"):
                vals = vals + {"exp": [700, 710, -745], "sin": [1e3], "cos": [1e3],
                               "log": [1e300]}[op]
            unary_case("values", op, d, vals)
    for op in ["neg", "abs", "sign", "relu", "square", "bitwise_not", "logical_not"]:
        for d in INT_DTYPES + ["uint16"]:
            lo, hi = int_range(d)
            vals = INT_POOL[d] + [hi - 1, lo + 1, 3, 11]
            if op in ("neg", "abs") and d in SIGNED:
                vals = [v for v in vals if v != lo]
            if op == "neg" and d not in SIGNED and d not in ("uint8", "uint32"):
                continue
            if op == "square":
                vals = [v for v in vals if v * v <= hi and (d != "uint16" or v * v < 2 ** 31)]
            unary_case("values", op, d, vals)
    for op in ["logical_not", "bitwise_not"]:
        unary_case("values", op, "bool", [0, 1, 1, 0])
    for d in FLOATS:
        unary_case("values", "logical_not", d, [0.0, -0.0, 1.0, -2.5, NAN, INF, TINY[d]])
    # clip
    for d, lo, hi in [("float32", -1.5, 2.0), ("float64", -1.5, 2.0), ("float16", -1.5, 2.0),
                      ("bfloat16", -1.5, 2.0)]:
        unary_case("values", "clip", d, float_values("general", d), sargs=(lo, hi))
    for d, lo, hi in [("int32", -5, 100), ("int8", -100, 100), ("uint8", 10, 200),
                      ("int64", -2 ** 40, 2 ** 40), ("uint64", 7, 2 ** 63)]:
        unary_case("values", "clip", d, INT_POOL[d] + [3, 150 if d != "int8" else 99],
                   sargs=(float(lo), float(hi)))
    # shifts
    for d in INTS:
        lo, hi = int_range(d)
        w = 8 * SIZE[d]
        for bits in (1, 3, w - 2):
            pool = INT_POOL[d] + [3, 5, 0x55 if hi >= 0x55 else 1]
            if d in SIGNED:
                shl = [v for v in pool if 0 <= v and (v << bits) <= hi]
            else:
                shl = pool
            unary_case("values", "shl", d, shl, sargs=(bits,))
            if bits != w - 2 or d in ("int32", "int8", "uint64"):
                unary_case("values", "shr", d, pool + ([-5, -128] if d in SIGNED else []),
                           sargs=(bits,))


def gen_scalar_forms():
    fvals = lambda d: float_values("general", d)
    for d in FLOATS:
        unary_case("values", "add_s", d, fvals(d), sargs=(0.5,))
        unary_case("values", "sub_s", d, fvals(d), sargs=(-2.25,))
        unary_case("values", "mul_s", d, fvals(d), sargs=(-3.0,))
        unary_case("values", "mul_s", d, [1, 3, 7, 10, 0.3, -5, 1e-3, 100, 12345.678, 0.7],
                   sargs=(round_float(0.1, d),), desc="by 0.1 of the dtype")
        unary_case("values", "div_s", d, fvals(d), sargs=(3.0,))
        unary_case("values", "div_s", d, fvals(d), sargs=(0.0,), desc="by zero")
        unary_case("values", "rsub_s", d, fvals(d), sargs=(2.0,))
        unary_case("values", "pow_s", d, [0, 1, 2, -2, 0.5, 3, 10, -1.5, INF, NAN], sargs=(2.0,))
        unary_case("values", "pow_s", d, [0, 1, 2, 0.25, 3, 10, 100, INF, NAN], sargs=(0.5,))
        unary_case("values", "pow_s", d, [1, 2, -2, 0.5, -0.5, 3, -3, 10], sargs=(3.0,))
        unary_case("values", "pow_s", d, [1, 2, -2, 0.5, 4, 10], sargs=(-1.0,))
    ivals = {"int8": [0, 1, -1, 5, -7, 100, -128, 120], "int32": INT_POOL["int32"],
             "int64": INT_POOL["int64"], "uint8": INT_POOL["uint8"], "uint32": INT_POOL["uint32"]}
    for d, s in [("int8", 3), ("int32", -7), ("int64", 1000), ("uint8", 100), ("uint32", 5)]:
        lo, hi = int_range(d)
        ok = lambda f: [v for v in ivals[d] if d in UNSIGNED or lo <= f(v) <= hi]
        unary_case("values", "add_s", d, ok(lambda v: v + s), sargs=(s,))
        unary_case("values", "sub_s", d, ok(lambda v: v - s), sargs=(s,))
        unary_case("values", "mul_s", d, ok(lambda v: v * s), sargs=(s,))
        unary_case("values", "rsub_s", d, ok(lambda v: s - v), sargs=(s,))
    for d in ["int8", "int32", "uint8", "int64"]:
        unary_case("values", "div_s", d, SMALL_POOL[d], sargs=(3.0,), desc="(true division)")
    for d, s, vals in [("int32", 2, [0, 1, -1, 7, -46340, 46340, 3]),
                       ("int32", 3, [0, 1, -1, 7, -1290, 1290, 3]),
                       ("uint8", 2, [0, 1, 7, 15, 11]), ("int64", 2, [0, 1, -1, 3037000499, -7])]:
        unary_case("values", "pow_s", d, vals, sargs=(s,))


CAST_VALUES = {
    "bool": [0, 1],
    "int8": [-128, -1, 0, 1, 127, 5, -7],
    "int16": [-32768, -129, -1, 0, 1, 255, 256, 32767, 300],
    "int32": [-2 ** 31, -65536, -1, 0, 1, 127, 255, 65535, 65519, 65520, 16777217, 2049,
              2 ** 31 - 1, 300],
    "int64": [-2 ** 63, -2 ** 31 - 1, -1, 0, 1, 2 ** 53 + 1, 2 ** 32 + 5, 2 ** 63 - 1, 300],
    "uint8": [0, 1, 127, 128, 255],
    "uint16": [0, 1, 255, 256, 32768, 65535],
    "uint32": [0, 1, 2 ** 31, 2 ** 32 - 1, 65543, 16777217],
    "uint64": [0, 1, 2 ** 63, 2 ** 64 - 1, 2 ** 53 + 1, 300],
    "float16": [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 2.75, 65504, -65504, 6e-8, 1000.5, 127.9,
                -128.9, 255.5, 2049, INF, -INF, NAN],
    "bfloat16": [0.0, -0.0, 1.5, -1.5, 3e38, 1e-40, 255.0, -128.5, 127.9, 65536, 1.00390625,
                 -2.0 ** 31, INF, -INF, NAN, 1e30],
    "float32": [0.0, -0.0, 1.5, -1.5, 2.5, -2.5, 0.1, 1e-40, 65519.996, 65520.0, 1e20, -1e20,
                127.99, -128.99, 255.7, 2147483520.0, -2147483648.0, 9223371487098961920.0,
                -9.223372036854775808e18, 18446742974197923840.0, 1.00390625, 1.01171875,
                2049.0, 2051.0, FLT_MAX, INF, -INF, NAN, -0.7],
    "float64": [0.0, -0.0, 1.5, -1.5, 0.1, 1e-310, 1e-40, 1e300, 2.0 ** 53 + 2, 2147483647.9,
                -2147483648.9, 9223372036854774784.0, -9.223372036854775808e18,
                18446744073709549568.0, 127.9, -128.9, 255.9, 65519.99, 65520.0,
                1 + 2.0 ** -24, 1 + 3 * 2.0 ** -24, INF, -INF, NAN, -0.99],
}


def cast_ok(v, src, dst):
    """Whether casting v is defined and not double-rounding-sensitive."""
    if is_float(src) and not is_float(dst) and dst != "bool":
        if not math.isfinite(v):
            return False
        lo, hi = int_range(dst)
        return lo <= math.trunc(v) <= hi
    if is_float(dst) and dst != "float64":
        # the result must not depend on whether the conversion goes via float64/float32
        exact = convert(v, src, dst)
        for mid in ("float64", "float32"):
            if mid == src or mid == dst or (is_float(src) and SIZE[mid] > SIZE[src]):
                continue
            via = convert(convert(v, src, mid), mid, dst)
            if not (via == exact or (math.isnan(via) and math.isnan(exact))):
                return False
    return True


def gen_cast():
    for src in DTYPES:
        vals = dedup([canon(v, src) for v in CAST_VALUES[src]], src)
        for dst in DTYPES:
            vs = [v for v in vals if cast_ok(v, src, dst)]
            assert vs, (src, dst)
            case("values", "cast", [Inp(src, vs)], sargs=(dst,))


BITCAST_VALUES = {
    "float32": [1.0, -0.0, INF, NAN, 1e-40, -2.5],
    "int32": [0, -1, -2 ** 31, 0x7FC00001, 0x7F800001, 1065353216],
    "uint32": [0, 2 ** 32 - 1, 0x7FC00001, 0x80000000, 0x3F800000, 0xFFC00001],
    "float64": [1.0, -0.0, INF, NAN, 5e-324, -2.5],
    "int64": [0, -1, -2 ** 63, 0x7FF8000000000001, 0x7FF0000000000001, 0x3FF0000000000000],
    "uint64": [0, 2 ** 64 - 1, 0x7FF8000000000001, 2 ** 63, 0x3FF0000000000000],
    "float16": [1.0, -0.0, INF, NAN, 6e-8, -2.5],
    "bfloat16": [1.0, -0.0, INF, NAN, 1e-40, -2.5],
    "int16": [0, -1, -32768, 0x7E01, 0x7C01, 0x3C00],
    "uint16": [0, 65535, 0x7E01, 0x7FC1, 0x8000, 0x3F80, 0xFF81],
    "int8": [-128, -1, 0, 127], "uint8": [0, 128, 255, 7], "bool": [0, 1],
}


def gen_bitcast():
    groups = [["float32", "int32", "uint32"], ["float64", "int64", "uint64"],
              ["float16", "bfloat16", "int16", "uint16"]]
    pairs = [(a, b) for g in groups for a in g for b in g if a != b]
    # from bool only: not every byte is a valid bool, so bool is never a bitcast target
    pairs += [("int8", "uint8"), ("uint8", "int8"), ("bool", "int8"), ("bool", "uint8")]
    for src, dst in pairs:
        case("values", "bitcast", [Inp(src, BITCAST_VALUES[src])], sargs=(dst,))


def gen_where():
    cond = [1, 0, 1, 1, 0, 0, 1, 0]
    for d, a, b in [
        ("float32", [0.0, -0.0, NAN, -INF, 1e-40, 1.5, 3.25, -7.0], [-0.0, 0.0, 1.0, NAN, 2.0, INF, 0.1, 9.0]),
        ("float64", [0.0, -0.0, NAN, -INF, 1e-310, 1.5, 0.1, -7.0], [-0.0, 0.0, 1.0, NAN, 2.0, INF, 0.2, 9.0]),
        ("float16", [0.0, -0.0, NAN, -INF, 6e-8, 1.5, 3.25, -7.0], [-0.0, 0.0, 1.0, NAN, 2.0, INF, 0.1, 9.0]),
        ("bfloat16", [0.0, -0.0, NAN, -INF, 1e-40, 1.5, 3.25, -7.0], [-0.0, 0.0, 1.0, NAN, 2.0, INF, 0.1, 9.0]),
        ("int8", [-128, 127, 0, 1, -1, 5, 6, 7], [1, 2, 3, 4, 5, -128, 127, 0]),
        ("int64", [-2 ** 63, 2 ** 63 - 1, 0, 1, -1, 5, 6, 7], [1, 2, 3, 4, 5, -2 ** 63, 2 ** 63 - 1, 0]),
        ("uint64", [2 ** 64 - 1, 0, 2 ** 63, 1, 2, 3, 4, 5], [9, 8, 7, 6, 2 ** 64 - 1, 2 ** 63, 0, 1]),
        ("bool", [1, 1, 0, 0, 1, 0, 1, 0], [0, 1, 1, 0, 0, 1, 0, 1]),
    ]:
        case("values", "where", [Inp("bool", cond, (2, 4)), Inp(d, a, (2, 4)), Inp(d, b, (2, 4))])


def gen_mixed():
    M = "mixed"
    mix = [
        ("add", "int8", [-128, 127, -1, 5], "uint8", [255, 255, 0, 200]),
        ("add", "int32", [2 ** 31 - 1, -2 ** 31, -1, 5], "uint32", [2 ** 32 - 1, 0, 2 ** 32 - 1, 7]),
        ("add", "uint64", [2 ** 63, 1, 0, 2 ** 64 - 1], "int64", [-1, 5, -2 ** 63, 1]),
        ("add", "uint16", [65535, 0, 7, 300], "int8", [-128, -1, 127, 3]),
        ("mul", "bool", [1, 0, 1, 0], "int32", [7, 7, -3, -2 ** 31]),
        ("add", "bool", [1, 0, 1, 0], "float16", [0.5, -0.0, -1.0, 65504]),
        ("add", "float16", [1.0, 2049, 0.1, -65504], "bfloat16", [1.0, 1.0, 0.1, -1e30]),
        ("sub", "int64", [-7, 0, 16777216, 5], "float32", [0.5, -0.0, 1.0, 1e-40]),
        ("add", "int32", [2049, -2051, 70000, 3], "float16", [0.0, 0.0, 0.0, 0.5]),
        ("maximum", "int16", [-32768, 32767, -1, 0], "uint16", [65535, 0, 1, 0]),
        ("lt", "int8", [-1, -128, 5, 0], "uint8", [255, 0, 5, 1]),
        ("lt", "int32", [-1, -1, 5, -2 ** 31], "uint32", [1, 2 ** 32 - 1, 4, 0]),
        ("eq", "int64", [-1, 1, 2 ** 53, 0], "uint64", [2 ** 64 - 1, 1, 2 ** 53, 0]),
        ("ge", "float16", [1.0, 0.1, NAN, -0.0], "bfloat16", [1.0, 0.1, 1.0, 0.0]),
        ("div", "int16", [7, -7, 1, 0], "uint8", [2, 3, 255, 5]),
        ("div", "bool", [1, 0, 1, 1], "bool", [1, 1, 1, 1]),
        ("div", "int32", [7, -7, 1, 0], "float16", [2.0, 3.0, 0.0, 0.0]),
        ("pow", "int32", [2, -2, 4, 0], "float32", [0.5, 3.0, -1.0, 0.0]),
        ("bitwise_and", "int8", [-1, -128, 127, 5], "int32", [0x7FFFFFFF, -1, 256, 6]),
        ("bitwise_or", "bool", [1, 0, 1, 0], "uint8", [0, 0, 254, 255]),
        ("minimum", "float32", [0.1, NAN, 1e-40, -INF], "float64", [0.1, 1.0, 1e-310, 0.0]),
        ("add", "bfloat16", [1.5, 1e38, -0.0, NAN], "float64", [0.1, 1e300, -0.0, 1.0]),
        ("mul", "uint32", [65536, 3, 2 ** 32 - 1, 0], "int8", [-1, -128, 2, 5]),
        ("sub", "uint8", [0, 255, 7, 100], "int16", [1, -300, 300, 0]),
        ("logical_and", "int32", [0, 5, -1, 0], "float32", [NAN, 0.0, 0.5, 0.0]),
        ("floordiv", "int8", [-7, 7, -128, 100], "uint8", [2, 255, 3, 7]),
        ("mod", "int32", [-7, 7, -2 ** 31, 100], "int64", [2, -3, 3, -7]),
    ]
    for op, da, a, db, b in mix:
        case(M, op, [Inp(da, a, (2, 2)), Inp(db, b, (2, 2))])
    case(M, "where", [Inp("bool", [1, 0, 0, 1], (4,)), Inp("int32", [1, -2, 3, 2 ** 31 - 1], (4,)),
                      Inp("float32", [0.5, -0.0, NAN, 1.0], (4,))])
    case(M, "where", [Inp("bool", [1, 0, 0, 1], (4,)), Inp("int8", [-128, -2, 3, 127], (4,)),
                      Inp("uint8", [255, 200, 0, 1], (4,))])


def seq(n, d, scale=1.0, off=0.0):
    if is_float(d):
        return [off + scale * (i * 0.75 - n * 0.3) for i in range(n)]
    lo, hi = int_range(d)
    return [max(lo, min(hi, int(off + (i * 3 - n) * scale))) for i in range(n)]


def gen_broadcast():
    B = "broadcast"
    f32 = "float32"
    case(B, "add", [Inp(f32, seq(3, f32), (3, 1)), Inp(f32, seq(4, f32, 0.1, 0.05), (1, 4))])
    case(B, "mul", [Inp("int32", seq(3, "int32"), (3, 1)), Inp("int32", seq(4, "int32", 5), (1, 4))])
    case(B, "lt", [Inp(f32, [0.5, NAN, -1.0], (3, 1)), Inp(f32, [-1.0, 0.5, 2.0, NAN], (1, 4))])
    case(B, "sub", [Inp("int32", [1, -2, 7], (3, 1)), Inp("float64", [0.5, 0.1, -3.0, 1e300], (1, 4))])
    case(B, "add", [Inp(f32, seq(5, f32), (5,)), Inp(f32, seq(10, f32, 0.3), (2, 5))])
    case(B, "maximum", [Inp("int64", seq(10, "int64", 1e9), (2, 5)), Inp("int64", seq(5, "int64", 2e9), (5,))])
    case(B, "sub", [Inp(f32, [2.5], ()), Inp(f32, seq(6, f32), (2, 3))])
    case(B, "mul", [Inp("int32", seq(6, "int32"), (2, 3)), Inp("int32", [-3], ())])
    case(B, "add", [Inp(f32, [1.25], ()), Inp(f32, [-0.5], ())])
    case(B, "add", [Inp("int32", seq(6, "int32"), (2, 3)), Inp("float64", [0.1], ())])
    case(B, "where", [Inp("bool", [1, 0, 1], (3, 1)), Inp(f32, seq(4, f32), (1, 4)), Inp(f32, [-9.5], ())])
    case(B, "pow", [Inp(f32, [0.5, 1.5, 2.0, 3.0, 0.25, 1.0], (2, 1, 3)), Inp(f32, [0.0, 1.0, 2.0, -1.5], (4, 1))])
    case(B, "eq", [Inp("float16", [0.5, 1.0, 1.5, 2.0, 1.0, 0.5, 0.0, -0.0], (2, 1, 4)),
                   Inp("float16", [1.0, 0.0, 0.5], (3, 1))])
    case(B, "add", [Inp(f32, [], (0, 3)), Inp(f32, [1.0, 2.0, 3.0], (3,))], desc="size-0")
    case(B, "bitwise_xor", [Inp("uint8", [1, 2, 4, 255], (4, 1)), Inp("uint8", [15], (1,))])
    case(B, "ge", [Inp("int8", [-128], ()), Inp("int8", [-128, 0, 127], (3,))])


def gen_strided():
    S = "strided"
    f32, f64 = "float32", "float64"
    case(S, "add", [Inp(f32, seq(12, f32), (3, 4), [("permute", (1, 0))]), Inp(f32, seq(12, f32, 0.1), (4, 3))],
         desc="permute")
    case(S, "mul", [Inp(f32, seq(24, f32), (2, 3, 4), [("permute", (2, 0, 1))]), Inp(f32, [1.5, -2.0, 0.5], (3,))],
         desc="permute3")
    case(S, "sub", [Inp("int32", seq(10, "int32"), (10,), [("slice", 0, 0, END, 2)]),
                    Inp("int32", seq(10, "int32", 7), (2, 5))], desc="slice step 2")
    case(S, "maximum", [Inp(f32, seq(24, f32), (6, 4), [("slice", 0, 5, END, -2)]),
                        Inp(f32, seq(12, f32, -0.7), (3, 4), [("flip", (1,))])], desc="slice step -2, flip")
    case(S, "add", [Inp(f64, [0.1, 0.2, 0.3], (3, 1), [("expand", (3, 4))]),
                    Inp(f64, [1.0, 2.0, 3.0, 4.0], (4,), [("flip", (0,))])], desc="expand, flip")
    case(S, "exp", [Inp(f32, seq(12, f32, 0.5), (3, 4), [("permute", (1, 0))])], desc="permute")
    case(S, "where", [Inp("bool", [1, 0, 0, 1], (4, 1), [("expand", (4, 5))]),
                      Inp(f32, seq(20, f32), (5, 4), [("permute", (1, 0))]),
                      Inp(f32, seq(40, f32, 0.2), (4, 10), [("slice", 1, 0, END, 2)])], desc="expand/permute/slice")
    case(S, "lt", [Inp("int64", seq(6, "int64", 1e10), (2, 3), [("flip", (0, 1))]),
                   Inp("int64", seq(18, "int64", 1e9), (2, 9), [("slice", 1, 1, END, 3)])], desc="flip both, slice")
    case(S, "cast", [Inp(f32, seq(6, f32, 0.3), (2, 3), [("permute", (1, 0))])], sargs=("float16",), desc="permute")
    case(S, "neg", [Inp(f32, [0.0, -0.0, 1.0, 2.0, 3.0, 4.0, 5.0], (7,), [("slice", 0, -1, END, -1)])],
         desc="slice step -1")
    case(S, "bitwise_and", [Inp("uint8", [1, 3, 7, 15, 255], (5,), [("expand", (2, 5))]),
                            Inp("uint8", [255, 254, 6, 9, 0, 1, 2, 3, 4, 5], (2, 5))], desc="expand new axis")
    case(S, "add", [Inp(f32, seq(24, f32), (4, 6), [("slice", 1, 0, END, 2), ("permute", (1, 0))]),
                    Inp(f32, seq(12, f32, 0.25), (3, 4), [("flip", (0,))])], desc="slice+permute")
    case(S, "mul", [Inp("float16", [0.5, -1.5, 2.0], (1, 3), [("expand", (4, 3)), ("permute", (1, 0))]),
                    Inp("float16", seq(12, "float16", 0.5), (3, 4))], desc="expand+permute")
    case(S, "sqrt", [Inp(f32, [abs(v) for v in seq(24, f32)], (2, 3, 4),
                         [("permute", (1, 2, 0)), ("slice", 0, 0, END, 2)])], desc="permute+slice")
    case(S, "add_s", [Inp("bfloat16", seq(12, "bfloat16"), (3, 4), [("flip", (0, 1))])], sargs=(1.5,), desc="flip")
    case(S, "floordiv", [Inp("int16", seq(12, "int16", 11), (4, 3), [("permute", (1, 0))]),
                         Inp("int16", [3, -4, 7, -2], (4,), [("flip", (0,))])], desc="permute, flip")
    case(S, "sigmoid", [Inp(f64, seq(10, f64), (10,), [("slice", 0, -2, 1, -3)])], desc="negative slice bounds")


# ------------------------------------------------------------------- cross-check
# The values above are computed exactly (or in float64) and rounded once. As a second
# opinion, every same-dtype case of these ops is recomputed natively: numpy in the tensor's
# dtype (float16 arithmetic rounds once per op, ints wrap), torch for bfloat16.
NATIVE = {
    "add": "add", "sub": "subtract", "mul": "multiply", "div": "true_divide",
    "floordiv": "floor_divide", "mod": "remainder", "maximum": "maximum", "minimum": "minimum",
    "eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal", "gt": "greater",
    "ge": "greater_equal", "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or",
    "bitwise_xor": "bitwise_xor", "logical_and": "logical_and", "logical_or": "logical_or",
    "logical_xor": "logical_xor", "logical_not": "logical_not", "neg": "negative", "abs": "abs",
    "square": "square", "sqrt": "sqrt", "reciprocal": "reciprocal", "floor": "floor",
    "ceil": "ceil", "round": "round", "trunc": "trunc", "isnan": "isnan", "isinf": "isinf",
    "sign": "sign", "exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sin": "sin",
    "cos": "cos", "tan": "tan", "tanh": "tanh", "sigmoid": "sigmoid", "rsqrt": "rsqrt",
    "pow": "pow", "relu": "relu",
}


def native(op, d, arrays):
    if d == "bfloat16":
        ts = [torch.tensor(np.asarray(a, dtype=np.float64), dtype=torch.float32).to(torch.bfloat16)
              for a in arrays]
        tname = {"equal": "eq", "not_equal": "ne", "less": "lt", "less_equal": "le",
                 "greater": "gt", "greater_equal": "ge", "true_divide": "div"}.get(NATIVE[op], NATIVE[op])
        if op == "floordiv":
            r = torch.div(*ts, rounding_mode="floor")
        else:
            r = getattr(torch, tname)(*ts)
        return r.float().numpy().astype(np.float64) if r.dtype != torch.bool else r.numpy()
    npd = {"float16": np.float16, "float32": np.float32, "float64": np.float64}.get(d)
    if npd is None:
        npd = np.bool_ if d == "bool" else getattr(np, d)
    xs = [np.array(list(a.reshape(-1)), dtype=np.float64 if is_float(d) else object)
          .astype(npd).reshape(a.shape) for a in arrays]
    fn = {"round": np.rint, "sigmoid": lambda x: (1 / (1 + np.exp(-x.astype(np.float64)))).astype(x.dtype),
          "rsqrt": lambda x: (1 / np.sqrt(x.astype(np.float64))).astype(x.dtype),
          "relu": lambda x: np.maximum(x, x.dtype.type(0)), "pow": np.power}.get(op)
    return (fn or getattr(np, NATIVE[op]))(*xs)


def crosscheck():
    n = 0
    for c in CASES:
        ds = {i.d for i in c["inputs"]}
        if c["group"] != "values" or c["op"] not in NATIVE or len(ds) != 1 or c["sargs"]:
            continue
        d = ds.pop()
        if c["op"] in ("div", "pow") and not is_float(d):
            continue                      # numpy: int/int is float64, int**int wraps
        if d in ("bool",) and c["op"] not in ("eq", "ne", "lt", "le", "gt", "ge", "logical_and",
                                              "logical_or", "logical_xor", "logical_not",
                                              "bitwise_and", "bitwise_or", "bitwise_xor"):
            continue
        if c["op"] == "sign" and d != "float16" and d != "float32" and d != "float64":
            continue                      # torch.sign(nan) is 0 (semantics.md: nan)
        got = np.asarray(native(c["op"], d, [i.array() for i in c["inputs"]])).reshape(-1)
        od = c["out_dtype"]
        for g, e in zip(got, c["out"]):
            if od == "bool" or not is_float(od):
                ok = int(g) == int(e)
            elif math.isnan(e) or math.isnan(float(g)):
                ok = math.isnan(e) and math.isnan(float(g))
            elif c["mode"] == "close" and math.isfinite(e) and math.isfinite(float(g)):
                ok = abs(float(g) - e) <= c["atol"] + c["rtol"] * abs(e)
            elif c["mode"] in ("bits", "close"):
                ok = float(g) == e and math.copysign(1, float(g)) == math.copysign(1, e)
            else:
                ok = float(g) == e
            assert ok, ("native mismatch", c["op"], c["desc"], g, e)
        n += 1
    return n


# ---------------------------------------------------------------------------- emit
class Emitter:
    def __init__(self):
        self.arrays = {}     # (ctype, literal tuple) -> name
        self.lines = []

    def array(self, d, vals, raw=False):
        if not vals:
            return "ew_empty"
        if raw and is_float(d):
            lits = tuple({2: "0x%04x", 4: "0x%08x", 8: "0x%016xULL"}[SIZE[d]] % b for b in vals)
        elif raw:
            lits = tuple(c_literal(from_raw_bits(b, d), d) for b in vals)
        else:
            lits = tuple(c_literal(v, d) for v in vals)
        key = (CTYPE[d], lits)
        if key not in self.arrays:
            name = "ew_d%d" % len(self.arrays)
            self.arrays[key] = name
            body, line = [], ""
            for lit in lits:
                if len(line) + len(lit) + 1 > 96:
                    body.append(line)
                    line = ""
                line += lit + ","
            body.append(line)
            self.lines.append("static const %s %s[%d] = {\n  %s\n};" % (CTYPE[d], name, len(lits),
                                                                       "\n  ".join(body)))
        return self.arrays[key]


def c_double(x):
    assert math.isfinite(x)
    r = repr(float(x))
    return r if ("e" in r or "." in r) else r + ".0"


def c_shape(shape):
    return "{" + ",".join(str(s) for s in shape) + "}" if shape else "{0}"


def c_view(v):
    kind = v[0]
    if kind == "permute":
        p = [len(v[1])] + list(v[1])
    elif kind == "slice":
        p = list(v[1:])
    elif kind == "expand":
        p = [len(v[1])] + list(v[1])
    else:
        p = [len(v[1])] + list(v[1])
    ps = ["TG_SLICE_END" if x == END else str(x) for x in p]
    return "{%d,{%s}}" % (VIEW_CODE[kind], ",".join(ps))


def emit(path):
    em = Emitter()
    rows = []
    for c in CASES:
        ins = []
        for i in c["inputs"]:
            views = ",".join(c_view(v) for v in i.views)
            ins.append("{%s,%d,%s,%s,{%s}}" % (ENUM[i.d], len(i.shape), c_shape(i.shape),
                                               em.array(i.d, i.vals), views or "{0}"))
        sargs = [s for s in c["sargs"] if not isinstance(s, str)]
        sarg = "{%s}" % ",".join(c_double(s) for s in sargs) if sargs else "{0}"
        rows.append('  {.group="%s",.op="%s",.desc="%s",.nin=%d,.in={%s},.sarg=%s,'
                    '.out_dtype=%s,.out_ndim=%d,.out_shape=%s,.expect=%s,.cmp=%s,.rtol=%s,.atol=%s},'
                    % (c["group"], c["op"], c["desc"], len(ins), ",".join(ins), sarg,
                       ENUM[c["out_dtype"]], len(c["out_shape"]), c_shape(c["out_shape"]),
                       em.array(c["out_dtype"], c["out"], c["raw"]), CMP_CODE[c["mode"]],
                       repr(c["rtol"]), repr(c["atol"])))
    prom = []
    for a in DTYPES:
        prom.append("  {" + ",".join(ENUM[promote(a, b)] for b in DTYPES) + "},")
    out = []
    out.append("/* elementwise.h - GENERATED by tests/gen_fixtures_elementwise.py; do not edit.\n"
               " * numpy %s, torch %s. Floats are stored as bit patterns. */" %
               (np.__version__, torch.__version__))
    out.append("#ifndef TG_FIXTURES_ELEMENTWISE_H\n#define TG_FIXTURES_ELEMENTWISE_H\n"
               "#include <stdint.h>\n#include \"tg.h\"\n")
    out.append("""enum { EW_VIEW_NONE, EW_VIEW_PERMUTE, EW_VIEW_SLICE, EW_VIEW_EXPAND, EW_VIEW_FLIP };
/* BITS: bit-exact, any NaN matches any NaN; VALUE: ==, -0.0 == 0.0, NaN matches NaN;
 * CLOSE: harness_close(got, expect, atol, rtol); STRICT: bit-exact including NaN payloads. */
enum { EW_CMP_BITS, EW_CMP_VALUE, EW_CMP_CLOSE, EW_CMP_STRICT };

/* A movement op applied to an input after tg_from_data.
 * PERMUTE p = {ndim, order...}; SLICE p = {axis, start, stop, step};
 * EXPAND p = {ndim, shape...}; FLIP p = {naxes, axes...}. */
typedef struct ew_view { int kind; int64_t p[6]; } ew_view;
typedef struct ew_input {
  tg_dtype dtype; int ndim; int64_t shape[4]; const void *data; ew_view view[2];
} ew_input;
typedef struct ew_case {
  const char *group, *op, *desc;
  int nin; ew_input in[3];
  double sarg[2];           /* *_s scalar, clip lo/hi, shift bits */
  tg_dtype out_dtype; int out_ndim; int64_t out_shape[4];
  const void *expect;
  int cmp; double rtol, atol;
} ew_case;

static const uint64_t ew_empty[1] = {0};
""")
    out.extend(em.lines)
    out.append("\nstatic const ew_case ew_cases[] = {")
    out.extend(rows)
    out.append("};\n#define EW_NCASES ((int)(sizeof ew_cases / sizeof ew_cases[0]))\n")
    out.append("/* tg_promote_types(a, b) for every pair, in tg_dtype order (docs/semantics.md). */")
    out.append("static const tg_dtype ew_promote[TG_DTYPE_COUNT][TG_DTYPE_COUNT] = {")
    out.extend(prom)
    out.append("};\n\n#endif")
    text = "\n".join(out) + "\n"
    with open(path, "w") as f:
        f.write(text)
    return len(text)


def main():
    with np.errstate(all="ignore"):
        gen_binary()
        gen_unary()
        gen_scalar_forms()
        gen_cast()
        gen_bitcast()
        gen_where()
        gen_mixed()
        gen_broadcast()
        gen_strided()
        checked = crosscheck()
    n = emit(OUT)
    print("wrote %s: %d cases (%d cross-checked natively), %d bytes" % (OUT, len(CASES), checked, n))


if __name__ == "__main__":
    main()
