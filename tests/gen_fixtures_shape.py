#!/usr/bin/python3
"""gen_fixtures_shape.py — writes tests/fixtures/shape.h, the reference data for
tests/test_shape_ops.c (creation, reductions, movement, indexing, matmul).

Run from anywhere:  /usr/bin/python3 tests/gen_fixtures_shape.py

Every fixture is a small program: up to four inputs (each a creation op or literal data,
followed by unary steps), an optional combining op (cat, stack, matmul, dot, gather,
index_select) and more unary steps.  This script evaluates the same program with
numpy (cross-checked against torch where torch has the op) and stores the inputs, the
program and the expected dtype, shape and values as static C tables.  The C test walks
the tables with a tiny interpreter, so a new case is one line here.

Reference values are computed in float64 (int64 for integers) and rounded to each
step's result dtype, like an implementation that stores every intermediate.
"""
import math
import os
import sys

import numpy as np
import torch

rng = np.random.default_rng(20240601)

# ------------------------------------------------------------------ tables shared with C
DTYPES = ['bool', 'int8', 'int16', 'int32', 'int64', 'uint8', 'uint16', 'uint32',
          'uint64', 'float16', 'bfloat16', 'float32', 'float64']
FLOATS = {'float16', 'bfloat16', 'float32', 'float64'}
SIGNED = {'int8', 'int16', 'int32', 'int64'}
UNSIGNED = {'uint8', 'uint16', 'uint32', 'uint64'}
NPDT = {'bool': np.bool_, 'int8': np.int8, 'int16': np.int16, 'int32': np.int32,
        'int64': np.int64, 'uint8': np.uint8, 'uint16': np.uint16, 'uint32': np.uint32,
        'uint64': np.uint64, 'float16': np.float16, 'bfloat16': np.float32,
        'float32': np.float32, 'float64': np.float64}

STEP_OPS = ['NONE', 'RESHAPE', 'PERMUTE', 'EXPAND', 'PAD', 'SHRINK', 'FLIP', 'TRANSPOSE',
            'SQUEEZE', 'UNSQUEEZE', 'FLATTEN', 'SLICE', 'REPEAT', 'CONTIGUOUS', 'REALIZE',
            'SPLIT_PICK', 'SUM', 'PROD', 'MAX', 'MIN', 'MEAN', 'VAR', 'STD', 'ANY', 'ALL',
            'ARGMAX', 'ARGMIN', 'SOFTMAX', 'LOG_SOFTMAX', 'LOGSUMEXP', 'CUMSUM', 'MUL_S',
            'ADD_S', 'EXP', 'ADD_FLIP', 'CAST', 'FULL_LIKE', 'ZEROS_LIKE', 'ONES_LIKE',
            'EMPTY_LIKE', 'ONE_HOT',
            # combining ops (case.combine)
            'CAT', 'STACK', 'MATMUL', 'DOT', 'GATHER', 'INDEX_SELECT']
SOURCES = ['DATA', 'FULL', 'ZEROS', 'ONES', 'EMPTY', 'SCALAR', 'ARANGE', 'LINSPACE', 'EYE']
MAX_RANK, MAX_P, MAX_IN, MAX_IN_STEPS, MAX_STEPS = 6, 12, 4, 4, 6
END = 2**63 - 1          # TG_SLICE_END
ALL = -1000000           # TG_ALL_AXES
EXACT_OPS = {'RESHAPE', 'PERMUTE', 'EXPAND', 'PAD', 'SHRINK', 'FLIP', 'TRANSPOSE', 'SQUEEZE',
             'UNSQUEEZE', 'FLATTEN', 'SLICE', 'REPEAT', 'CONTIGUOUS', 'REALIZE',
             'SPLIT_PICK', 'MAX', 'MIN', 'ANY', 'ALL', 'ARGMAX', 'ARGMIN', 'FULL_LIKE',
             'ZEROS_LIKE', 'ONES_LIKE', 'EMPTY_LIKE', 'ONE_HOT', 'CAT', 'STACK', 'GATHER',
             'INDEX_SELECT', 'CAST'}
DEFAULT_TOL = {'float64': (1e-12, 1e-12), 'float32': (1e-6, 1e-5),
               'float16': (1e-3, 2e-3), 'bfloat16': (1e-2, 1e-2)}


# ------------------------------------------------------------------ numeric helpers
def cast(a, dt):
    """numpy array of values -> values of tg dtype dt (float->int truncates, ->bool is != 0)."""
    a = np.asarray(a)
    if dt == 'bool':
        return a != 0
    if dt == 'bfloat16':
        t = torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))
        return t.to(torch.bfloat16).to(torch.float32).numpy()
    if dt in FLOATS:
        return a.astype(np.float64).astype(NPDT[dt])
    if a.dtype.kind == 'f':
        a = np.trunc(a)
    return a.astype(np.int64 if dt != 'uint64' else np.uint64).astype(NPDT[dt])


def acc_dtype(dt):      # sum / prod / cumsum result dtype
    if dt == 'bool' or dt in SIGNED:
        return 'int64'
    if dt in UNSIGNED:
        return 'uint64'
    return dt


def mean_dtype(dt):     # mean / var / std result dtype
    return dt if dt in FLOATS else 'float32'


def wide(a, dt):        # exact working array: float64 / int64 / uint64
    if dt in FLOATS:
        return np.asarray(a, dtype=np.float64)
    return np.asarray(a).astype(np.uint64 if dt in UNSIGNED else np.int64)


def norm_axes(p, nd):
    return tuple(sorted(x % nd for x in p)) if p else tuple(range(nd))


class V:
    """A reference value: numpy array + tg dtype (+ whether its values are defined)."""
    def __init__(self, a, dt, known=True):
        self.a, self.dt, self.known = np.asarray(a), dt, known


def reduce_ident(op, dt):
    if op == 'MAX':
        return -np.inf if dt in FLOATS else (False if dt == 'bool' else np.iinfo(NPDT[dt]).min)
    return np.inf if dt in FLOATS else (True if dt == 'bool' else np.iinfo(NPDT[dt]).max)


def ref_step(v, st):
    op, p, f, k = st['op'], list(st['p']), st['f'], st['k']
    a, dt, nd = v.a, v.dt, v.a.ndim
    same = lambda x: V(x, dt, v.known)
    if op == 'RESHAPE':
        return same(a.reshape(p))
    if op == 'PERMUTE':
        return same(np.transpose(a, p))
    if op == 'EXPAND':
        shp = list(p)
        off = len(shp) - nd
        for i in range(len(shp)):
            if shp[i] == -1:
                shp[i] = a.shape[i - off]
        return same(np.broadcast_to(a, shp).copy())
    if op == 'PAD':
        if nd == 0:
            return v
        assert min(p) >= 0 and len(p) == 2 * nd, 'bad pad'
        return V(np.pad(a, list(zip(p[:nd], p[nd:2 * nd])), constant_values=cast(f, dt)), dt, v.known)
    if op == 'SHRINK':
        assert all(0 <= p[i] <= p[nd + i] <= a.shape[i] for i in range(nd)), 'bad shrink'
        return same(a[tuple(slice(p[i], p[nd + i]) for i in range(nd))])
    if op == 'FLIP':
        return same(np.flip(a, tuple(p)).copy())
    if op == 'TRANSPOSE':
        return same(np.swapaxes(a, p[0], p[1]))
    if op == 'SQUEEZE':
        return same(np.squeeze(a) if p[0] == ALL else np.squeeze(a, p[0]))
    if op == 'UNSQUEEZE':
        return same(np.expand_dims(a, p[0]))
    if op == 'FLATTEN':
        s, e = p[0] % nd, p[1] % nd
        return same(a.reshape(a.shape[:s] + (int(np.prod(a.shape[s:e + 1])),) + a.shape[e + 1:]))
    if op == 'SLICE':
        idx = [slice(None)] * nd
        idx[p[0]] = slice(p[1], None if p[2] == END else p[2], p[3])
        return same(a[tuple(idx)])
    if op == 'REPEAT':
        r = np.tile(a, p)
        if dt not in ('uint16', 'uint32', 'uint64', 'bfloat16'):
            assert np.array_equal(torch.from_numpy(np.ascontiguousarray(a)).repeat(*p).numpy(), r, equal_nan=dt in FLOATS)
        return same(r)
    if op in ('CONTIGUOUS', 'REALIZE'):
        return v
    if op == 'SPLIT_PICK':
        sizes, axis = p[:st['n']], p[st['n']]
        cuts = np.cumsum(sizes)[:-1]
        return same(np.split(a, cuts, axis=axis)[k])
    axes = norm_axes(p[:st['n']], nd) if op in ('SUM', 'PROD', 'MAX', 'MIN', 'MEAN', 'VAR', 'STD', 'ANY', 'ALL') else None
    kd = bool(k)
    if op in ('SUM', 'PROD'):
        od = acc_dtype(dt)
        w = wide(a, dt) if dt != 'bool' else a.astype(np.int64)
        r = np.sum(w, axis=axes, keepdims=kd) if op == 'SUM' else np.prod(w, axis=axes, keepdims=kd)
        return V(cast(r, od), od, v.known)
    if op in ('MAX', 'MIN'):
        fn = np.max if op == 'MAX' else np.min
        r = fn(a, axis=axes, keepdims=kd, initial=reduce_ident(op, dt))
        return same(cast(r, dt))
    if op in ('MEAN', 'VAR', 'STD'):
        od = mean_dtype(dt)
        w = np.asarray(a, dtype=np.float64)
        if op == 'MEAN':
            r = np.mean(w, axis=axes, keepdims=kd)
        else:
            r = np.var(w, axis=axes, keepdims=kd, ddof=f)
            if op == 'STD':
                r = np.sqrt(r)
            cnt = int(np.prod([a.shape[x] for x in axes]))
            assert cnt - f > 0, 'var/std with count <= correction is unspecified'
            if nd:
                tr = (torch.var if op == 'VAR' else torch.std)(torch.from_numpy(w), dim=axes,
                                                              correction=int(f), keepdim=kd)
                assert np.allclose(tr.numpy(), r, rtol=1e-12, atol=1e-12)
        return V(cast(r, od), od, v.known)
    if op in ('ANY', 'ALL'):
        fn = np.any if op == 'ANY' else np.all
        return V(fn(a != 0, axis=axes, keepdims=kd), 'bool', v.known)
    if op in ('ARGMAX', 'ARGMIN'):
        fn = np.argmax if op == 'ARGMAX' else np.argmin
        return V(fn(a, axis=p[0], keepdims=kd).astype(np.int32), 'int32', v.known)
    if op in ('SOFTMAX', 'LOG_SOFTMAX', 'LOGSUMEXP'):
        w = np.asarray(a, dtype=np.float64)
        m = np.max(w, axis=p[0], keepdims=True)
        e = np.exp(w - m)
        s = np.sum(e, axis=p[0], keepdims=True)
        if op == 'SOFTMAX':
            r = e / s
            assert np.allclose(torch.softmax(torch.from_numpy(w), p[0]).numpy(), r)
        elif op == 'LOG_SOFTMAX':
            r = w - m - np.log(s)
            assert np.allclose(torch.log_softmax(torch.from_numpy(w), p[0]).numpy(), r)
        else:
            r = m + np.log(s)
            if not kd:
                r = np.squeeze(r, p[0])
            assert np.allclose(torch.logsumexp(torch.from_numpy(w), p[0], keepdim=kd).numpy(), r)
        return same(cast(r, dt))
    if op == 'CUMSUM':
        od = acc_dtype(dt)
        w = wide(a, dt) if dt != 'bool' else a.astype(np.int64)
        return V(cast(np.cumsum(w, axis=p[0]), od), od, v.known)
    if op in ('MUL_S', 'ADD_S'):
        w = wide(a, dt)
        r = w * f if op == 'MUL_S' else w + f
        return same(cast(r, dt))
    if op == 'EXP':
        return same(cast(np.exp(np.asarray(a, dtype=np.float64)), dt))
    if op == 'ADD_FLIP':
        w = wide(a, dt)
        return same(cast(w + np.flip(w, tuple(p[:st['n']])), dt))
    if op == 'CAST':
        return V(cast(a, k), k, v.known)
    if op == 'FULL_LIKE':
        return V(cast(np.full(a.shape, f), dt), dt)
    if op == 'ZEROS_LIKE':
        return V(cast(np.zeros(a.shape), dt), dt)
    if op == 'ONES_LIKE':
        return V(cast(np.ones(a.shape), dt), dt)
    if op == 'EMPTY_LIKE':
        return V(np.zeros(a.shape, NPDT[dt]), dt, known=False)
    if op == 'ONE_HOT':
        r = (np.asarray(a)[..., None] == np.arange(p[0])).astype(np.int64)
        if np.all((a >= 0) & (a < p[0])):
            assert np.array_equal(torch.nn.functional.one_hot(torch.from_numpy(a.astype(np.int64)), p[0]).numpy(), r)
        return V(cast(r, k), k, v.known)
    raise ValueError(op)


