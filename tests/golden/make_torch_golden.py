#!/usr/bin/env python3
"""Writes tests/golden/torch_cases.txt: inputs and PyTorch's outputs for every hjit op.

Run by hand where Debian's python3-torch is installed (CI does not need PyTorch: the golden file is
committed and tests/test_torch_golden.cpp reads it):

    /usr/bin/python3 tests/golden/make_torch_golden.py        # from the repository root

Every op of hjit's API is run over every dtype PyTorch supports for it on the CPU, over broadcasting,
size-0, size-1 and 0-d shapes, and over special values (NaN, +-inf, +-0, subnormals, the largest and
smallest values of each dtype). Where PyTorch 1.13 has no CPU kernel for a 16-bit float (many f16
kernels), the reference is PyTorch's result in f32 rounded to f16 (marked `ref f32`). Where PyTorch
raises, the case records the exception (hjit must raise too, as the matching hjit::Error).

The file is text. Tensors are written once and referred to by number (the binary-op cases share
their inputs), then one block per case:

    tensor <n> <dtype> <shape> <base64>   shape "1,2" ("-" for 0-d), bytes little-endian ("-" when empty)
    case <op>                      hjit's adapter name (tests/test_torch_golden.cpp)
    attr <name> <value>            int, float (repr), int list "1,2,3" or "-" (empty), text
    in <n>                         an input tensor
    out <n>                        PyTorch's result(s)
    error <kind>                   instead of out: PyTorch raised (IndexError, ValueError, RuntimeError)
    ref f32                        the reference was computed in f32 and rounded (PyTorch has no f16 kernel)
    ref f64                        the reference was computed in f64 and rounded (PyTorch's own kernel loses digits)
    end
"""
import base64
import math
import os
import random
import sys

import torch
import torch.nn.functional as F

torch.manual_seed(0)
random.seed(0)

DTYPES = {
    'bool': torch.bool, 'u8': torch.uint8, 'i8': torch.int8, 'i16': torch.int16, 'i32': torch.int32,
    'i64': torch.int64, 'f16': torch.float16, 'bf16': torch.bfloat16, 'f32': torch.float32, 'f64': torch.float64,
}
NAMES = {v: k for k, v in DTYPES.items()}
FLOATS = ['f16', 'bf16', 'f32', 'f64']
INTS = ['u8', 'i8', 'i16', 'i32', 'i64']
NUMERIC = INTS + FLOATS
ALL = ['bool'] + NUMERIC

out_lines = []
counts = {}
tensor_ids = {}


def tensor_bytes(t):
    t = t.contiguous()
    if t.dtype in (torch.float16, torch.bfloat16):
        return t.view(torch.int16).numpy().tobytes()
    if t.dtype == torch.bool:
        return t.to(torch.uint8).numpy().tobytes()
    return t.numpy().tobytes()


def fmt_tensor(kind, t):
    shape = ','.join(str(d) for d in t.shape) or '-'
    data = base64.b64encode(tensor_bytes(t)).decode() or '-'
    key = (NAMES[t.dtype], shape, data)
    lines = []
    if key not in tensor_ids:
        tensor_ids[key] = len(tensor_ids)
        lines.append(f'tensor {tensor_ids[key]} {key[0]} {shape} {data}')
    return lines + [f'{kind} {tensor_ids[key]}']


def fmt_attr(v):
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return ','.join(str(int(x)) for x in v) or '-'
    return str(v)


def unsupported(e):
    return 'not implemented for' in str(e)


