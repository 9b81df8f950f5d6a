"""Explicit vector code on LANES = 8 float64 lanes: intrinsics that apply one
operation to a strided run of 8-wide vectors (docs/design.md, "Vecchia's
approximation").

Vecchia's likelihood works on batches of LANES points at once, in a layout
whose innermost index is the point, the lane (:mod:`.vecchia_batch`): every
step of its small factorisations, substitutions and weights is then an
operation on LANES independent numbers, one 512-bit vector, where one
block's own loops (|s| <= 41, lengths 1 .. |s|) are too short and too
dependent to vectorise. Numba runs LLVM without its SLP vectoriser, and the
loop vectoriser leaves a loop of 8 with possible aliasing scalar, so the lane
operations are written here as explicit vector code: a loop over a strided
run of lane vectors, the multiplier loaded once.

- :func:`lanes_set`, :func:`lanes_add`, :func:`lanes_sub`: D = F S, D += F S
  (one fused multiply-add), D -= F S (:func:`_lanes_intrinsic`);
- :func:`lanes_diff`: D = A - B;
- :func:`lanes_dot_add`: acc += sum_u A_u B_u, lane by lane, in a fixed order.

Each is an intrinsic, compiled into its caller (no routine of its own), typed
for 1-D float64 C arrays and integer offsets, strides and counts (a
TypingError otherwise). Without the JIT (``NUMBA_DISABLE_JIT=1``) plain-Python
twins do the same by slices.
"""

import numpy as np
from llvmlite import ir
from numba.core import cgutils, errors, types
from numba.extending import intrinsic

from .address_call import JIT

__all__ = ["LANES", "lanes_set", "lanes_add", "lanes_sub", "lanes_diff", "lanes_dot_add"]

#: float64 numbers per lane vector (512 bits): the points of a Vecchia batch.
LANES = 8

_LANE_VECTOR = ir.VectorType(ir.DoubleType(), LANES)
_SET, _ADD, _SUB = 0, 1, 2


def _lanes_signature(name, args, arrays):
    """``types.void(*args)`` of the lanes intrinsic ``name``, whose arguments
    at the positions ``arrays`` must be 1-D float64 C arrays and all others
    integers (offsets, strides, counts); TypingError otherwise."""
    array = types.Array(types.float64, 1, "C")
    for k, arg in enumerate(args):
        if not (arg == array if k in arrays else
                isinstance(types.unliteral(arg), types.Integer)):
            raise errors.TypingError(
                f"{name}: float64 1-D C arrays and integer offsets expected, got {args}")
    return types.void(*args)


def _lane_operands(context, builder, signature, args, arrays):
    """What a lanes intrinsic's codegen reads its arguments as: the data
    pointers of the array arguments at the positions ``arrays``, the other
    (integer) arguments as int64, each in argument order, and ``at(base,
    offset)``, the pointer to the LANES-vector at element ``offset`` of a data
    pointer."""
    vptr = _LANE_VECTOR.as_pointer()
    pointers = [context.make_array(signature.args[k])(context, builder, args[k]).data
                for k in arrays]
    integers = [context.cast(builder, args[k], signature.args[k], types.int64)
                for k in range(len(args)) if k not in arrays]

    def at(base, offset):
        return builder.bitcast(builder.gep(base, [offset], inbounds=True), vptr)

    return pointers, integers, at


def _lane_fma(builder):
    """LLVM's fused multiply-add of three LANES-vectors (``llvm.fma.v8f64``),
    declared in the builder's module."""
    return cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(_LANE_VECTOR, [_LANE_VECTOR] * 3),
        "llvm.fma.v%df64" % LANES)


def _lanes_intrinsic(kind, doc):
    """An intrinsic ``(dst, d0, ds, src, s0, ss, f, f0, count)`` on 1-D
    float64 C arrays and int64 offsets: for u < count, with D = dst[d0 + u ds
    : + LANES], S = src[s0 + u ss : + LANES], F = f[f0 : f0 + LANES] (read
    once, before the loop):  D = F S (SET), D = D + F S (ADD, one fused
    multiply-add), D = D - F S (SUB, fma(-F, S, D))."""
    name = ("lanes_set", "lanes_add", "lanes_sub")[kind]

    def typer(typingctx, dst, d0, ds, src, s0, ss, f, f0, count):
        sig = _lanes_signature(name, (dst, d0, ds, src, s0, ss, f, f0, count), (0, 3, 6))

        def codegen(context, builder, signature, args):
            i64 = ir.IntType(64)
            (pd, ps, pf), (d0v, dsv, s0v, ssv, f0v, cnt), at = _lane_operands(
                context, builder, signature, args, (0, 3, 6))
            fv = builder.load(at(pf, f0v), align=8)
            if kind == _SUB:
                fv = builder.fneg(fv)
            fma = _lane_fma(builder)
            with cgutils.for_range(builder, cnt, intp=i64) as loop:
                u = loop.index
                dp = at(pd, builder.add(d0v, builder.mul(u, dsv)))
                sv = builder.load(at(ps, builder.add(s0v, builder.mul(u, ssv))), align=8)
                if kind == _SET:
                    result = builder.fmul(fv, sv)
                else:
                    result = builder.call(fma, [fv, sv, builder.load(dp, align=8)])
                builder.store(result, dp, align=8)
            return context.get_dummy_value()

        return sig, codegen

    typer.__name__ = name
    typer.__doc__ = doc
    return intrinsic(typer)