def ref_combine(op, axis, vs):
    if op == 'CAT':
        return V(np.concatenate([v.a for v in vs], axis=axis), vs[0].dt)
    if op == 'STACK':
        return V(np.stack([v.a for v in vs], axis=axis), vs[0].dt)
    if op in ('MATMUL', 'DOT'):
        a, b = vs
        w = np.matmul(wide(a.a, a.dt), wide(b.a, b.dt))
        if a.dt in FLOATS:
            t = torch.matmul(torch.from_numpy(wide(a.a, a.dt)), torch.from_numpy(wide(b.a, b.dt)))
            assert np.allclose(t.numpy(), w, rtol=1e-12, atol=1e-12)
        return V(cast(w, a.dt), a.dt)
    t, idx = vs
    a, ix = t.a, idx.a.astype(np.int64)
    if op == 'GATHER':
        out = np.zeros(ix.shape, a.dtype)
        ax = axis % a.ndim
        for pos in np.ndindex(*ix.shape):
            j = ix[pos]
            if 0 <= j < a.shape[ax]:
                src = list(pos)
                src[ax] = j
                out[pos] = a[tuple(src)]
        if np.all((ix >= 0) & (ix < a.shape[ax])) and t.dt in ('float32', 'float64', 'int32'):
            g = torch.gather(torch.from_numpy(np.ascontiguousarray(a)), ax, torch.from_numpy(ix))
            assert np.array_equal(g.numpy(), out)
        return V(out, t.dt)
    if op == 'INDEX_SELECT':
        ax = axis % a.ndim
        valid = (ix >= 0) & (ix < a.shape[ax])
        r = np.take(a, np.where(valid, ix, 0), axis=ax)
        mask = valid.reshape((1,) * ax + ix.shape + (1,) * (a.ndim - ax - 1))
        return V(np.where(mask, r, np.zeros((), a.dtype)), t.dt)
    raise ValueError(op)


def ref_source(i):
    src, dt, shape, a = i['src'], i['dtype'], tuple(i['shape']), i['a']
    if src == 'DATA':
        return V(i['vals'], dt)
    if src == 'FULL':
        return V(cast(np.full(shape, a[0]), dt), dt)
    if src == 'ZEROS':
        return V(cast(np.zeros(shape), dt), dt)
    if src == 'ONES':
        return V(cast(np.ones(shape), dt), dt)
    if src == 'EMPTY':
        return V(np.zeros(shape, NPDT[dt]), dt, known=False)
    if src == 'SCALAR':
        return V(cast(np.array(a[0]), dt), dt)
    if src == 'ARANGE':
        start, stop, step = a
        n = max(0, math.ceil((stop - start) / step))
        return V(cast(start + np.arange(n) * step, dt), dt)
    if src == 'LINSPACE':
        return V(cast(np.linspace(a[0], a[1], int(a[2])), dt), dt)
    if src == 'EYE':
        return V(cast(np.eye(int(a[0]), int(a[1])), dt), dt)
    raise ValueError(src)


# ------------------------------------------------------------------ case builders
CASES = []
NAMES = set()


def S(op, p=(), f=0.0, k=0, n=None):
    """A unary step. n defaults to len(p) (SPLIT_PICK passes n = number of sizes)."""
    assert op in STEP_OPS and len(p) <= MAX_P
    return {'op': op, 'p': list(p), 'f': float(f), 'k': k, 'n': len(p) if n is None else n}


def D(vals, dt='float32', shape=None, steps=()):
    """A literal-data input."""
    vals = np.asarray(vals)
    shape = vals.shape if shape is None else tuple(shape)
    vals = cast(vals.reshape(shape), dt)
    return {'src': 'DATA', 'dtype': dt, 'shape': list(shape), 'vals': vals, 'a': (0, 0, 0),
            'steps': list(steps)}


def C(src, dt='float32', shape=(), a=(0, 0, 0), steps=()):
    """A creation-op input."""
    a = tuple(a) + (0,) * (3 - len(a))
    return {'src': src, 'dtype': dt, 'shape': list(shape), 'a': a, 'steps': list(steps)}


def case(group, name, inputs, steps=(), combine='NONE', axis=0, err=False, tol=None):
    if isinstance(inputs, dict):
        inputs = [inputs]
    name = f'{group}/{name}'
    assert name not in NAMES, name
    NAMES.add(name)
    assert 1 <= len(inputs) <= MAX_IN and len(steps) <= MAX_STEPS
    ops = set()
    c = {'group': group, 'name': name, 'inputs': inputs, 'steps': list(steps),
         'combine': combine, 'axis': axis, 'err': err}
    if not err:
        vs = []
        for i in inputs:
            assert len(i['steps']) <= MAX_IN_STEPS
            v = ref_source(i)
            ops.add(i['src'])
            for st in i['steps']:
                v = ref_step(v, st)
                ops.add(st['op'])
            vs.append(v)
        v = vs[0] if combine == 'NONE' else ref_combine(combine, axis, vs)
        ops.add(combine)
        for st in steps:
            v = ref_step(v, st)
            ops.add(st['op'])
        assert v.a.ndim <= MAX_RANK
        c['out'] = v
        if tol is None:
            exact = ops <= EXACT_OPS | {'NONE', 'DATA', 'FULL', 'ZEROS', 'ONES', 'EMPTY', 'SCALAR', 'EYE'}
            tol = (0.0, 0.0) if v.dt not in FLOATS or exact else DEFAULT_TOL[v.dt]
        c['tol'] = tol
    CASES.append(c)


# ------------------------------------------------------------------ data generators
def q(shape, dt='float32', lo=-4, hi=4, den=8, steps=()):
    """Quantized values k/den: sums and products stay exact in float32."""
    return D(rng.integers(lo * den, hi * den + 1, size=shape) / den, dt, shape, steps)


def rn(shape, dt='float32', scale=1.0, shift=0.0, steps=()):
    return D(rng.standard_normal(shape) * scale + shift, dt, shape, steps)


def ri(shape, dt='int32', lo=-20, hi=20, steps=()):
    return D(rng.integers(lo, hi + 1, size=shape), dt, shape, steps)


def rb(shape, p=0.5, steps=()):
    return D(rng.random(shape) < p, 'bool', shape, steps)


_DATA_CACHE = {}


def data_for(dt, shape, kind='q'):
    """Random input of a dtype/shape/kind, shared by every case that asks for the same."""
    key = (dt, tuple(shape), kind)
    if key not in _DATA_CACHE:
        _DATA_CACHE[key] = _new_data(dt, shape, kind)
    return _DATA_CACHE[key]


def _new_data(dt, shape, kind):
    if dt == 'bool':
        return rb(shape)
    if dt not in FLOATS:
        return ri(shape, dt, -3, 3) if kind == 'small' else ri(shape, dt)
    if kind == 'n':
        return rn(shape, dt)
    if kind == 'small':   # for products: powers of two keep them exact
        return D(rng.choice([0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 1.0, 1.0], size=shape), dt, shape)
    return q(shape, dt)


def sname(shape):
    return 'x'.join(map(str, shape)) if shape else 'scalar'


def aname(axes):
    return 'all' if not axes else 'ax' + '_'.join(str(a).replace('-', 'm') for a in axes)