def emit(op, inputs, fn, attrs=None, upcast_f16=True, note=None):
    """Runs fn on the inputs and writes the case; fn returns a tensor or a tuple of tensors."""
    attrs = attrs or {}
    ref = None
    try:
        result = fn(*inputs)
    except (IndexError, ValueError, RuntimeError) as e:
        narrow = [t for t in inputs if t.dtype == torch.float16]
        if unsupported(e) and narrow and upcast_f16:
            try:
                wide = [t.float() if t.dtype == torch.float16 else t for t in inputs]
                result = fn(*wide)
                result = tuple(r.half() if r.dtype == torch.float32 else r for r in result) if isinstance(result, tuple) \
                    else (result.half() if result.dtype == torch.float32 else result)
                ref = 'f32'
            except Exception:
                return
        elif unsupported(e):
            return  # PyTorch has no kernel for this dtype: nothing to compare with
        else:
            result = type(e).__name__
    lines = [f'case {op}']
    for k, v in attrs.items():
        lines.append(f'attr {k} {fmt_attr(v)}')
    for t in inputs:
        lines.extend(fmt_tensor('in', t))
    if isinstance(result, str):
        lines.append(f'error {result}')
    else:
        for r in (result if isinstance(result, tuple) else (result,)):
            lines.extend(fmt_tensor('out', r))
    if ref:
        lines.append(f'ref {ref}')
    if note:
        lines.append(note)
    lines.append('end')
    out_lines.extend(lines)
    counts[op] = counts.get(op, 0) + 1


# ---- inputs

def specials(dt):
    """Every special value of a dtype, and a few ordinary ones."""
    d = DTYPES[dt]
    if dt == 'bool':
        return torch.tensor([True, False, True, False], dtype=d)
    if dt in INTS:
        info = torch.iinfo(d)
        vals = [0, 1, 2, 3, 7, info.max, info.min, info.max - 1, info.min + 1]
        if info.min < 0:
            vals += [-1, -2, -3, -7]
        return torch.tensor(vals, dtype=d)
    info = torch.finfo(d)
    vals = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1.5, 2.5, 3.0, 100.0, -100.0,
            info.max, -info.max, info.tiny, -info.tiny, info.tiny / 4, -info.tiny / 4, info.eps, 1e-30 if dt != 'f16' else 1e-7,
            88.7, -88.7, 89.5, -104.0, 1e10 if dt != 'f16' else 6e4, -1e10 if dt != 'f16' else -6e4]
    return torch.tensor(vals, dtype=torch.float64).to(d)


def rand(shape, dt, lo=-3.0, hi=3.0):
    d = DTYPES[dt]
    if dt == 'bool':
        return torch.rand(shape) > 0.5
    if dt in INTS:
        info = torch.iinfo(d)
        return torch.randint(max(int(lo), info.min), min(int(hi), info.max) + 1, shape, dtype=torch.int64).to(d)
    return (torch.rand(shape, dtype=torch.float64) * (hi - lo) + lo).to(d)


def randn(shape, dt):
    return torch.randn(shape, dtype=torch.float64).to(DTYPES[dt])


UNARY_SHAPES = [(3, 4), (), (0,), (1, 5)]


def unary_inputs(dt):
    return [specials(dt)] + [rand(s, dt) for s in UNARY_SHAPES]


# ---- elementwise, one operand

def gelu_tanh(x):
    return F.gelu(x, approximate='tanh')


UNARY = {
    'neg': torch.neg, 'abs': torch.abs, 'sign': torch.sign, 'relu': torch.relu, 'floor': torch.floor,
    'ceil': torch.ceil, 'round': torch.round, 'exp': torch.exp, 'log': torch.log, 'log1p': torch.log1p,
    'sqrt': torch.sqrt, 'rsqrt': torch.rsqrt, 'sin': torch.sin, 'cos': torch.cos, 'tanh': torch.tanh,
    'sigmoid': torch.sigmoid, 'erf': torch.erf, 'gelu': F.gelu, 'gelu_tanh': gelu_tanh, 'silu': F.silu,
    'logical_not': torch.logical_not,
}
for name, fn in UNARY.items():
    for dt in ALL:
        for x in unary_inputs(dt):
            emit(name, [x], fn)

# conversions between every pair of dtypes, special values included
for src in ALL:
    for dst in ALL:
        for x in [specials(src), rand((2, 3), src, -300, 300), rand((), src)]:
            emit('astype', [x], lambda x, dst=dst: x.to(DTYPES[dst]), {'dtype': dst})

# ---- elementwise, two operands

BINARY = {
    'add': torch.add, 'sub': torch.sub, 'mul': torch.mul, 'div': torch.div, 'pow': torch.pow,
    'maximum': torch.maximum, 'minimum': torch.minimum, 'eq': torch.eq, 'ne': torch.ne, 'lt': torch.lt,
    'le': torch.le, 'gt': torch.gt, 'ge': torch.ge, 'logical_and': torch.logical_and,
    'logical_or': torch.logical_or,
}
BROADCASTS = [((2, 3), (2, 3)), ((2, 1, 3), (4, 1)), ((), (3,)), ((0, 3), (1, 3)), ((5,), ())]