lanes_set = _lanes_intrinsic(_SET, "D = F S over a strided run of lane vectors "
                                   "(:func:`_lanes_intrinsic`).")
lanes_add = _lanes_intrinsic(_ADD, "D += F S over a strided run of lane vectors.")
lanes_sub = _lanes_intrinsic(_SUB, "D -= F S over a strided run of lane vectors.")


@intrinsic
def lanes_diff(typingctx, dst, d0, ds, a, a0, as_, b, b0, count):
    """For u < count: dst[d0 + u ds : + LANES] = a[a0 + u as_ : + LANES] -
    b[b0 : b0 + LANES] (B read once, before the loop), on 1-D float64 C
    arrays with int64 offsets."""
    sig = _lanes_signature("lanes_diff", (dst, d0, ds, a, a0, as_, b, b0, count), (0, 3, 6))

    def codegen(context, builder, signature, args):
        (pd, pa, pb), (d0v, dsv, a0v, asv, b0v, cnt), at = _lane_operands(
            context, builder, signature, args, (0, 3, 6))
        bv = builder.load(at(pb, b0v), align=8)
        with cgutils.for_range(builder, cnt, intp=ir.IntType(64)) as loop:
            u = loop.index
            av = builder.load(at(pa, builder.add(a0v, builder.mul(u, asv))), align=8)
            builder.store(builder.fsub(av, bv),
                          at(pd, builder.add(d0v, builder.mul(u, dsv))), align=8)
        return context.get_dummy_value()

    return sig, codegen


#: Independent partial sums of :func:`lanes_dot_add` (hides the fma latency).
_DOT_PARTS = 4


@intrinsic
def lanes_dot_add(typingctx, acc, c0, a, a0, as_, b, b0, bs, count):
    """acc[c0 : c0 + LANES] += sum_u a[a0 + u as_ : + LANES] * b[b0 + u bs :
    + LANES] over u < count, lane by lane, on 1-D float64 C arrays with int64
    offsets. The sum runs in _DOT_PARTS = 4 partial sums (u mod 4, each in
    the order of u, by fused multiply-adds), added as (s0 + s1) + (s2 + s3)
    and then to acc: a fixed order, the same on every call and thread."""
    sig = _lanes_signature("lanes_dot_add", (acc, c0, a, a0, as_, b, b0, bs, count),
                           (0, 2, 5))

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        (pc, pa, pb), (c0v, a0v, asv, b0v, bsv, cnt), at = _lane_operands(
            context, builder, signature, args, (0, 2, 5))
        fma = _lane_fma(builder)
        zero = ir.Constant(_LANE_VECTOR, [0.0] * LANES)
        parts = [cgutils.alloca_once_value(builder, zero) for _ in range(_DOT_PARTS)]
        four = ir.Constant(i64, _DOT_PARTS)
        full = builder.sdiv(cnt, four)

        def term(u, part):
            av = builder.load(at(pa, builder.add(a0v, builder.mul(u, asv))), align=8)
            bv = builder.load(at(pb, builder.add(b0v, builder.mul(u, bsv))), align=8)
            builder.store(builder.call(fma, [av, bv, builder.load(part)]), part)

        with cgutils.for_range(builder, full, intp=i64) as loop:
            base = builder.mul(loop.index, four)
            for q in range(_DOT_PARTS):
                term(builder.add(base, ir.Constant(i64, q)), parts[q])
        rest = builder.sub(cnt, builder.mul(full, four))
        with cgutils.for_range(builder, rest, intp=i64) as loop:  # u = 4 full + q
            term(builder.add(builder.mul(full, four), loop.index), parts[0])
        total = builder.fadd(builder.fadd(builder.load(parts[0]), builder.load(parts[1])),
                             builder.fadd(builder.load(parts[2]), builder.load(parts[3])))
        cp = at(pc, c0v)
        builder.store(builder.fadd(builder.load(cp, align=8), total), cp, align=8)
        return context.get_dummy_value()

    return sig, codegen


if not JIT:  # plain Python (NUMBA_DISABLE_JIT=1): the same operations, by slices
    def _lanes_python(kind):
        def run(dst, d0, ds, src, s0, ss, f, f0, count):
            F = f[f0:f0 + LANES].copy()
            for u in range(count):
                D = dst[d0 + u * ds:d0 + u * ds + LANES]
                S = src[s0 + u * ss:s0 + u * ss + LANES]
                if kind == _SET:
                    D[:] = F * S
                elif kind == _ADD:
                    D += F * S
                else:
                    D -= F * S
        return run

    lanes_set, lanes_add, lanes_sub = (_lanes_python(k) for k in (_SET, _ADD, _SUB))

    def lanes_diff(dst, d0, ds, a, a0, as_, b, b0, count):  # noqa: F811
        B = b[b0:b0 + LANES].copy()
        for u in range(count):
            dst[d0 + u * ds:d0 + u * ds + LANES] = a[a0 + u * as_:a0 + u * as_ + LANES] - B

    def lanes_dot_add(acc, c0, a, a0, as_, b, b0, bs, count):  # noqa: F811
        parts = np.zeros((_DOT_PARTS, LANES))
        for u in range(count):
            q = u % _DOT_PARTS if u < count - count % _DOT_PARTS else 0
            parts[q] += a[a0 + u * as_:a0 + u * as_ + LANES] * b[b0 + u * bs:b0 + u * bs + LANES]
        acc[c0:c0 + LANES] += (parts[0] + parts[1]) + (parts[2] + parts[3])