# ================================================================== creation
def gen_creation():
    g = 'create_from_data'
    samples = {
        'bool': [1, 0, 1, 1, 0, 0], 'int8': [-128, 127, 0, -1, 5, 3],
        'int16': [-32768, 32767, 0, -1, 300, -7], 'int32': [-2**31, 2**31 - 1, 0, -1, 70000, 9],
        'int64': [-2**53, 2**53, 0, -1, 2**40, 11], 'uint8': [0, 255, 1, 128, 7, 200],
        'uint16': [0, 65535, 1, 40000, 7, 3], 'uint32': [0, 2**32 - 1, 1, 2**31, 7, 3],
        'uint64': [0, 2**63, 1, 2**53, 7, 3],
        'float16': [65504.0, -0.5, 2.0**-24, np.inf, np.nan, -1.0009765625],
        'bfloat16': [1.5, -2.0, 2.0**100, 0.0078125, -np.inf, 3.0],
        'float32': [np.float32(1e-30), np.float32(3.4e38), np.nan, -np.inf, -0.0, np.float32(0.1)],
        'float64': [1e300, -1e-300, 0.1, np.nan, np.inf, -2.5]}
    for dt, vals in samples.items():
        case(g, dt, D(np.array(vals, dtype=np.float64 if dt in FLOATS else object)
                      .astype(np.float64 if dt in FLOATS else (np.uint64 if dt == 'uint64' else np.int64)),
                      dt, (2, 3)))
    case(g, 'scalar_f32', D(3.5, 'float32', ()))
    case(g, 'scalar_i32', D(-7, 'int32', ()))
    case(g, 'scalar_bool', D(1, 'bool', ()))
    case(g, 'scalar_f16', D(0.25, 'float16', ()))
    case(g, 'len1_f64', D([2.25], 'float64'))
    case(g, 'len7_i64', ri((7,), 'int64'))
    case(g, 'rank3_i16', ri((2, 1, 3), 'int16'))
    case(g, 'rank5_f32', q((1, 2, 1, 3, 2)))
    case(g, 'odd_129_f32', rn((129,)))
    case(g, 'empty_0x3', D(np.zeros((0, 3)), 'float32', (0, 3)))

    g = 'create_fill'
    case(g, 'full_f32', C('FULL', 'float32', (2, 3), (2.5,)))
    case(g, 'full_i32', C('FULL', 'int32', (4,), (-7,)))
    case(g, 'full_bool', C('FULL', 'bool', (3,), (1,)))
    case(g, 'full_f16_rounds', C('FULL', 'float16', (2, 2), (0.1,)))
    case(g, 'full_bf16', C('FULL', 'bfloat16', (3,), (-1.25,)))
    case(g, 'full_f64_scalar', C('FULL', 'float64', (), (math.pi,)))
    case(g, 'full_u8_rank4', C('FULL', 'uint8', (2, 1, 2, 3), (200,)))
    case(g, 'full_zero_size', C('FULL', 'float32', (2, 0), (1,)))
    case(g, 'full_i64_neg', C('FULL', 'int64', (2,), (-2.0**40,)))
    case(g, 'zeros_i64', C('ZEROS', 'int64', (3, 2)))
    case(g, 'zeros_f16', C('ZEROS', 'float16', (5,)))
    case(g, 'zeros_f32_scalar', C('ZEROS', 'float32', ()))
    case(g, 'ones_u8', C('ONES', 'uint8', (2, 2, 2)))
    case(g, 'ones_bool', C('ONES', 'bool', (3, 1)))
    case(g, 'ones_f32_scalar', C('ONES', 'float32', ()))
    case(g, 'ones_f64_129', C('ONES', 'float64', (129,)))
    case(g, 'empty_f32', C('EMPTY', 'float32', (3, 4)))
    case(g, 'empty_i32_zero', C('EMPTY', 'int32', (0,)))
    case(g, 'empty_f16_scalar', C('EMPTY', 'float16', ()))
    case(g, 'scalar_f32', C('SCALAR', 'float32', (), (1.25,)))
    case(g, 'scalar_i32', C('SCALAR', 'int32', (), (-3,)))
    case(g, 'scalar_bool', C('SCALAR', 'bool', (), (2,)))
    case(g, 'scalar_f64', C('SCALAR', 'float64', (), (math.e,)))
    case(g, 'scalar_f16', C('SCALAR', 'float16', (), (1 / 3,)))
    case(g, 'full_like_i32', ri((2, 3)), [S('FULL_LIKE', f=4)])
    case(g, 'full_like_f16', q((3,), 'float16'), [S('FULL_LIKE', f=-0.75)])
    case(g, 'zeros_like_f16', q((2, 2), 'float16'), [S('ZEROS_LIKE')])
    case(g, 'zeros_like_bool', rb((4,)), [S('ZEROS_LIKE')])
    case(g, 'ones_like_bool', rb((2, 3)), [S('ONES_LIKE')])
    case(g, 'ones_like_f64_scalar', D(5.0, 'float64', ()), [S('ONES_LIKE')])
    case(g, 'empty_like_f64', rn((3, 2), 'float64'), [S('EMPTY_LIKE')])
    case(g, 'full_like_of_view', q((2, 3, 4)), [S('PERMUTE', (2, 0, 1)), S('SLICE', (0, 0, END, 2)),
                                               S('FULL_LIKE', f=1.5)])
    case(g, 'ones_like_then_sum', ri((3, 4)), [S('ONES_LIKE'), S('SUM', (1,))])

    g = 'create_arange'
    ftol = (1e-6, 1e-6)
    for name, args, dt, tol in [
            ('i32_basic', (0, 10, 1), 'int32', None), ('i32_step3', (0, 10, 3), 'int32', None),
            ('i32_neg_step', (10, 0, -3), 'int32', None), ('i64_neg_start', (-5, 5, 2), 'int64', None),
            ('i32_empty', (5, 0, 1), 'int32', None), ('i8_neg', (-3, 4, 1), 'int8', None),
            ('f32_quarter', (0, 1, 0.25), 'float32', ftol), ('f32_frac', (0.5, 3, 0.7), 'float32', ftol),
            ('f64_neg_frac', (1, -1, -0.5), 'float64', None), ('f64_tenth', (0, 1, 0.1), 'float64', None),
            ('f32_neg_frac', (2.5, -1.0, -0.75), 'float32', ftol), ('f16_ints', (0, 5, 1), 'float16', None),
            ('f32_129', (0, 129, 1), 'float32', None), ('u8', (2, 9, 2), 'uint8', None)]:
        case(g, name, C('ARANGE', dt, (), args), tol=tol)
    case(g, 'reshaped', C('ARANGE', 'float32', (), (0, 12, 1), [S('RESHAPE', (3, 4))]))
    case(g, 'then_sum_i64', C('ARANGE', 'int32', (), (1, 101, 1)), [S('SUM')])

    g = 'create_linspace'
    for name, args, dt in [('f32_unit', (0, 1, 5), 'float32'), ('f64_neg', (-2, 3, 7), 'float64'),
                           ('f32_descending', (5, 1, 3), 'float32'), ('f32_n1', (3, 7, 1), 'float32'),
                           ('i32_exact', (0, 10, 6), 'int32'), ('f16_two', (0, 1, 2), 'float16'),
                           ('f32_129', (0, 1, 129), 'float32'), ('f64_same_ends', (2, 2, 4), 'float64')]:
        case(g, name, C('LINSPACE', dt, (), args), tol=(1e-6, 1e-6) if dt == 'float32' else None)

    g = 'create_eye'
    for n, m, dt in [(3, 3, 'float32'), (2, 4, 'int32'), (4, 2, 'float64'), (1, 1, 'bool'),
                     (3, 5, 'float16'), (5, 3, 'bool'), (7, 7, 'int64')]:
        case(g, f'{n}x{m}_{dt}', C('EYE', dt, (), (n, m)))
    case(g, 'eye_sum_axis0', C('EYE', 'float32', (), (3, 5)), [S('SUM', (0,))])


# ================================================================== reductions
RED_SHAPES = [
    ((7,), [(), (0,), (-1,)]),
    ((3, 5), [(), (0,), (1,), (-1,), (-2,), (1, 0), (-1, 0)]),
    ((2, 3, 4), [(), (0,), (1,), (2,), (-1,), (0, 2), (-3, -1), (1, 2), (0, 1, 2)]),
    ((1, 1), [(), (0,), (1,)]),
    ((4, 1, 3), [(), (1,), (-2,), (0, 2)]),
    ((1, 7, 129), [(), (0,), (2,), (1, 2), (-1, -3)]),
    ((129,), [(0,)]),
    ((), [()]),
]


def red_cases(g, op, dt, kind='q', every=1, both_keepdim=False, f=0.0, tol=None, tag='', phase=0):
    """op over RED_SHAPES (every n-th combination from phase), keepdim alternating unless both_keepdim."""
    idx = 0
    for shape, axes_list in RED_SHAPES:
        x = data_for(dt, shape, kind)
        for axes in axes_list:
            idx += 1
            if (idx - 1 + phase) % every:
                continue
            cnt = int(np.prod([shape[a] for a in norm_axes(axes, len(shape))]))
            if (op in ('VAR', 'STD') and cnt <= f) or (op == 'PROD' and dt == 'float16' and cnt > 64):
                continue
            for kd in ((0, 1) if both_keepdim else (idx % 2,)):
                nm = f'{op.lower()}_{dt}{tag}_{sname(shape)}_{aname(axes)}' + ('_kd' if kd else '')
                case(g, nm, x, [S(op, axes, f=f, k=kd)], tol=tol)