def pairs_of_specials(dt):
    s = specials(dt)
    n = s.numel()
    return s.repeat_interleave(n), s.repeat(n)


for name, fn in BINARY.items():
    for dt in ALL:
        a, b = pairs_of_specials(dt)
        emit(name, [a, b], fn)
        for sa, sb in BROADCASTS:
            emit(name, [rand(sa, dt), rand(sb, dt)], fn)

# promotion: every pair of dtypes, dimensioned and 0-d
for da in ALL:
    for db in ALL:
        for sa, sb in [((3,), (3,)), ((3,), ()), ((), (3,)), ((), ())]:
            emit('add', [rand(sa, da, 0, 3), rand(sb, db, 0, 3)], torch.add)
        emit('mul', [rand((2,), da, 0, 3), rand((), db, 0, 3)], torch.mul)
        emit('div', [rand((2,), da, 1, 3), rand((2,), db, 1, 3)], torch.div)
        emit('maximum', [rand((2,), da, 0, 3), rand((), db, 0, 3)], torch.maximum)
        emit('pow', [rand((2,), da, 0, 3), rand((), db, 0, 3)], torch.pow)
        emit('where', [rand((2,), 'bool'), rand((2,), da, 0, 3), rand((), db, 0, 3)], torch.where)

# integer powers: exact, wrapping, negative exponents
for dt in INTS:
    base = torch.tensor([3, 2, 1, 0, 5, 7, 2, 3], dtype=DTYPES[dt])
    expo = torch.tensor([20, 7, 100, 0, 3, 2, 62, 39], dtype=DTYPES[dt]) % (torch.iinfo(DTYPES[dt]).max)
    emit('pow', [base, expo], torch.pow)
    if torch.iinfo(DTYPES[dt]).min < 0:
        emit('pow', [torch.tensor([2, 1, -1, -1, 0, 3], dtype=DTYPES[dt]), torch.tensor([-1, -3, -3, -2, -1, -2], dtype=DTYPES[dt])], torch.pow)

# tensor op C++ number (a weak scalar): kind int, float or bool
SCALAR_OPS = {
    'add_scalar': lambda x, s: x + s, 'sub_scalar': lambda x, s: x - s, 'mul_scalar': lambda x, s: x * s,
    'div_scalar': lambda x, s: x / s, 'pow_scalar': lambda x, s: torch.pow(x, s), 'rsub_scalar': lambda x, s: s - x,
    'rdiv_scalar': lambda x, s: s / x, 'rpow_scalar': lambda x, s: torch.pow(s, x),
    'maximum_scalar': lambda x, s: torch.maximum(x, torch.tensor(s, dtype=torch.result_type(x, s))),
    'gt_scalar': lambda x, s: x > s, 'eq_scalar': lambda x, s: x == s,
}
SCALARS = [('int', 2), ('int', -3), ('int', 0), ('int', 1), ('int', 3), ('float', 0.5), ('float', -0.5), ('float', 2.0),
           ('float', 1.5), ('float', 1e10), ('float', math.inf), ('float', math.nan), ('float', -0.0), ('bool', True)]
for name, fn in SCALAR_OPS.items():
    for dt in ALL:
        x = specials(dt)
        for kind, v in SCALARS:
            if name in ('pow_scalar',) and kind == 'float' and v in (1e10,):
                continue
            emit(name, [x], lambda x, v=v: fn(x, v), {'kind': kind, 'value': float(v)})

for dt in ALL:
    c, a, b = rand((2, 3), 'bool'), rand((2, 3), dt), rand((3,), dt)
    emit('where', [c, a, b], torch.where)
    emit('where', [rand((), 'bool'), specials(dt), rand((), dt)], torch.where)
    for lo, hi in [(0, 2), (-1.5, 1.5), (2, -2), (None, 0), (0.5, None)]:
        kind = 'float' if any(isinstance(v, float) for v in (lo, hi)) else 'int'
        attrs = {'kind': kind, 'lo': 'none' if lo is None else float(lo), 'hi': 'none' if hi is None else float(hi)}
        emit('clamp', [specials(dt)], lambda x, lo=lo, hi=hi: torch.clamp(x, lo, hi), attrs)