def gen_reductions():
    g = 'reduce_sum'
    red_cases(g, 'SUM', 'float32', both_keepdim=True)
    red_cases(g, 'SUM', 'float64', kind='n', every=3)
    red_cases(g, 'SUM', 'int32', every=3, phase=1)
    red_cases(g, 'SUM', 'bool', every=4, phase=2)
    red_cases(g, 'SUM', 'float16', every=4, phase=3)
    for dt in ('int8', 'uint8', 'int16', 'uint32', 'int64'):
        case(g, f'sum_{dt}_widens', ri((3, 5), dt, 0, 100) if dt in UNSIGNED else ri((3, 5), dt, -100, 100),
             [S('SUM', (1,))])
    case(g, 'sum_int8_no_overflow', D(np.full((200,), 127), 'int8'), [S('SUM')])
    case(g, 'sum_bf16', q((4, 6), 'bfloat16'), [S('SUM', (0,))])

    g = 'reduce_prod'
    red_cases(g, 'PROD', 'float32', kind='small', every=2)
    red_cases(g, 'PROD', 'int32', kind='small', every=3, phase=1)
    red_cases(g, 'PROD', 'bool', every=5, phase=2)
    red_cases(g, 'PROD', 'float16', kind='small', every=5, phase=3)
    red_cases(g, 'PROD', 'float64', kind='small', every=5, phase=4)
    case(g, 'prod_f32_inexact', D([[1.5, 1.1, -0.3, 7.0], [0.9, 0.9, 0.9, 0.9]], 'float32'), [S('PROD', (1,))])
    case(g, 'prod_f32_zero', D([[1.5, 0.0, -3.0], [2.0, 2.0, 2.0]], 'float32'), [S('PROD', (1,))])
    case(g, 'prod_f16_overflow_inf', D(np.full((40,), 2.0), 'float16'), [S('PROD')])
    case(g, 'prod_uint8_widens', ri((2, 4), 'uint8', 1, 9), [S('PROD', (1,))])

    g = 'reduce_maxmin'
    for op in ('MAX', 'MIN'):
        ph = 0 if op == 'MAX' else 1
        red_cases(g, op, 'float32', every=2, phase=ph)
        red_cases(g, op, 'int32', every=3, phase=ph)
        red_cases(g, op, 'bool', every=5, phase=ph + 2)
        red_cases(g, op, 'float16', every=5, phase=ph + 3)
        red_cases(g, op, 'float64', kind='n', every=5, phase=ph + 4)
        case(g, f'{op.lower()}_negative_only', D([-5, -3, -9, -1.5], 'float32'), [S(op)])
        case(g, f'{op.lower()}_uint8', ri((3, 4), 'uint8', 0, 255), [S(op, (0,))])
        case(g, f'{op.lower()}_int64_big', D([-2**40, 2**41, 3, -7], 'int64'), [S(op)])

    g = 'reduce_mean'
    red_cases(g, 'MEAN', 'float32', kind='n', every=2)
    red_cases(g, 'MEAN', 'float32', kind='n', every=2, phase=1)
    red_cases(g, 'MEAN', 'float64', kind='n', every=4, phase=2)
    red_cases(g, 'MEAN', 'int32', every=3, tol=(1e-6, 1e-6), phase=1)
    red_cases(g, 'MEAN', 'bool', every=5, tol=(1e-6, 1e-6), phase=3)
    red_cases(g, 'MEAN', 'float16', every=4, phase=1)

    g = 'reduce_varstd'
    for op in ('VAR', 'STD'):
        for corr in (0.0, 1.0):
            tag = f'_c{int(corr)}'
            ph = int(corr) + (2 if op == 'STD' else 0)
            red_cases(g, op, 'float32', kind='n', every=3, f=corr, tol=(1e-5, 1e-4), tag=tag, phase=ph)
            red_cases(g, op, 'float64', kind='n', every=6, f=corr, tag=tag, phase=ph)
        case(g, f'{op.lower()}_int32_c1', ri((3, 5)), [S(op, (1,), f=1)], tol=(1e-5, 1e-5))
        case(g, f'{op.lower()}_bool_c0', rb((4, 6)), [S(op, (0,), f=0)], tol=(1e-5, 1e-5))
        case(g, f'{op.lower()}_f16_c1', rn((3, 8), 'float16'), [S(op, (1,), f=1)], tol=(2e-3, 4e-3))
        case(g, f'{op.lower()}_f32_c2', rn((2, 6)), [S(op, (1,), f=2)], tol=(1e-5, 1e-4))
        case(g, f'{op.lower()}_f32_offset', rn((5, 64), shift=100.0), [S(op, (1,), f=1, k=1)],
             tol=(1e-4, 2e-3))
        case(g, f'{op.lower()}_f32_const', C('FULL', 'float32', (4, 6), (3.25,)), [S(op, (1,), f=1)],
             tol=(1e-6, 1e-5))

    g = 'reduce_anyall'
    for op in ('ANY', 'ALL'):
        ph = 0 if op == 'ANY' else 1
        red_cases(g, op, 'bool', every=2, phase=ph)
        red_cases(g, op, 'int32', kind='small', every=4, phase=ph + 1)
        red_cases(g, op, 'float32', every=6, phase=ph + 3)
        case(g, f'{op.lower()}_all_false', D(np.zeros((3, 4)), 'bool'), [S(op, (1,))])
        case(g, f'{op.lower()}_all_true', D(np.ones((3, 4)), 'bool'), [S(op, (0,), k=1)])
        case(g, f'{op.lower()}_nan_is_true', D([[0, np.nan], [0, 0], [np.nan, np.nan]], 'float32'),
             [S(op, (1,))])
        case(g, f'{op.lower()}_f16_zeros', D([[0, -0.0, 0.5], [0, 0, 0]], 'float16'), [S(op, (1,))])

    g = 'reduce_argmaxmin'
    for op in ('ARGMAX', 'ARGMIN'):
        for dt in ('float32', 'int32', 'float16', 'float64', 'bool'):
            for shape, axes in [((7,), (0, -1)), ((3, 5), (0, 1, -1)), ((2, 3, 4), (0, 1, 2, -2)),
                                ((1, 7, 129), (2, 1)), ((4, 1, 3), (1,))]:
                x = data_for(dt, shape, 'small')      # few distinct values: many ties
                for i, ax in enumerate(axes):
                    if dt != 'float32' and (i + len(shape) + len(dt)) % 2:
                        continue
                    kd = (i + len(shape)) % 2
                    case(g, f'{op.lower()}_{dt}_{sname(shape)}_ax{ax}'.replace('-', 'm') + ('_kd' if kd else ''),
                         x, [S(op, (ax,), k=kd)])
        case(g, f'{op.lower()}_ties_first', D([[1, 3, 3, 0], [2, 2, 2, 2], [5, 1, 5, 1]], 'float32'),
             [S(op, (1,))])
        case(g, f'{op.lower()}_ties_first_ax0', D([[1, 3, 3, 0], [1, 3, 3, 0], [0, 9, -1, 0]], 'int32'),
             [S(op, (0,))])
        case(g, f'{op.lower()}_inf', D([1, np.inf, -np.inf, 3], 'float32'), [S(op, (0,))])

    g = 'reduce_softmax'
    for op in ('SOFTMAX', 'LOG_SOFTMAX', 'LOGSUMEXP'):
        for dt, every in (('float32', 1), ('float64', 3), ('float16', 4)):
            j = 0
            for shape, axes in [((7,), (0,)), ((3, 5), (0, 1, -1)), ((2, 3, 4), (0, 1, -1)),
                                ((1, 1), (1,)), ((4, 1, 3), (1, -1)), ((1, 7, 129), (2, 1))]:
                x = data_for(dt, shape, 'n')
                for ax in axes:
                    j += 1
                    if (j - 1) % every:
                        continue
                    kd = j % 2 if op == 'LOGSUMEXP' else 0
                    case(g, f'{op.lower()}_{dt}_{sname(shape)}_ax{ax}'.replace('-', 'm') + ('_kd' if kd else ''),
                         x, [S(op, (ax,), k=kd)])
        big = D([[1000, 1001, 999, 1000.5], [-1000, -1002, -999, -1001], [0, 80, -80, 40]], 'float32')
        case(g, f'{op.lower()}_stable_large', big, [S(op, (1,))], tol=(1e-5, 1e-5))
        case(g, f'{op.lower()}_stable_large_f16', D([[60000, 60001, 59999], [-60000, -59000, -59900]], 'float16'),
             [S(op, (1,))], tol=(1e-3, 4e-3))
        case(g, f'{op.lower()}_neg_inf', D([[0, -np.inf, 1], [2, -np.inf, -np.inf]], 'float32'), [S(op, (-1,))])

    g = 'reduce_cumsum'
    for dt, kind in (('float32', 'q'), ('int32', 'q'), ('bool', 'q'), ('float16', 'q'), ('float64', 'n')):
        for shape, axes in [((7,), (0, -1)), ((3, 5), (0, 1)), ((2, 3, 4), (0, 1, 2, -2)),
                            ((1, 7, 129), (2,)), ((129,), (0,)), ((4, 1, 3), (1,))]:
            x = data_for(dt, shape, kind)
            for i, ax in enumerate(axes):
                if dt != 'float32' and (i + len(shape) + len(dt)) % 2:
                    continue
                case(g, f'cumsum_{dt}_{sname(shape)}_ax{ax}'.replace('-', 'm'), x, [S('CUMSUM', (ax,))])
    case(g, 'cumsum_uint8_widens', ri((10,), 'uint8', 200, 255), [S('CUMSUM', (0,))])
    case(g, 'cumsum_int8_widens', D(np.full((5,), 120), 'int8'), [S('CUMSUM', (0,))])
    case(g, 'cumsum_f32_1000', D(np.ones(1000), 'float32'), [S('CUMSUM', (0,))])

    g = 'reduce_empty'
    j = 0
    for dt in ('float32', 'int32', 'bool'):
        shapes = [((2, 0), (1,)), ((0, 3), (0,)), ((2, 0), ()), ((0, 3), (1,)), ((3, 0, 2), (1,))]
        for shape, axes in shapes if dt == 'float32' else shapes[:3]:
            x = D(np.zeros(shape), dt, shape)
            ops = ['SUM', 'PROD', 'MAX', 'MIN', 'ANY', 'ALL'] if dt != 'bool' else ['SUM', 'ANY', 'ALL']
            for op in ops:
                j += 1
                kd = j % 2
                reduced = range(len(shape)) if not axes else axes
                none = op in ('MAX', 'MIN') and any(shape[a] == 0 for a in reduced)  # an error, like PyTorch
                case(g, f'{op.lower()}_{dt}_{sname(shape)}_{aname(axes)}' + ('_kd' if kd else ''),
                     x, [S(op, axes, k=kd)], err=none)
    case(g, 'cumsum_empty', D(np.zeros((0, 3)), 'float32', (0, 3)), [S('CUMSUM', (0,))])
    case(g, 'max_f16_empty', D(np.zeros((2, 0)), 'float16', (2, 0)), [S('MAX', (1,))], err=True)
    case(g, 'max_i64_empty', D(np.zeros((2, 0)), 'int64', (2, 0)), [S('MAX', (1,))], err=True)

    g = 'reduce_nan'
    nanx = D([[1, np.nan, 3], [4, 5, 6], [np.nan, -1, np.nan], [-np.inf, 2, np.inf]], 'float32')
    for op in ('MAX', 'MIN', 'SUM'):
        for axes in ((), (0,), (1,)):
            case(g, f'{op.lower()}_f32_{aname(axes)}', nanx, [S(op, axes)])
    case(g, 'argmax_nan_is_max', nanx, [S('ARGMAX', (1,))])
    case(g, 'argmax_nan_is_max_ax0', nanx, [S('ARGMAX', (0,))])
    case(g, 'argmax_nan_first', D([1, np.nan, 7, np.nan], 'float32'), [S('ARGMAX', (0,))])
    case(g, 'max_f16_nan', D([[1, np.nan], [2, 3]], 'float16'), [S('MAX', (1,))])
    case(g, 'min_f64_nan', D([[1, np.nan], [2, 3]], 'float64'), [S('MIN', (0,))])
    case(g, 'max_nan_last', D([1, 2, 3, np.nan], 'float32'), [S('MAX')])
    case(g, 'min_nan_first', D([np.nan, 2, 3, -1], 'float32'), [S('MIN')])
    case(g, 'mean_nan', D([[1, np.nan], [2, 3]], 'float32'), [S('MEAN', (1,))])