# ---- reductions
RED_SHAPES = [((3, 4), [[], [0], [1], [0, 1], [-1]]), ((2, 3, 4), [[1], [0, 2], []]), ((), [[]]), ((0, 3), [[0], [1], []]),
              ((5,), [[0]]), ((1, 7), [[1]])]
for dt in ALL:
    for shape, axes_list in RED_SHAPES:
        x = rand(shape, dt)
        for axes in axes_list:
            for keep in (False, True):
                dims = axes if axes else list(range(len(shape)))
                attrs = {'axes': axes, 'keepdims': int(keep)}
                emit('sum', [x], lambda x, d=dims, k=keep: torch.sum(x, d, keepdim=k) if d else (x.sum() if not k else x.clone().to(torch.int64 if not x.dtype.is_floating_point else x.dtype)), attrs)
                emit('mean', [x], lambda x, d=dims, k=keep: torch.mean(x, d, keepdim=k) if d else torch.mean(x), attrs)
                emit('amax', [x], lambda x, d=dims, k=keep: torch.amax(x, d, keepdim=k) if d else (torch.amax(x) if x.numel() else torch.amax(x, [])), attrs)
                emit('amin', [x], lambda x, d=dims, k=keep: torch.amin(x, d, keepdim=k) if d else (torch.amin(x) if x.numel() else torch.amin(x, [])), attrs)
        for axis in range(max(len(shape), 1)):
            for keep in (False, True):
                emit('argmax', [x], lambda x, a=axis, k=keep: torch.argmax(x, a, keepdim=k), {'axis': axis, 'keepdims': int(keep)})
                emit('argmin', [x], lambda x, a=axis, k=keep: torch.argmin(x, a, keepdim=k), {'axis': axis, 'keepdims': int(keep)})
            emit('cumsum', [x], lambda x, a=axis: torch.cumsum(x, a), {'axis': axis})
    s = specials(dt)
    if s.dtype.is_floating_point:
        row = s.reshape(1, -1)
        for op, fn in [('amax', torch.amax), ('amin', torch.amin)]:
            emit(op, [row], lambda x, fn=fn: fn(x, [1]), {'axes': [1], 'keepdims': 0})
            emit(op, [row[:, 3:]], lambda x, fn=fn: fn(x, [1]), {'axes': [1], 'keepdims': 0})  # no NaN: infinities
        emit('argmax', [row], lambda x: torch.argmax(x, 1), {'axis': 1, 'keepdims': 0})
        emit('argmin', [row], lambda x: torch.argmin(x, 1), {'axis': 1, 'keepdims': 0})
        emit('argmax', [row[:, 1:]], lambda x: torch.argmax(x, 1), {'axis': 1, 'keepdims': 0})
        emit('sum', [row[:, 1:3]], lambda x: torch.sum(x, [1]), {'axes': [1], 'keepdims': 0})
        emit('cumsum', [row], lambda x: torch.cumsum(x, 1), {'axis': 1})
        emit('amax', [torch.full((2, 3), -math.inf, dtype=DTYPES[dt])], lambda x: torch.amax(x, [1]), {'axes': [1], 'keepdims': 0})

# ---- linear algebra
MATMUL_SHAPES = [((3, 4), (4, 5)), ((4,), (4, 3)), ((2, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2)),
                 ((3, 0), (0, 4)), ((1, 1), (1, 1))]
for dt in NUMERIC + ['bool']:
    for sa, sb in MATMUL_SHAPES:
        emit('matmul', [rand(sa, dt, -3, 3), rand(sb, dt, -3, 3)], torch.matmul)
emit('matmul', [specials('f32')[:6].reshape(2, 3), rand((3, 2), 'f32')], torch.matmul)

# ---- data movement
for dt in ALL:
    x = rand((2, 3, 4), dt)
    for shape in [(4, 6), (-1,), (2, -1, 2), (1, 24, 1)]:
        emit('reshape', [x], lambda x, s=shape: x.reshape(s), {'shape': shape})
    emit('reshape', [rand((), dt)], lambda x: x.reshape(1, 1), {'shape': (1, 1)})
    for perm in [(2, 1, 0), (1, 0, 2), (0, 2, 1)]:
        emit('transpose', [x], lambda x, p=perm: x.permute(p), {'perm': perm})
    emit('broadcast_to', [rand((3, 1), dt)], lambda x: x.expand(2, 3, 4), {'shape': (2, 3, 4)})
    emit('broadcast_to', [rand((), dt)], lambda x: x.expand(3), {'shape': (3,)})
    for axis in [0, 2, -1]:
        emit('unsqueeze', [x], lambda x, a=axis: x.unsqueeze(a), {'axis': axis})
    emit('squeeze', [rand((1, 3, 1), dt)], lambda x: x.squeeze(), {'axes': []})
    emit('squeeze', [rand((1, 3, 1), dt)], lambda x: x.squeeze(2), {'axes': [2]})
    for axis, start, stop, step in [(2, 1, None, 1), (-1, None, None, 2), (1, -2, 3, 1), (0, 5, 10, 1), (2, -100, 100, 3), (1, 2, 1, 1)]:
        emit('slice', [x], lambda x, a=axis, b=start, e=stop, s=step: x[(slice(None),) * (a % 3) + (slice(b, e, s),)],
             {'axis': axis, 'start': 'none' if start is None else start, 'stop': 'none' if stop is None else stop, 'step': step})
    emit('concat', [x, rand((2, 1, 4), dt), x], lambda *xs: torch.cat(xs, 1), {'axis': 1})
    emit('concat', [rand((0, 3), dt), rand((2, 3), dt)], lambda *xs: torch.cat(xs, 0), {'axis': 0})
    emit('stack', [x, x], lambda *xs: torch.stack(xs, -1), {'axis': -1})
    emit('stack', [rand((), dt), rand((), dt)], lambda *xs: torch.stack(xs, 0), {'axis': 0})
    for widths in [(1, 0, 0, 2, 1, 1), (-1, 1, 0, 0, 2, -1), (0, 0, -1, -1, 0, 0)]:
        # PyTorch's F.pad lists the last axis first
        torch_pad = [widths[4], widths[5], widths[2], widths[3], widths[0], widths[1]]
        emit('pad', [x], lambda x, p=torch_pad: F.pad(x, p, value=1) if x.dtype != torch.bool else F.pad(x, p, value=True),
             {'widths': widths, 'value': 1.0})
    emit('tril', [rand((3, 4), dt)], lambda x: torch.tril(x), {'k': 0})
    emit('triu', [rand((2, 3, 4), dt)], lambda x: torch.triu(x, 1), {'k': 1})
    emit('tril', [rand((3, 4), dt)], lambda x: torch.tril(x, -2), {'k': -2})

# take (numpy's take along an axis; negative indices wrap), embedding (no wrapping)
def take(x, idx, axis):
    n = x.shape[axis]
    if ((idx < -n) | (idx >= n)).any():
        raise IndexError('index out of range')
    flat = torch.where(idx < 0, idx + n, idx).reshape(-1)
    out = torch.index_select(x, axis, flat)
    return out.reshape(x.shape[:axis] + idx.shape + x.shape[axis + 1:])


for dt in ALL:
    x = rand((5, 7), dt)
    for idt in ['i32', 'i64']:
        emit('take', [x, torch.tensor([[2, 0, -1], [4, 4, -5]], dtype=DTYPES[idt])], lambda x, i: take(x, i, 0), {'axis': 0})
        emit('take', [x, torch.tensor([6, 0], dtype=DTYPES[idt])], lambda x, i: take(x, i, 1), {'axis': 1})
        emit('take', [x, torch.tensor([5], dtype=DTYPES[idt])], lambda x, i: take(x, i, 0), {'axis': 0})
        emit('take', [x, torch.tensor([-8], dtype=DTYPES[idt])], lambda x, i: take(x, i, 1), {'axis': 1})