# ================================================================== movement
def gen_movement():
    x234 = q((2, 3, 4))
    x35 = q((3, 5))
    x7 = q((7,))
    i234 = ri((2, 3, 4))
    b35 = rb((3, 5))
    h234 = q((2, 3, 4), 'float16')
    d234 = rn((2, 3, 4), 'float64')

    g = 'move_reshape'
    for shp in [(4, 6), (24,), (-1,), (2, -1, 2), (4, -1), (1, 24, 1), (2, 3, 4), (3, 2, 2, 2)]:
        case(g, 'f32_' + sname(shp).replace('-1', 'm1'), x234, [S('RESHAPE', shp)])
    case(g, 'i32_6x4', i234, [S('RESHAPE', (6, 4))])
    case(g, 'bool_5x3', b35, [S('RESHAPE', (5, 3))])
    case(g, 'f16_m1x2', h234, [S('RESHAPE', (-1, 2))])
    case(g, 'f64_12x2', d234, [S('RESHAPE', (12, 2))])
    case(g, 'scalar_to_1x1', D(2.5, 'float32', ()), [S('RESHAPE', (1, 1))])
    case(g, 'len1_to_scalar', D([4], 'int32'), [S('RESHAPE', ())])
    case(g, 'of_permuted', x234, [S('PERMUTE', (2, 0, 1)), S('RESHAPE', (4, 6))])
    case(g, 'of_sliced', x35, [S('SLICE', (1, 0, END, 2)), S('RESHAPE', (9,))])
    case(g, 'zero_size', D(np.zeros((0, 6)), 'float32', (0, 6)), [S('RESHAPE', (3, 0, 2))])

    g = 'move_permute'
    for order in [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]:
        case(g, 'f32_' + ''.join(map(str, order)), x234, [S('PERMUTE', order)])
    case(g, 'i32_201', i234, [S('PERMUTE', (2, 0, 1))])
    case(g, 'f16_120', h234, [S('PERMUTE', (1, 2, 0))])
    case(g, 'f64_210', d234, [S('PERMUTE', (2, 1, 0))])
    case(g, 'bool_10', b35, [S('PERMUTE', (1, 0))])
    case(g, 'f32_4x1x3_201', q((4, 1, 3)), [S('PERMUTE', (2, 0, 1))])
    case(g, 'f32_rank4', q((2, 3, 1, 2)), [S('PERMUTE', (3, 1, 0, 2))])
    case(g, 'f32_rank5', q((2, 1, 3, 2, 2)), [S('PERMUTE', (4, 2, 0, 3, 1))])
    case(g, 'twice', x234, [S('PERMUTE', (2, 0, 1)), S('PERMUTE', (2, 0, 1))])
    case(g, 'odd_129', q((7, 129)), [S('PERMUTE', (1, 0))])
    g = 'move_transpose'
    case(g, 'f32_2d', x35, [S('TRANSPOSE', (0, 1))])
    case(g, 'f32_02', x234, [S('TRANSPOSE', (0, 2))])
    case(g, 'f32_neg', x234, [S('TRANSPOSE', (-1, -3))])
    case(g, 'f32_12', x234, [S('TRANSPOSE', (1, 2))])
    case(g, 'same_axis', x234, [S('TRANSPOSE', (1, 1))])
    case(g, 'i32_m1_0', i234, [S('TRANSPOSE', (-1, 0))])
    case(g, 'bool', b35, [S('TRANSPOSE', (1, 0))])
    case(g, 'double_transpose', x35, [S('TRANSPOSE', (0, 1)), S('TRANSPOSE', (1, 0))])

    g = 'move_expand'
    case(g, 'col', q((3, 1)), [S('EXPAND', (3, 4))])
    case(g, 'len1', q((1,)), [S('EXPAND', (5,))])
    case(g, 'new_leading', q((1, 3)), [S('EXPAND', (2, 4, 3))])
    case(g, 'keep_m1', q((4, 1, 3)), [S('EXPAND', (-1, 5, -1))])
    case(g, 'both', q((1, 1)), [S('EXPAND', (2, 3))])
    case(g, 'row_to_2d', q((3,)), [S('EXPAND', (2, 3))])
    case(g, 'scalar', D(7, 'int32', ()), [S('EXPAND', (2, 2))])
    case(g, 'bool', rb((1, 4)), [S('EXPAND', (3, 4))])
    case(g, 'f16', q((2, 1), 'float16'), [S('EXPAND', (2, 129))])
    case(g, 'identity', x35, [S('EXPAND', (3, 5))])
    case(g, 'then_sum', q((3, 1)), [S('EXPAND', (3, 4)), S('SUM', (1,))])
    case(g, 'then_mul', q((1, 3)), [S('EXPAND', (4, 3)), S('MUL_S', f=3)])
    case(g, 'i32_then_sum_all', ri((1, 3)), [S('EXPAND', (5, 3)), S('SUM')])

    g = 'move_pad'
    case(g, 'f32_2d', x35, [S('PAD', (1, 0, 2, 3))])
    case(g, 'f32_value', x35, [S('PAD', (0, 2, 1, 1), f=-1.5)])
    case(g, 'f32_3d', x234, [S('PAD', (1, 0, 2, 0, 1, 1), f=9)])
    case(g, 'i32_value', ri((2, 3)), [S('PAD', (1, 1, 1, 1), f=7)])
    case(g, 'bool_true', rb((2, 2)), [S('PAD', (1, 0, 0, 1), f=1)])
    case(g, 'f16_half', q((3,), 'float16'), [S('PAD', (2, 3), f=0.5)])
    case(g, 'zero_pad', x35, [S('PAD', (0, 0, 0, 0))])
    case(g, 'scalar', D(3.0, 'float32', ()), [S('PAD', ())])
    case(g, 'then_sum', x35, [S('PAD', (1, 1, 1, 1), f=2), S('SUM', (0,))])
    case(g, 'of_flip', x7, [S('FLIP', (0,)), S('PAD', (3, 1), f=-np.inf)])
    case(g, 'empty_input', D(np.zeros((0, 2)), 'float32', (0, 2)), [S('PAD', (1, 1, 0, 1), f=4)])
    g = 'move_shrink'
    case(g, 'f32_2d', x35, [S('SHRINK', (1, 2, 3, 4))])
    case(g, 'f32_3d', x234, [S('SHRINK', (1, 0, 1, 2, 3, 4))])
    case(g, 'identity', x35, [S('SHRINK', (0, 0, 3, 5))])
    case(g, 'zero_size', x35, [S('SHRINK', (1, 1, 1, 3))])
    case(g, 'i32', i234, [S('SHRINK', (0, 1, 1, 2, 3, 3))])
    case(g, 'pad_then_shrink', x35, [S('PAD', (2, 2, 2, 2)), S('SHRINK', (1, 3, 6, 8))])

    g = 'move_flip'
    case(g, '1d', x7, [S('FLIP', (0,))])
    for axes in [(0,), (1,), (0, 1), (-1,)]:
        case(g, '2d_' + aname(axes), x35, [S('FLIP', axes)])
    case(g, '3d_ax0_2', x234, [S('FLIP', (0, 2))])
    case(g, '3d_all', x234, [S('FLIP', (0, 1, 2))])
    case(g, 'i32', i234, [S('FLIP', (1,))])
    case(g, 'bool', b35, [S('FLIP', (-2,))])
    case(g, 'f16', h234, [S('FLIP', (2,))])
    case(g, 'twice', x35, [S('FLIP', (1,)), S('FLIP', (1,))])
    case(g, 'odd_129', q((129,)), [S('FLIP', (0,))])

    g = 'move_squeeze'
    x413 = q((4, 1, 3))
    case(g, 'squeeze_1', x413, [S('SQUEEZE', (1,))])
    case(g, 'squeeze_m2', x413, [S('SQUEEZE', (-2,))])
    case(g, 'squeeze_all_to_scalar', q((1, 1)), [S('SQUEEZE', (ALL,))])
    case(g, 'squeeze_all', q((1, 3, 1, 2)), [S('SQUEEZE', (ALL,))])
    case(g, 'squeeze_all_none', x35, [S('SQUEEZE', (ALL,))])
    case(g, 'unsqueeze_0', x35, [S('UNSQUEEZE', (0,))])
    case(g, 'unsqueeze_1', x35, [S('UNSQUEEZE', (1,))])
    case(g, 'unsqueeze_2', x35, [S('UNSQUEEZE', (2,))])
    case(g, 'unsqueeze_m1', x35, [S('UNSQUEEZE', (-1,))])
    case(g, 'unsqueeze_m3', x35, [S('UNSQUEEZE', (-3,))])
    case(g, 'unsqueeze_scalar', D(1.5, 'float32', ()), [S('UNSQUEEZE', (0,))])
    case(g, 'roundtrip', i234, [S('UNSQUEEZE', (1,)), S('SQUEEZE', (1,))])
    g = 'move_flatten'
    for se in [(0, -1), (1, 2), (0, 1), (-2, -1), (1, 1), (0, 0)]:
        case(g, f'3d_{se[0]}_{se[1]}'.replace('-', 'm'), x234, [S('FLATTEN', se)])
    case(g, '4d_1_2', q((2, 3, 4, 1)), [S('FLATTEN', (1, 2))])
    case(g, 'of_transposed', x234, [S('TRANSPOSE', (0, 2)), S('FLATTEN', (0, 1))])
    case(g, 'i32_all', i234, [S('FLATTEN', (0, 2))])

    g = 'move_slice'
    for args in [(1, 5, 1), (0, END, 2), (-3, END, 1), (END, END, -1), (5, 1, -2), (-1, -8, -1),
                 (2, 100, 1), (-100, 3, 1), (4, 2, 1), (0, END, 3), (0, END, 10), (6, END, -3),
                 (3, 3, 1), (-2, -5, -1), (100, -100, -2), (-7, 7, 1), (1, -1, 2)]:
        nm = '_'.join('end' if a == END else str(a).replace('-', 'm') for a in args)
        case(g, '1d_' + nm, x7, [S('SLICE', (0,) + args)])
    case(g, '2d_ax1_negstep', x35, [S('SLICE', (1, END, END, -2))])
    case(g, '2d_axm1', x35, [S('SLICE', (-1, 1, 4, 1))])
    case(g, '2d_ax0_neg', x35, [S('SLICE', (0, -1, END, -1))])
    case(g, '3d_ax1', x234, [S('SLICE', (1, 2, 0, -1))])
    case(g, '3d_both', x234, [S('SLICE', (2, 1, END, 2)), S('SLICE', (0, END, END, -1))])
    case(g, 'i32', i234, [S('SLICE', (2, -1, 0, -2))])
    case(g, 'bool', b35, [S('SLICE', (1, 0, END, 3))])
    case(g, 'odd_129_step7', q((129,)), [S('SLICE', (0, 3, END, 7))])
    case(g, 'slice_of_slice', q((20,)), [S('SLICE', (0, 2, 18, 3)), S('SLICE', (0, END, END, -2))])

    g = 'move_cat'
    case(g, 'ax0', [q((2, 3)), q((4, 3))], combine='CAT', axis=0)
    case(g, 'ax1_three', [q((2, 3)), q((2, 1)), q((2, 2))], combine='CAT', axis=1)
    case(g, 'axm1', [q((2, 3)), q((2, 2))], combine='CAT', axis=-1)
    case(g, '3d_ax1', [q((2, 1, 4)), q((2, 3, 4)), q((2, 2, 4)), q((2, 1, 4))], combine='CAT', axis=1)
    case(g, '1d', [q((3,)), q((4,))], combine='CAT', axis=0)
    case(g, 'single', [q((2, 3))], combine='CAT', axis=0)
    case(g, 'i32', [ri((3, 2)), ri((3, 3))], combine='CAT', axis=1)
    case(g, 'bool', [rb((1, 2)), rb((2, 2))], combine='CAT', axis=0)
    case(g, 'f16', [q((2,), 'float16'), q((3,), 'float16')], combine='CAT', axis=0)
    case(g, 'with_empty', [q((2, 3)), D(np.zeros((0, 3)), 'float32', (0, 3)), q((1, 3))],
         combine='CAT', axis=0)
    case(g, 'of_views', [q((3, 2), steps=[S('TRANSPOSE', (0, 1))]),
                         q((2, 6), steps=[S('SLICE', (1, 0, END, 2)), S('FLIP', (0,))])],
         combine='CAT', axis=0)
    case(g, 'then_sum', [q((2, 3)), q((1, 3))], combine='CAT', axis=0, steps=[S('SUM', (0,))])
    g = 'move_stack'
    xs = [q((2, 3)), q((2, 3)), q((2, 3))]
    for ax in (0, 1, 2, -1, -3):
        case(g, f'ax{ax}'.replace('-', 'm'), xs, combine='STACK', axis=ax)
    case(g, '1d', [q((4,)), q((4,))], combine='STACK', axis=1)
    case(g, 'scalars', [D(1, 'float32', ()), D(2, 'float32', ()), D(3, 'float32', ())], combine='STACK', axis=0)
    case(g, 'i32', [ri((3,)), ri((3,))], combine='STACK', axis=0)
    case(g, 'of_views', [q((3, 2), steps=[S('TRANSPOSE', (0, 1))]), q((2, 3), steps=[S('FLIP', (1,))])],
         combine='STACK', axis=1)

    g = 'move_split'
    for sizes, ax, shp in [((2, 5), 0, (7,)), ((1, 2, 2), 1, (3, 5)), ((1, 2), -2, (3, 5)),
                           ((6,), 0, (6, 4)), ((0, 3), 0, (3, 2)), ((1, 1, 2), 2, (2, 3, 4))]:
        x = q(shp)
        for pick in range(len(sizes)):
            nm = f'{sname(shp)}_{"_".join(map(str, sizes))}_ax{ax}_p{pick}'.replace('-', 'm')
            case(g, nm, x, [S('SPLIT_PICK', tuple(sizes) + (ax,), k=pick, n=len(sizes))])
    case(g, 'i32_of_transposed', ri((4, 3)),
         [S('TRANSPOSE', (0, 1)), S('SPLIT_PICK', (1, 3, 1), k=1, n=2)])
    case(g, 'then_exp', rn((4, 3)), [S('SPLIT_PICK', (2, 2, 0), k=1, n=2), S('EXP')])

    g = 'move_repeat'
    x23 = q((2, 3))
    for reps in [(2, 1), (1, 3), (2, 2), (1, 1), (2, 1, 2), (1, 1, 1, 2)]:
        case(g, 'f32_' + sname(reps), x23, [S('REPEAT', reps)])
    case(g, '1d_to_2d', q((3,)), [S('REPEAT', (2, 2))])
    case(g, 'scalar', D(4, 'float32', ()), [S('REPEAT', (3,))])
    case(g, 'i32', ri((2, 2)), [S('REPEAT', (3, 2))])
    case(g, 'bool', rb((1, 3)), [S('REPEAT', (2, 2))])
    case(g, 'of_transposed', x23, [S('TRANSPOSE', (0, 1)), S('REPEAT', (2, 1))])
    case(g, 'then_sum', x23, [S('REPEAT', (3, 2)), S('SUM', (0,))])

    g = 'move_contiguous'
    case(g, 'transposed', x35, [S('TRANSPOSE', (0, 1)), S('CONTIGUOUS')])
    case(g, 'sliced', x7, [S('SLICE', (0, END, END, -2)), S('CONTIGUOUS')])
    case(g, 'expanded', q((3, 1)), [S('EXPAND', (3, 4)), S('CONTIGUOUS')])
    case(g, 'already', x35, [S('CONTIGUOUS')])
    case(g, 'padded_i32', ri((2, 2)), [S('PAD', (1, 0, 0, 1), f=-3), S('CONTIGUOUS')])
    case(g, 'then_reshape', x234, [S('PERMUTE', (1, 2, 0)), S('CONTIGUOUS'), S('RESHAPE', (-1,))])
    case(g, 'scalar', D(2.0, 'float64', ()), [S('CONTIGUOUS')])


def gen_chains():
    g = 'move_chain'
    x234 = q((2, 3, 4))
    r234 = rn((2, 3, 4))
    base = [S('PERMUTE', (2, 0, 1)), S('RESHAPE', (4, 6)), S('SLICE', (1, 0, END, 2)), S('FLIP', (0,))]
    case(g, 'permute_reshape_slice_flip', x234, base)
    case(g, 'pcsf_mul_sum', x234, base + [S('MUL_S', f=2), S('SUM', (0,))])
    case(g, 'pcsf_exp_max', r234, base + [S('EXP'), S('MAX', (1,), k=1)])
    case(g, 'pcsf_realize_softmax', r234, base + [S('REALIZE'), S('SOFTMAX', (0,))])
    case(g, 'pcsf_add_flip_mean', r234, base + [S('ADD_FLIP', (1,)), S('MEAN')])
    case(g, 'pcsf_argmax', x234, base + [S('ARGMAX', (1,))])
    case(g, 'transpose_contig_flat_negslice', x234,
         [S('TRANSPOSE', (0, 2)), S('CONTIGUOUS'), S('RESHAPE', (-1,)), S('SLICE', (0, -1, END, -3))])
    case(g, 'expand_permute_sum', q((3, 1)), [S('EXPAND', (2, 3, 4)), S('PERMUTE', (2, 0, 1)), S('SUM', (0, 2))])
    case(g, 'pad_flip_shrink_realize_slice', q((3, 4)),
         [S('PAD', (1, 2, 0, 3), f=5), S('FLIP', (0, 1)), S('SHRINK', (1, 2, 4, 7)), S('REALIZE'),
          S('SLICE', (1, END, END, -2))])
    case(g, 'negslice_addflip_max', q((5, 6)),
         [S('SLICE', (1, END, END, -1)), S('SLICE', (0, 3, 0, -1)), S('ADD_FLIP', (0,)), S('MAX', (1,))])
    case(g, 'arange_reshape_transpose_cumsum', C('ARANGE', 'float32', (), (0, 24, 1)),
         [S('RESHAPE', (2, 3, 4)), S('TRANSPOSE', (0, 2)), S('CUMSUM', (1,))])
    case(g, 'arange_i32_permute_sum', C('ARANGE', 'int32', (), (-12, 12, 1)),
         [S('RESHAPE', (2, 3, 4)), S('PERMUTE', (1, 2, 0)), S('SUM', (-1,))])
    case(g, 'realize_transpose_slice_logsoftmax', rn((4, 6)),
         [S('REALIZE'), S('TRANSPOSE', (0, 1)), S('SLICE', (0, 1, 5, 1)), S('LOG_SOFTMAX', (-1,))])
    case(g, 'expand_addflip_mean', q((1, 3)), [S('EXPAND', (4, 3)), S('ADD_FLIP', (0, 1)), S('MEAN', (0,))])
    case(g, 'repeat_flip_shrink', q((2, 3)), [S('REPEAT', (2, 2)), S('FLIP', (1,)), S('SHRINK', (1, 1, 4, 5))])
    case(g, 'pad_reshape_argmin', q((2, 3)), [S('PAD', (1, 0, 1, 1), f=-9), S('RESHAPE', (2, 8)),
                                             S('ARGMIN', (1,), k=1)])
    case(g, 'unsqueeze_expand_flatten_cumsum', q((3,)),
         [S('UNSQUEEZE', (0,)), S('EXPAND', (4, 3)), S('FLATTEN', (0, 1)), S('CUMSUM', (0,))])
    case(g, 'bool_permute_any', rb((2, 3, 4), 0.2), [S('PERMUTE', (2, 1, 0)), S('ANY', (0, 1))])
    case(g, 'bool_slice_sum', rb((6, 5)), [S('SLICE', (0, END, END, -2)), S('TRANSPOSE', (0, 1)), S('SUM', (1,))])
    case(g, 'f16_permute_slice_sum', q((2, 3, 4), 'float16'),
         [S('PERMUTE', (2, 0, 1)), S('SLICE', (0, 1, END, 2)), S('SUM', (0,))])
    case(g, 'i32_flip_transpose_prod', ri((3, 4), 'int32', -3, 3), [S('FLIP', (1,)), S('TRANSPOSE', (0, 1)),
                                                                   S('PROD', (1,))])
    case(g, 'ones_pad_cumsum', C('ONES', 'float32', (2, 3)), [S('PAD', (0, 1, 1, 0), f=2), S('CUMSUM', (1,))])
    case(g, 'expand_contig_reshape', q((1, 4)), [S('EXPAND', (3, 4)), S('CONTIGUOUS'), S('RESHAPE', (2, 6))])
    case(g, 'squeeze_unsqueeze_views', q((1, 3, 1, 4)),
         [S('SQUEEZE', (ALL,)), S('UNSQUEEZE', (1,)), S('PERMUTE', (2, 1, 0)), S('SLICE', (0, 3, END, -1))])
    case(g, 'split_of_permuted_exp', rn((2, 3, 4)), [S('PERMUTE', (2, 1, 0)), S('SPLIT_PICK', (1, 3, 0), k=1, n=2),
                                                     S('EXP')])
    case(g, 'cat_of_views_then_var', [rn((4, 3), steps=[S('TRANSPOSE', (0, 1))]),
                                      rn((3, 8), steps=[S('SLICE', (1, 0, END, 2))])],
         combine='CAT', axis=1, steps=[S('VAR', (1,), f=1)], tol=(1e-5, 1e-4))
    case(g, 'stack_flip_logsumexp', [rn((3, 4)), rn((3, 4), steps=[S('FLIP', (0,))])],
         combine='STACK', axis=0, steps=[S('LOGSUMEXP', (0,))])
    case(g, 'cast_after_views', rn((3, 4), scale=5), [S('TRANSPOSE', (0, 1)), S('CAST', k='int32'),
                                                    S('SUM', (0,))])
    case(g, 'same_buffer_two_views', rn((5, 5)), [S('ADD_FLIP', (0, 1)), S('ADD_FLIP', (1,)), S('STD', (0,), f=0)],
         tol=(1e-5, 1e-4))
    case(g, 'long_chain', q((4, 6)), [S('RESHAPE', (2, 2, 6)), S('PERMUTE', (2, 0, 1)), S('PAD', (1, 0, 0, 1, 0, 0)),
                                      S('FLIP', (0, 2)), S('SLICE', (0, END, END, -3)), S('SUM', (-1,), k=1)])


# ================================================================== indexing
def idx(vals, dt='int32', steps=()):
    return D(np.asarray(vals), dt, None, steps)