for dt in FLOATS:
    table = randn((4, 3), dt)
    emit('embedding', [table, torch.tensor([[3, 0], [1, 1]])], lambda t, i: F.embedding(i, t))
    emit('embedding', [table, torch.tensor([4])], lambda t, i: F.embedding(i, t))
    emit('embedding', [table, torch.tensor([-1])], lambda t, i: F.embedding(i, t))

# ---- neural-network functions
for dt in FLOATS:
    for shape in [(5,), (3, 7), (2, 3, 6), (1, 1), ()]:
        x = randn(shape, dt) * 3
        for axis in ([-1, 0] if shape else [0]):
            emit('softmax', [x], lambda x, a=axis: torch.softmax(x, a), {'axis': axis})
            emit('log_softmax', [x], lambda x, a=axis: torch.log_softmax(x, a), {'axis': axis})
    big = torch.tensor([1000, 1001, 999], dtype=DTYPES[dt]) if dt != 'f16' else torch.tensor([100, 101, 99], dtype=torch.float16)
    emit('log_softmax', [big], lambda x: torch.log_softmax(x, -1), {'axis': -1})
    emit('softmax', [torch.zeros(2, 0, dtype=DTYPES[dt])], lambda x: torch.softmax(x, -1), {'axis': -1})
    row = torch.tensor([-math.inf, 0.0, 1.0, -math.inf], dtype=DTYPES[dt])
    emit('softmax', [row], lambda x: torch.softmax(x, -1), {'axis': -1})
    emit('log_softmax', [row], lambda x: torch.log_softmax(x, -1), {'axis': -1})
    x = randn((3, 8), dt) + 1000 if dt != 'f16' else randn((3, 8), dt) + 100
    w, b = randn((8,), dt), randn((8,), dt)
    # Far from zero, PyTorch 1.13's f32 and bf16 kernels lose digits (its bf16 result is off by 900):
    # the reference is PyTorch's result in f64, rounded.
    emit('layer_norm', [x, w, b], lambda x, w, b: F.layer_norm(x.double(), (8,), w.double(), b.double(), 1e-5).to(x.dtype),
         {'eps': 1e-5}, note='ref f64')
    emit('layer_norm', [randn((2, 3, 5), dt)], lambda x: F.layer_norm(x, (5,), eps=1e-3), {'eps': 1e-3})
    emit('rms_norm', [randn((3, 8), dt), w], lambda x, w: (x.double() * torch.rsqrt((x.double() ** 2).mean(-1, keepdim=True) + 1e-6) * w.double()).to(x.dtype), {'eps': 1e-6})
    xb = randn((2, 3, 4, 5), dt)
    mean, var, g, bb = randn((3,), dt), randn((3,), dt).abs() + 0.5, randn((3,), dt), randn((3,), dt)
    emit('batch_norm', [xb, mean, var, g, bb], lambda x, m, v, g, b: F.batch_norm(x, m, v, g, b, False, 0.1, 1e-5), {'eps': 1e-5})

    def bn_train(x, rm, rv, g, b):
        rm, rv = rm.clone(), rv.clone()
        y = F.batch_norm(x, rm, rv, g, b, True, 0.1, 1e-5)
        return y, rm, rv
    emit('batch_norm_training', [xb, mean, var, g, bb], bn_train, {'momentum': 0.1, 'eps': 1e-5})
    logits = randn((4, 5), dt) * 2
    for labels in [torch.tensor([0, 4, 2, 2]), torch.tensor([1, -100, 3, 0]), torch.tensor([0, 5, 1, 1]), torch.tensor([-1, 0, 0, 0]),
                   torch.tensor([1, 2, 3, 4], dtype=torch.int32)]:
        emit('cross_entropy', [logits, labels], lambda x, l: F.cross_entropy(x, l.long()) if l.dtype == torch.int32 else F.cross_entropy(x, l),
             {'ignore_index': -100})
    emit('gelu', [randn((7,), dt) * 4], F.gelu)

CONVS = [((1, 3, 7, 9), (4, 3, 3, 3), 1, 1, 1, 1, True), ((2, 4, 8, 8), (6, 2, 3, 2), 2, (1, 0), 1, 2, False),
         ((1, 4, 9, 7), (4, 1, 3, 3), 1, 2, 2, 4, True), ((2, 3, 5, 5), (5, 3, 1, 1), 1, 0, 1, 1, False),
         ((1, 2, 4, 4), (3, 2, 5, 5), 1, 2, 1, 1, False), ((1, 2, 0, 4), (3, 2, 1, 1), 1, 0, 1, 1, False)]