def gen_indexing():
    g = 'index_gather'
    t34 = q((3, 4))
    case(g, 'ax1', [t34, idx([[0, 3], [2, 2], [1, 0]])], combine='GATHER', axis=1)
    case(g, 'ax0', [t34, idx([[2, 0, 1, 1], [0, 0, 2, 1]])], combine='GATHER', axis=0)
    case(g, 'axm1', [t34, idx([[3, 2, 1, 0], [0, 0, 0, 0], [1, 3, 1, 3]])], combine='GATHER', axis=-1)
    case(g, '3d_ax1', [q((2, 3, 4)), idx(rng.integers(0, 3, (2, 2, 4)))], combine='GATHER', axis=1)
    case(g, '3d_ax2', [q((2, 3, 4)), idx(rng.integers(0, 4, (2, 3, 5)))], combine='GATHER', axis=2)
    case(g, 'index_i64', [t34, idx([[1], [3], [0]], 'int64')], combine='GATHER', axis=1)
    case(g, 'smaller_index', [t34, idx([[1, 3], [0, 2]])], combine='GATHER', axis=1)
    case(g, 'oob_is_zero', [t34, idx([[0, 9], [4, 1], [2, 100]])], combine='GATHER', axis=1)
    case(g, 'oob_ax0_zero', [ri((3, 4)), idx([[3, 0, 1, 7]])], combine='GATHER', axis=0)
    case(g, 'of_transposed', [q((4, 3), steps=[S('TRANSPOSE', (0, 1))]), idx([[0, 3], [2, 2], [1, 0]])],
         combine='GATHER', axis=1)
    case(g, 'index_view', [t34, idx([[0, 1, 2], [3, 2, 1]], steps=[S('TRANSPOSE', (0, 1))])],
         combine='GATHER', axis=1)
    case(g, 'i32_data', [ri((3, 4)), idx([[3, 3], [0, 1], [2, 0]])], combine='GATHER', axis=1)
    case(g, 'f16_data', [q((3, 4), 'float16'), idx([[3, 3], [0, 1], [2, 0]])], combine='GATHER', axis=1)
    case(g, 'bool_data', [rb((3, 4)), idx([[3, 3], [0, 1], [2, 0]])], combine='GATHER', axis=1)
    case(g, '1d', [q((7,)), idx([6, 0, 3, 3])], combine='GATHER', axis=0)
    case(g, 'then_sum', [t34, idx([[0, 3], [2, 2], [1, 0]])], combine='GATHER', axis=1, steps=[S('SUM', (1,))])

    g = 'index_select'
    t53 = q((5, 3))
    case(g, '1d_ax0', [t53, idx([4, 0, 2])], combine='INDEX_SELECT', axis=0)
    case(g, '2d_ax0', [t53, idx([[1, 1], [4, 0]])], combine='INDEX_SELECT', axis=0)
    case(g, '1d_ax1', [t53, idx([2, 0, 0, 1])], combine='INDEX_SELECT', axis=1)
    case(g, '2d_axm1', [t53, idx([[2, 1, 0]])], combine='INDEX_SELECT', axis=-1)
    case(g, '3d_ax1_2d', [q((2, 3, 4)), idx([[0, 2], [1, 1], [2, 0]])], combine='INDEX_SELECT', axis=1)
    case(g, 'scalar_index', [t53, idx(3)], combine='INDEX_SELECT', axis=0)
    case(g, 'index_i64', [t53, idx([3, 1], 'int64')], combine='INDEX_SELECT', axis=0)
    case(g, 'oob_is_zero', [t53, idx([1, 5, 99, 0])], combine='INDEX_SELECT', axis=0)
    case(g, 'oob_2d_ax1', [t53, idx([[0, 3], [7, 2]])], combine='INDEX_SELECT', axis=1)
    case(g, 'bool_data', [rb((4, 2)), idx([3, 0])], combine='INDEX_SELECT', axis=0)
    case(g, 'i32_data', [ri((4, 5)), idx([4, 4, 0])], combine='INDEX_SELECT', axis=1)
    case(g, 'of_flipped', [q((5, 3), steps=[S('FLIP', (0,))]), idx([0, 4])], combine='INDEX_SELECT', axis=0)
    case(g, 'embedding', [rn((10, 4)), idx([[1, 2, 4, 5], [4, 3, 2, 9]])], combine='INDEX_SELECT', axis=0)
    case(g, 'then_mean', [t53, idx([4, 0, 2])], combine='INDEX_SELECT', axis=0, steps=[S('MEAN', (0,))])

    g = 'index_one_hot'
    case(g, 'f32', idx([0, 2, 4, 1]), [S('ONE_HOT', (5,), k='float32')])
    case(g, '2d_i32', idx([[0, 3], [1, 1], [2, 0]]), [S('ONE_HOT', (4,), k='int32')])
    case(g, 'bool', idx([1, 0, 1]), [S('ONE_HOT', (2,), k='bool')])
    case(g, 'oob_row_zero', idx([1, 7, 3]), [S('ONE_HOT', (5,), k='float32')])
    case(g, 'index_i64', idx([2, 0], 'int64'), [S('ONE_HOT', (3,), k='float64')])
    case(g, 'scalar_index', idx(2), [S('ONE_HOT', (4,), k='float32')])
    case(g, 'f16', idx([3, 1]), [S('ONE_HOT', (4,), k='float16')])
    case(g, 'from_argmax', rn((4, 6)), [S('ARGMAX', (1,)), S('ONE_HOT', (6,), k='float32')])
    case(g, 'then_sum', idx([0, 2, 2, 1, 2]), [S('ONE_HOT', (3,), k='int32'), S('SUM', (0,))])


# ================================================================== matmul
def gen_matmul():
    g = 'matmul_basic'
    for nm, sa, sb in [('1d_1d', (5,), (5,)), ('1d_2d', (4,), (4, 3)), ('2d_1d', (3, 4), (4,)),
                       ('2d_2d', (3, 4), (4, 5)), ('1x1', (1, 1), (1, 1)), ('outer', (4, 1), (1, 3)),
                       ('1d_3d', (4,), (2, 4, 3)), ('3d_1d', (2, 3, 4), (4,))]:
        case(g, 'f32q_' + nm, [q(sa), q(sb)], combine='MATMUL')
        case(g, 'f64_' + nm, [rn(sa, 'float64'), rn(sb, 'float64')], combine='MATMUL')
    case(g, 'f32_rand_2d', [rn((8, 16)), rn((16, 5))], combine='MATMUL', tol=(1e-5, 1e-5))
    case(g, 'f16_2d', [q((3, 4), 'float16', -2, 2, 4), q((4, 2), 'float16', -2, 2, 4)], combine='MATMUL')

    g = 'matmul_batched'
    for nm, sa, sb in [('b_2x3x4_4x5', (2, 3, 4), (4, 5)), ('b_2x3x4_2x4x5', (2, 3, 4), (2, 4, 5)),
                       ('bcast_2x1x3x4_5x4x2', (2, 1, 3, 4), (5, 4, 2)), ('bcast_1x3x4_2x4x2', (1, 3, 4), (2, 4, 2)),
                       ('b_4x5_2x5x3', (4, 5), (2, 5, 3))]:
        case(g, 'f32q_' + nm, [q(sa), q(sb)], combine='MATMUL')
        case(g, 'f64_' + nm, [rn(sa, 'float64'), rn(sb, 'float64')], combine='MATMUL')
    g = 'matmul_odd'
    for nm, sa, sb in [('1x7_7x129', (1, 7), (7, 129)), ('129x7_7x1', (129, 7), (7, 1)),
                       ('7x129_129x3', (7, 129), (129, 3)), ('1x7x129_129x3', (1, 7, 129), (129, 3)),
                       ('129_129', (129,), (129,)), ('7x129_129', (7, 129), (129,))]:
        case(g, 'f32q_' + nm, [q(sa), q(sb)], combine='MATMUL')
        case(g, 'f32r_' + nm, [rn(sa), rn(sb)], combine='MATMUL', tol=(1e-5, 1e-5))
        case(g, 'f64_' + nm, [rn(sa, 'float64'), rn(sb, 'float64')], combine='MATMUL')
    g = 'matmul_int'
    for nm, sa, sb in [('2d', (3, 4), (4, 5)), ('1d_1d', (6,), (6,)), ('batched', (2, 3, 4), (4, 2)),
                       ('bcast', (2, 1, 3, 4), (5, 4, 2)), ('odd', (1, 7, 129), (129, 3))]:
        case(g, 'i32_' + nm, [ri(sa, 'int32', -5, 5), ri(sb, 'int32', -5, 5)], combine='MATMUL')
    case(g, 'i32_big_values', [ri((2, 3), 'int32', -1000, 1000), ri((3, 2), 'int32', -1000, 1000)], combine='MATMUL')
    case(g, 'i64_2d', [ri((3, 4), 'int64'), ri((4, 2), 'int64')], combine='MATMUL')

    g = 'matmul_dot'
    case(g, 'f32_1d', [q((7,)), q((7,))], combine='DOT')
    case(g, 'f64_1d', [rn((129,), 'float64'), rn((129,), 'float64')], combine='DOT')
    case(g, 'i32_1d', [ri((5,)), ri((5,))], combine='DOT')
    case(g, 'f32_2d', [q((3, 4)), q((4, 2))], combine='DOT')
    case(g, 'of_views', [q((8,), steps=[S('SLICE', (0, END, END, -2))]), q((2, 2), steps=[S('RESHAPE', (4,))])],
         combine='DOT')

    g = 'matmul_views'
    case(g, 'a_transposed', [q((4, 3), steps=[S('TRANSPOSE', (0, 1))]), q((4, 5))], combine='MATMUL')
    case(g, 'b_transposed', [q((3, 4)), q((5, 4), steps=[S('TRANSPOSE', (0, 1))])], combine='MATMUL')
    case(g, 'both_transposed', [q((4, 3), steps=[S('TRANSPOSE', (0, 1))]),
                                q((5, 4), steps=[S('TRANSPOSE', (1, 0))])], combine='MATMUL')
    case(g, 'sliced_step', [q((6, 4), steps=[S('SLICE', (0, 0, END, 2))]),
                            q((4, 10), steps=[S('SLICE', (1, END, END, -3))])], combine='MATMUL')
    case(g, 'flipped', [q((3, 4), steps=[S('FLIP', (1,))]), q((4, 2), steps=[S('FLIP', (0, 1))])], combine='MATMUL')
    case(g, 'expanded', [q((1, 4), steps=[S('EXPAND', (3, 4))]), q((4, 1), steps=[S('EXPAND', (4, 2))])],
         combine='MATMUL')
    case(g, 'permuted_3d', [q((4, 2, 3), steps=[S('PERMUTE', (1, 2, 0))]), q((2, 5, 4), steps=[S('TRANSPOSE', (1, 2))])],
         combine='MATMUL')
    case(g, 'padded', [q((2, 3), steps=[S('PAD', (0, 1, 1, 0), f=1)]), q((4, 2))], combine='MATMUL')
    case(g, 'eye_flip_permutes', [C('EYE', 'float32', (), (4, 4), steps=[S('FLIP', (0,))]), q((4, 3))],
         combine='MATMUL')
    case(g, 'arange_reshaped', [C('ARANGE', 'float32', (), (0, 12, 1), steps=[S('RESHAPE', (3, 4))]),
                                C('ARANGE', 'float32', (), (0, 8, 1), steps=[S('RESHAPE', (4, 2))])], combine='MATMUL')
    case(g, 'contiguous_transposed', [q((4, 3), steps=[S('TRANSPOSE', (0, 1)), S('CONTIGUOUS')]), q((4, 2))],
         combine='MATMUL')
    case(g, 'then_sum', [q((3, 4)), q((4, 5))], combine='MATMUL', steps=[S('SUM', (0,))])
    case(g, 'then_transpose_relu_like', [q((2, 3, 4)), q((4, 5))], combine='MATMUL',
         steps=[S('TRANSPOSE', (1, 2)), S('MAX', (-1,))])
    case(g, 'then_softmax', [rn((3, 4)), rn((4, 6))], combine='MATMUL', steps=[S('SOFTMAX', (-1,))])
    case(g, 'i32_a_transposed', [D(rng.integers(-5, 6, (4, 3)), 'int32', steps=[S('TRANSPOSE', (0, 1))]),
                                 ri((4, 2), 'int32', -5, 5)], combine='MATMUL')