for dt in NUMERIC:
    for xs, ws, stride, pad, dil, groups, bias in CONVS:
        x, w = rand(xs, dt, -3, 3), rand(ws, dt, -2, 2)
        ins = [x, w] + ([rand((ws[0],), dt, -2, 2)] if bias else [])
        sp = stride if isinstance(stride, tuple) else (stride, stride)
        pp = pad if isinstance(pad, tuple) else (pad, pad)
        dd = dil if isinstance(dil, tuple) else (dil, dil)
        emit('conv2d', ins, lambda x, w, b=None, s=sp, p=pp, d=dd, g=groups: F.conv2d(x, w, b, s, p, d, g),
             {'stride': sp, 'padding': pp, 'dilation': dd, 'groups': groups})
for dt in NUMERIC:
    for xs in [(2, 3, 9, 8), (1, 2, 4, 5), (2, 6, 6)]:
        x = rand(xs, dt, -5, 5)
        for k, s, p in [((2, 2), (2, 2), (0, 0)), ((3, 3), (2, 2), (1, 1)), ((3, 2), (1, 1), (1, 0))]:
            emit('max_pool2d', [x], lambda x, k=k, s=s, p=p: F.max_pool2d(x, k, s, p), {'kernel': k, 'stride': s, 'padding': p})
            for cip in (True, False):
                emit('avg_pool2d', [x], lambda x, k=k, s=s, p=p, c=cip: F.avg_pool2d(x, k, s, p, count_include_pad=c),
                     {'kernel': k, 'stride': s, 'padding': p, 'count_include_pad': int(cip)})
    for size in [(1, 1), (3, 2), (2, 4), (5, 7)]:
        emit('adaptive_avg_pool2d', [rand((1, 2, 5, 7), dt, -5, 5)], lambda x, o=size: F.adaptive_avg_pool2d(x, o), {'size': size})
for dt in ['f32', 'f64']:
    s = specials(dt)[:16].reshape(1, 1, 4, 4)
    emit('max_pool2d', [s], lambda x: F.max_pool2d(x, 2), {'kernel': (2, 2), 'stride': (2, 2), 'padding': (0, 0)})
    emit('max_pool2d', [s[:, :, :, 1:]], lambda x: F.max_pool2d(x, (2, 3), 1, (1, 1)), {'kernel': (2, 3), 'stride': (1, 1), 'padding': (1, 1)})


def attention(q, k, v, causal):
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        mask = torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool).tril()
        s = s.masked_fill(~mask, -math.inf)
    return torch.softmax(s, -1) @ v


for dt in FLOATS:
    for qs, ks, vs in [((1, 2, 5, 8), (1, 2, 5, 8), (1, 2, 5, 8)), ((2, 3, 7, 16), (2, 3, 9, 16), (2, 3, 9, 12)),
                       ((2, 1, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4)), ((4, 6), (6, 6), (6, 5))]:
        for causal in (False, True):
            emit('attention', [randn(qs, dt), randn(ks, dt), randn(vs, dt)], lambda q, k, v, c=causal: attention(q, k, v, c),
                 {'causal': int(causal)})

# Ops added later come last, so that the random inputs of the cases above stay as they were (one
# generator draws them all in order) and the file grows by their cases only.
for name, fn in {'hardswish': F.hardswish, 'atan': torch.atan, 'asin': torch.asin, 'acos': torch.acos}.items():
    for dt in ALL:
        for x in unary_inputs(dt):
            emit(name, [x], fn)

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'torch_cases.txt')
with open(path, 'w') as f:
    f.write(f'# written by make_torch_golden.py with PyTorch {torch.__version__}; {sum(counts.values())} cases\n')
    f.write('\n'.join(out_lines) + '\n')
print(f'{path}: {sum(counts.values())} cases, {os.path.getsize(path) / 1e6:.1f} MB', file=sys.stderr)
for op in sorted(counts):
    print(f'  {op}: {counts[op]}', file=sys.stderr)