# ================================================================== errors
def gen_errors():
    g = 'errors'
    x23 = q((2, 3))
    E = lambda nm, inputs, steps=(), combine='NONE', axis=0: case(g, nm, inputs, steps, combine, axis, err=True)
    E('reshape_count', x23, [S('RESHAPE', (4,))])
    E('reshape_two_m1', x23, [S('RESHAPE', (-1, -1))])
    E('permute_short', x23, [S('PERMUTE', (0,))])
    E('permute_repeated', x23, [S('PERMUTE', (0, 0))])
    E('expand_non1', x23, [S('EXPAND', (4, 3))])
    E('sum_dup_axes', x23, [S('SUM', (0, 0))])
    E('sum_axis_range', x23, [S('SUM', (2,))])
    E('max_axis_range', x23, [S('MAX', (-3,))])
    E('argmax_axis_range', x23, [S('ARGMAX', (5,))])
    E('slice_step0', x23, [S('SLICE', (0, 0, 2, 0))])
    E('split_bad_sum', q((5,)), [S('SPLIT_PICK', (2, 2, 0), k=0, n=2)])
    E('transpose_range', x23, [S('TRANSPOSE', (0, 2))])
    E('matmul_inner', [q((3, 4)), q((5, 2))], combine='MATMUL')
    E('matmul_batch', [q((2, 3, 4)), q((3, 4, 2))], combine='MATMUL')
    E('matmul_scalar', [D(2.0, 'float32', ()), q((2, 2))], combine='MATMUL')
    E('dot_len', [q((3,)), q((4,))], combine='DOT')
    E('cat_shape', [q((2, 3)), q((2, 4))], combine='CAT', axis=0)
    E('cat_axis', [q((2, 3)), q((2, 3))], combine='CAT', axis=2)
    E('stack_shape', [q((2, 3)), q((3, 2))], combine='STACK', axis=0)
    E('gather_float_index', [x23, q((2, 2))], combine='GATHER', axis=1)
    E('null_propagates', x23, [S('RESHAPE', (7,)), S('SUM', (0,)), S('MUL_S', f=2), S('PERMUTE', (0,)),
                               S('SOFTMAX', (0,))])
    E('null_through_matmul', [q((2, 3), steps=[S('RESHAPE', (5,))]), q((3, 2))], combine='MATMUL',
      steps=[S('SUM')])


# ------------------------------------------------------------------ C output
def c_num(v, integral, dt='float64'):
    """A C literal for v. float16/bfloat16/float32 values get their shortest float32 spelling:
    the C side rounds every value to its dtype (asserted here to give v back)."""
    if integral:   # large ones as floating constants (the arrays are double)
        return str(int(v)) + ('.0' if abs(int(v)) >= 2**31 else '')
    v = float(v)
    if dt != 'float64' and math.isfinite(v) and v != 0:
        r = repr(np.float32(v))
        assert float(np.float32(float(r))) == v, (r, v)
        return r if ('.' in r or 'e' in r) else r + '.0'
    if math.isnan(v):
        return 'NAN'
    if math.isinf(v):
        return 'INFINITY' if v > 0 else '-INFINITY'
    if v == 0 and math.copysign(1, v) < 0:
        return '-0.0'
    r = repr(v)
    return r if ('.' in r or 'e' in r) else r + '.0'


class Out:
    def __init__(self):
        self.arrays, self.lines, self.cache = [], [], {}

    def data(self, v):
        a = np.asarray(v.a)
        integral = v.dt not in FLOATS
        flat = [c_num(x, integral, v.dt) for x in (a.astype(np.float64).ravel() if not integral
                                             else a.astype(np.uint64 if v.dt == 'uint64' else np.int64).ravel())]
        if integral:   # exact in a double only up to 2^53, or powers of two beyond
            assert all(abs(int(float(x))) <= 2**53 or float(x) in (2.0**63, -2.0**63) for x in flat)
        if not flat:
            flat = ['0']
        key = ','.join(flat)
        if key not in self.cache:
            nm = f'fx_d{len(self.cache)}'
            self.cache[key] = nm
            body, line = [], '  '
            for s in flat:
                if len(line) + len(s) > 96:
                    body.append(line.rstrip())
                    line = '  '
                line += s + ', '
            body.append(line.rstrip())
            self.arrays.append(f'static const double {nm}[{len(flat)}] = {{\n' + '\n'.join(body) + '\n};')
        return self.cache[key]


def c_int64(x):
    return 'TG_SLICE_END' if x == END else ('TG_ALL_AXES' if x == ALL else str(int(x)))


def c_step(st):
    k = st['k']
    kk = f'TG_{k.upper()}' if isinstance(k, str) else str(int(k))
    parts = [f'.op = FX_{st["op"]}']
    if st['n']:
        parts.append(f'.n = {st["n"]}')
    if st['p']:
        parts.append('.p = {' + ', '.join(map(c_int64, st['p'])) + '}')
    if st['f']:
        parts.append(f'.f = {c_num(st["f"], False)}')
    if kk != '0':
        parts.append(f'.k = {kk}')
    return '{' + ', '.join(parts) + '}'


def c_shape(shape):
    return '{' + ', '.join(str(int(s)) for s in shape) + '}' if len(shape) else '{0}'


def emit(path):
    out = Out()
    rows = []
    for c in CASES:
        ins = []
        for i in c['inputs']:
            parts = [f'.src = FX_SRC_{i["src"]}', f'.dtype = TG_{i["dtype"].upper()}',
                     f'.ndim = {len(i["shape"])}', f'.shape = {c_shape(i["shape"])}']
            if i['src'] == 'DATA':
                parts.append(f'.data = {out.data(V(i["vals"], i["dtype"]))}')
            if any(i['a']):
                parts.append('.a = {' + ', '.join(c_num(x, False) for x in i['a']) + '}')
            if i['steps']:
                parts.append(f'.nsteps = {len(i["steps"])}, .steps = {{' + ', '.join(map(c_step, i['steps'])) + '}')
            ins.append('{' + ', '.join(parts) + '}')
        parts = [f'.group = "{c["group"]}"', f'.name = "{c["name"]}"', f'.ninputs = {len(ins)}',
                 '.in = {' + ',\n         '.join(ins) + '}']
        if c['combine'] != 'NONE':
            parts.append(f'.combine = FX_{c["combine"]}, .axis = {c["axis"]}')
        if c['steps']:
            parts.append(f'.nsteps = {len(c["steps"])}, .steps = {{' + ', '.join(map(c_step, c['steps'])) + '}')
        if c['err']:
            parts.append('.err = 1')
        else:
            v = c['out']
            parts.append(f'.out_dtype = TG_{v.dt.upper()}, .out_ndim = {v.a.ndim}, .out_shape = {c_shape(v.a.shape)}')
            parts.append(f'.out = {out.data(v) if v.known else "NULL"}')
            if c['tol'] != (0.0, 0.0):
                parts.append(f'.atol = {c["tol"][0]!r}, .rtol = {c["tol"][1]!r}')
        rows.append('  {' + ',\n   '.join(parts) + '},')

    def wrap(items, indent='  '):
        lines, line = [], indent
        for it in items:
            if len(line) + len(it) > 96:
                lines.append(line.rstrip())
                line = indent
            line += it + ', '
        lines.append(line.rstrip().rstrip(','))
        return '\n'.join(lines)
    enum_ops = wrap([f'FX_{o}' for o in STEP_OPS])
    enum_src = wrap([f'FX_SRC_{s}' for s in SOURCES])
    text = f'''/* shape.h — GENERATED by tests/gen_fixtures_shape.py; do not edit by hand.
 * Reference programs and results (numpy/torch) for tests/test_shape_ops.c:
 * creation, reductions, movement, indexing and matmul. {len(CASES)} cases. */
#ifndef TG_FIXTURES_SHAPE_H
#define TG_FIXTURES_SHAPE_H
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include "tg.h"

#define FX_MAX_RANK {MAX_RANK}
#define FX_MAX_P {MAX_P}
#define FX_MAX_IN {MAX_IN}

/* Step and combine ops (see the interpreter in tests/test_shape_ops.c). */
enum {{\n{enum_ops}\n}};
/* How an input is created. */
enum {{\n{enum_src}\n}};

/* One unary step: p[0..n) are axes / shape / params, f a float param, k keepdim / dtype / pick. */
typedef struct {{ int op, n; int64_t p[FX_MAX_P]; double f; int k; }} fx_step;
/* An input: a creation op (a[] = its numeric args) or literal data, then steps. */
typedef struct {{
  int src; tg_dtype dtype; int ndim; int64_t shape[FX_MAX_RANK]; const double *data; double a[3];
  int nsteps; fx_step steps[{MAX_IN_STEPS}];
}} fx_input;
/* A case: inputs, optional combine op over them, steps; expected dtype/shape/values
 * (out == NULL: values undefined, e.g. tg_empty), or err: the result must be NULL. */
typedef struct {{
  const char *group, *name;
  int ninputs; fx_input in[FX_MAX_IN];
  int combine, axis;
  int nsteps; fx_step steps[{MAX_STEPS}];
  int err;
  tg_dtype out_dtype; int out_ndim; int64_t out_shape[FX_MAX_RANK]; const double *out;
  double atol, rtol;
}} fx_case;

'''
    groups = list(dict.fromkeys(c['group'] for c in CASES))
    text += '/* X-macro over the case groups: the C file makes one TEST per group. */\n#define FX_GROUPS(X)'
    text += ''.join(f' \\\n  X({g})' for g in groups) + '\n\n'
    text += ('static const char *const fx_op_names[] = {\n' +
             wrap([f'"{o.lower()}"' for o in STEP_OPS]) + '\n};\n\n')
    text += '\n'.join(out.arrays) + '\n\nstatic const fx_case fx_cases[] = {\n' + '\n'.join(rows) + '\n};\n'
    text += '#define FX_NCASES ((int)(sizeof fx_cases / sizeof fx_cases[0]))\n\n#endif\n'
    with open(path, 'w') as fh:
        fh.write(text)
    return len(text)


def main():
    np.seterr(all='ignore')   # overflow to inf / inf-inf are intended in some references
    gen_creation()
    gen_reductions()
    gen_movement()
    gen_chains()
    gen_indexing()
    gen_matmul()
    gen_errors()
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, 'fixtures', 'shape.h')
    os.makedirs(os.path.dirname(path), exist_ok=True)
    n = emit(path)
    groups = {}
    for c in CASES:
        groups[c['group']] = groups.get(c['group'], 0) + 1
    print(f'wrote {path}: {len(CASES)} cases, {n} bytes')
    for g, k in groups.items():
        print(f'  {g}: {k}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
