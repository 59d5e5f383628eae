"""float32 math functions as LLVM IR that vectorizes: exp, exp2, log, log2, log10, tanh, erf, pow.

LLVM scalarizes `llvm.exp.v16f32` and its kind into one libm call per lane; loom instead defines,
per function and type used, an internal `alwaysinline` function `loom.vecmath.<name>.<type>`
(for a scalar float or a vector of any lane count) that computes the function with vector
arithmetic only, so it inlines into the vector loop and runs at the speed of a few
multiply-adds per element. It is target-independent IR with no call to any library, so it also
builds where there is no libm (Hexagon's device runtime). float16 goes through float32;
float64 keeps LLVM's intrinsics (codegen/llvm/function.py).

Maximum error, in units in the last place of the correctly rounded float32 result (a result
at most N representable floats away from it), over every float32 input; numpy's float64
functions rounded to float32 are the reference (tests/codegen/test_vecmath.py checks it):

- exp: 1 ulp. exp(-inf) = 0, exp(inf) = inf, inf above 88.7228, denormal results from -87.34
  down to 2^-149, 0 below -103.97.
- exp2: 1 ulp. As exp: inf from 128, denormal results below -126, 0 at and below -150.
- log, log2: 1 ulp; log10: 2 ulps. log(+-0) = -inf, log(x < 0) = NaN, log(inf) = inf; denormal
  inputs are scaled into the normal range first.
- tanh: 2 ulps. tanh(+-0) = +-0, tanh(+-inf) = +-1.
- erf: 2 ulps. erf(+-0) = +-0, erf(+-inf) = +-1.
- pow: 1 ulp. C99 Annex F: pow(x, +-0) = 1 and pow(1, y) = 1 even for NaN, pow(-1, +-inf) = 1,
  a negative finite base to a non-integer power is NaN, zeros and infinities take the sign of
  the base for odd integer powers (pow(-0, -3) = -inf).

(On the test's inputs every function but log10 without fused multiply-add stays within 1 ulp;
tanh and erf are documented with 2 for the inputs it does not sample.)

NaN in gives NaN out (but see pow). The bounds hold whether or not the target fuses a multiply
and an add: every multiply-add is `llvm.fmuladd`, which LLVM fuses where the target has a fast
fused multiply-add and leaves as two roundings elsewhere, independent of loom's -fp-contract
option; the test checks both.

How: range reduction to a small interval, a polynomial on it, and the reduction undone, in the
classic way of Cephes and SLEEF. exp: n = round(x log2 e) (a float rounded by adding and
subtracting 1.5 * 2^23, in one multiply-add: the sum's low bits are then n), r = x - n ln 2 in
two parts (the high part's product is exact), e^r by a polynomial of degree 6 (Horner's rule:
six multiply-adds), and 2^n applied as two powers of two, 2^(n -+ 32) shifted from the sum's
bits and the constant 2^(+-32) (so denormal results are rounded once), NaN selected: 21 vector
operations. A vector whose lanes are all within +-86 (|n| <= 124) branches to a short way
instead, the same result in 13 operations and a check: n shifted from the sum's bits into the
exponent field and added to the polynomial's bits (an integer addition, exact: the result is
normal; a multiplication would take a multiply-add unit). The check compares the lanes'
magnitude bits as integers, a vector of two registers folded to one by an unsigned maximum
first (a mask, an unsigned maximum and one compare per 32 floats). log: x = 2^e m with m in
[sqrt(1/2), sqrt(2)) (denormal inputs scaled by 2^23 first), f = m - 1 exact,
log(1+f) = f - f^2/2 + f^3 P(f); log2 and log10 add e's and f's terms in the order that keeps
the rounding small (Cephes' log2f/log10f). tanh: x + x^3 P(x^2) below 0.625, else
1 - 2/(e^(2|x|) + 1). erf: x + x P(x^2) below 0.921875, else
1 - e^(-Q(|x|)) with Q fitting -log(erfc). pow: in float64 (log2 by the series in
(m-1)/(m+1), exp2 by its Taylor polynomial of degree 11), rounded once to float32. The
float32 polynomials were fitted for loom (weighted minimax by iteratively reweighted least
squares against mpmath, coefficients rounded to float32 one at a time from the highest, the
rest refitted).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable

from llvmlite import ir

from loom.abi.dtype import DataType
from loom.codegen.llvm.types import mangle

F32 = ir.FloatType()
F64 = ir.DoubleType()
I32 = ir.IntType(32)

ULP_BOUNDS = {
    "exp": 1,
    "exp2": 1,
    "log": 1,
    "log2": 1,
    "log10": 2,
    "tanh": 2,
    "erf": 2,
    "pow": 1,
}
"""The documented maximum error of each function, in float32 ulps (module docstring)."""

FUNCTIONS = tuple(ULP_BOUNDS)

# -- coefficients (float32-exact; low degree first) ----------------------------------------------
LOG2E = 1.4426950216293335
LN2_HI = 0.693359375  # 9 significant bits: n * LN2_HI is exact for |n| < 2^15
LN2_LO = -0.00021219444170128554  # ln 2 - LN2_HI
SHIFTER = 12582912.0  # 1.5 * 2^23: (t + SHIFTER) - SHIFTER rounds t to an integer, |t| < 2^22
# e^r = 1 + r + c2 r^2 + ... + c6 r^6, |r| <= ln(2)/2 (fitted on |r| <= 0.3486: the rounding of n
# without fused multiply-add may leave r a little outside)
EXP_P = (1.0, 1.0, 0.49999994, 0.16666517, 0.041668426, 0.008369124, 0.0013813756)
EXP_SPLIT = 32.0
"""2^n is applied as 2^(n -+ EXP_SPLIT) * 2^(+-EXP_SPLIT): both normal for n in [-150, 128]."""
EXP_SHORT = 86.0
"""Where |x| <= EXP_SHORT, n is within +-124: y 2^n (y = e^r in [0.7, 1.42]) is a normal
number, exactly y with n added to its exponent (an integer addition of n << 23 to its bits), no
clamp is needed and x is not NaN."""
# 2^r = 1 + r Q(r), |r| <= 1/2
EXP2_P = (
    0.6931472,
    0.2402265,
    0.055504102,
    0.009618031,
    0.0013333966,
    0.00015469301,
    1.5193882e-05,
)
# log(1 + f) = f - f^2/2 + f^3 P(f), sqrt(1/2) - 1 <= f < sqrt(2) - 1
LOG_P = (
    0.33333313,
    -0.2500001,
    0.20002119,
    -0.16667986,
    0.14219518,
    -0.12405747,
    0.11888607,
    -0.11674869,
    0.06744609,
)
SQRT_HALF = 0.7071067690849304
LOG2EA = 0.4426950514316559  # log2(e) - 1
L10EA, L10EB = 0.43359375, 0.0007007318781688809  # log10(e) in two parts
L102A, L102B = 0.30078125, 0.00024874566588550806  # log10(2) in two parts
# tanh(x) = x + x^3 P(x^2), |x| < 0.625
TANH_P = (-0.3333328, 0.13331442, -0.053739708, 0.020639066, -0.005704962)
TANH_SPLIT = 0.625
# erf(x) = x + x P(x^2), |x| < 0.921875
ERF_SMALL_P = (
    0.12837917,
    -0.37612635,
    0.11283696,
    -0.026859397,
    0.0052010315,
    -0.00081426965,
    8.370068e-05,
)
ERF_SPLIT = 0.921875
# erf(x) = 1 - e^(-Q(x)), 0.921875 <= x <= 3.9 (erf rounds to 1 beyond 3.84)
ERF_BIG_Q = (
    -0.00017519867,
    1.1295173,
    0.6333421,
    0.10828542,
    -0.025122873,
    0.0041723717,
    -0.0004347327,
    2.1118409e-05,
)
ERF_BIG_END = 3.9
ERF_ONE = 3.919206
"""The least float32 whose erf rounds to 1: from there erf is +-1 exactly (as erf(+-inf)), so
that 1 + erf(x) is 0 for a large negative x (Gelu's x * (1 + erf(x / sqrt 2)) / 2 is then
-0, and NaN at -inf, as in C's erff)."""


CHECK_LANES = 16
"""A vector wider than this many lanes is folded to this many before a check of all its lanes
(`_Emitter.within`): a register of float32 on AVX-512, the widest vectors loom targets on x86."""


# -- the IR helper -------------------------------------------------------------------------------
class _Emitter:
    """Scalar-or-vector arithmetic on one float type (float or double, `lanes` 0 for scalars)
    and the integer type of its bits, with strict IEEE operations (no fast-math flags)."""

    def __init__(self, b: ir.IRBuilder, module: ir.Module, scalar: ir.Type, lanes: int):
        self.b = b
        self.module = module
        self.lanes = lanes
        self.bits = 32 if scalar == F32 else 64
        iscalar = ir.IntType(self.bits)
        self.ft = scalar if lanes == 0 else ir.VectorType(scalar, lanes)
        self.it = iscalar if lanes == 0 else ir.VectorType(iscalar, lanes)
        self.mantissa = 23 if self.bits == 32 else 52
        self.bias = 127 if self.bits == 32 else 1023
        # one object per constant: llvmlite formats a constant's text (every lane) per object
        self._constants: dict[tuple, ir.Constant] = {}

    def like(self, scalar: ir.Type) -> _Emitter:
        return _Emitter(self.b, self.module, scalar, self.lanes)

    def f(self, v: float) -> ir.Constant:
        """A constant, rounded to float32 for float32 (LLVM takes only exact float constants)."""
        if self.bits == 32 and math.isfinite(v):
            v = struct.unpack("f", struct.pack("f", v))[0]
        key = ("f", float(v).hex())  # hex: -0.0 is not 0.0
        c = self._constants.get(key)
        if c is None:
            c = self._constants[key] = ir.Constant(self.ft, v)
        return c

    def i(self, v: int) -> ir.Constant:
        key = ("i", v)
        c = self._constants.get(key)
        if c is None:
            c = self._constants[key] = ir.Constant(self.it, v)
        return c

    # arithmetic
    def add(self, a, b):
        return self.b.fadd(a, b)

    def sub(self, a, b):
        return self.b.fsub(a, b)

    def mul(self, a, b):
        return self.b.fmul(a, b)

    def div(self, a, b):
        return self.b.fdiv(a, b)

    def fma(self, a, b, c):
        """a * b + c, fused where the target has a fast fused multiply-add."""
        name = f"llvm.fmuladd.{mangle(self.ft)}"
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(self.ft, [self.ft] * 3), name)
        return self.b.call(fn, [a, b, c])

    def poly(self, x, coefficients: tuple[float, ...]):
        """c0 + c1 x + ... by Horner's rule."""
        acc = self.f(coefficients[-1])
        for c in reversed(coefficients[:-1]):
            acc = self.fma(acc, x, self.f(c))
        return acc

    # comparisons and selection (ordered: false for NaN)
    def lt(self, a, b):
        return self.b.fcmp_ordered("<", a, b)

    def gt(self, a, b):
        return self.b.fcmp_ordered(">", a, b)

    def eq(self, a, b):
        return self.b.fcmp_ordered("==", a, b)

    def is_nan(self, a, b=None):
        return self.b.fcmp_unordered("uno", a, a if b is None else b)

    def select(self, cond, a, b):
        return self.b.select(cond, a, b)

    def within(self, x, limit: float):
        """Whether every lane of x has |x| <= limit (a positive float32), false for NaN: one
        i1 for a vector. The lanes' magnitudes are compared as integers (their bits in the
        order of the floats, NaN's above infinity's), and a vector wider than CHECK_LANES is
        first folded in halves by an unsigned maximum: one compare for a vector of several
        registers, not one each and their masks joined."""
        bits = self.b.and_(self.as_int(x), self.i((1 << (self.bits - 1)) - 1))
        lanes = self.lanes
        while lanes > CHECK_LANES and lanes % 2 == 0:
            half = lanes // 2
            low, high = (
                self.b.shuffle_vector(bits, bits, ir.Constant(ir.VectorType(I32, half), part))
                for part in (list(range(half)), list(range(half, lanes)))
            )
            bits = self.b.select(self.b.icmp_unsigned(">", low, high), low, high)
            lanes = half
        code = "<I<f" if self.bits == 32 else "<Q<d"
        limit_bits = struct.unpack(code[:2], struct.pack(code[2:], limit))[0]
        ok = self.b.icmp_unsigned("<=", bits, ir.Constant(bits.type, limit_bits))
        if not lanes:
            return ok
        mask = ir.IntType(lanes)
        return self.b.icmp_unsigned("==", self.b.bitcast(ok, mask), ir.Constant(mask, -1))

    def unless_all(self, cond, value, otherwise: Callable):
        """`value` where `cond` holds in every lane, else `otherwise()`: emitted in a block of
        its own that runs only then (a branch taken rarely, not a select that costs always).
        `cond` is one i1 for the whole vector (`within`) or an i1 per lane."""
        if isinstance(cond.type, ir.VectorType):
            mask = ir.IntType(cond.type.count)
            cond = self.b.icmp_unsigned("==", self.b.bitcast(cond, mask), ir.Constant(mask, -1))
        fn, entry = self.b.function, self.b.block
        other_block = fn.append_basic_block("otherwise")
        done = fn.append_basic_block("done")
        self.b.cbranch(cond, done, other_block).set_weights([1000, 1])
        self.b.position_at_end(other_block)
        other = otherwise()
        other_end = self.b.block
        self.b.branch(done)
        self.b.position_at_end(done)
        result = self.b.phi(value.type)
        result.add_incoming(value, entry)
        result.add_incoming(other, other_end)
        return result

    def clamp(self, x, lo: float, hi: float):
        """x limited to [lo, hi]; NaN becomes hi (the caller's result for NaN is chosen later)."""
        x = self.select(self.lt(x, self.f(hi)), x, self.f(hi))
        return self.select(self.gt(x, self.f(lo)), x, self.f(lo))

    # bits
    def as_int(self, x):
        return self.b.bitcast(x, self.it)

    def as_float(self, n):
        return self.b.bitcast(n, self.ft)

    def abs(self, x):
        return self.as_float(self.b.and_(self.as_int(x), self.i((1 << (self.bits - 1)) - 1)))

    def sign(self, x):
        return self.b.and_(self.as_int(x), self.i(1 << (self.bits - 1)))

    def with_sign(self, magnitude, sign_bits):
        """`magnitude` (not negative) with the sign bits `sign` (self.sign of some value)."""
        return self.as_float(self.b.or_(self.as_int(magnitude), sign_bits))

    def round(self, t):
        """t rounded to an integer (ties to even), |t| < 2^(mantissa - 1)."""
        shifter = self.f(SHIFTER if self.bits == 32 else 1.5 * 2.0**52)
        return self.sub(self.add(t, shifter), shifter)

    def to_int(self, t):
        return self.b.fptosi(t, self.it)

    def power_of_two(self, n):
        """2^n for an integer vector n within the normal exponents."""
        biased = self.b.add(n, self.i(self.bias))
        return self.as_float(self.b.shl(biased, self.i(self.mantissa)))

    def scale(self, y, n):
        """y * 2^n rounded once, for n in [-2 * bias, 2 * bias]: two factors 2^(n >> 1) and
        2^(n - (n >> 1)) that are normal numbers, the first product exact."""
        half = self.b.ashr(n, self.i(1))
        rest = self.b.sub(n, half)
        return self.mul(self.mul(y, self.power_of_two(half)), self.power_of_two(rest))


# -- the functions -------------------------------------------------------------------------------
def _exp_reduced(m: _Emitter, x):
    """(t, y): t = n + SHIFTER for n = round(x log2 e), y = e^r for r = x - n ln 2, so that
    e^x = y 2^n; x within [-104, 89]. t's low mantissa bits hold n (two's complement): t's
    bits shifted left by 23 are n << 23, n in the exponent field."""
    t = m.fma(x, m.f(LOG2E), m.f(SHIFTER))
    n = m.sub(t, m.f(SHIFTER))  # exact
    r = m.fma(n, m.f(-LN2_HI), x)  # exact: n * LN2_HI is exact and close to x
    r = m.fma(n, m.f(-LN2_LO), r)
    return t, m.poly(r, EXP_P)


def _exp_everywhere(m: _Emitter, x):
    """e^x for every x."""
    xc = m.clamp(x, -104.0, 89.0)  # beyond: 0 and inf, reached by the same arithmetic
    t, y = _exp_reduced(m, xc)
    # y * 2^n rounded once (denormal results too): y * 2^(n - k) is exact, k = -+EXP_SPLIT;
    # 2^(n - k) shifted from the bits of t - k + 127 (n - k's biased exponent in its low bits)
    below = m.lt(xc, m.f(0.0))
    k = m.select(below, m.f(-EXP_SPLIT - m.bias), m.f(EXP_SPLIT - m.bias))
    first = m.as_float(m.b.shl(m.as_int(m.sub(t, k)), m.i(m.mantissa)))
    second = m.select(below, m.f(2.0**-EXP_SPLIT), m.f(2.0**EXP_SPLIT))
    # NaN: selected (the clamp made it 89; a clamp that kept NaN, select(x > 89, 89, x),
    # becomes a minimum that drops it on some targets: Hexagon)
    return m.select(m.is_nan(x), x, m.mul(m.mul(y, first), second))


def _exp(m: _Emitter, x):
    """e^x: the short way (EXP_SHORT) when every lane allows it, the same result as
    _exp_everywhere's with 8 vector operations fewer (Softmax's x - max, within +-86 unless a
    row spans more than 86, takes it), else _exp_everywhere. The short way scales y by 2^n
    with an integer addition to its bits, not a multiplication: the same exact result, and one
    operation fewer for the multiply-add units, which the rest keeps busy."""
    t, y = _exp_reduced(m, x)
    short = m.as_float(m.b.add(m.as_int(y), m.b.shl(m.as_int(t), m.i(m.mantissa))))
    return m.unless_all(m.within(x, EXP_SHORT), short, lambda: _exp_everywhere(m, x))


def _exp2(m: _Emitter, x):
    xc = m.clamp(x, -151.0, 129.0)
    n = m.round(xc)
    r = m.sub(xc, n)  # exact
    y = m.fma(r, m.poly(r, EXP2_P), m.f(1.0))
    return m.select(m.is_nan(x), x, m.scale(y, m.to_int(n)))


def _log_parts(m: _Emitter, x):
    """(e, f, y) with log(x) = e ln 2 + f + y for a positive finite x: e an integer (as a
    float), f = m - 1 exact for the mantissa m in [sqrt(1/2), sqrt(2)), y = log(1+f) - f."""
    tiny = m.lt(x, m.f(2.0**-126))  # denormal: scaled into the normal range first
    xs = m.select(tiny, m.mul(x, m.f(2.0**23)), x)
    bits = m.as_int(xs)
    e = m.b.sub(m.b.ashr(bits, m.i(23)), m.i(126))
    e = m.select(tiny, m.b.sub(e, m.i(23)), e)
    mant = m.as_float(m.b.or_(m.b.and_(bits, m.i(0x007FFFFF)), m.i(0x3F000000)))  # [0.5, 1)
    low = m.lt(mant, m.f(SQRT_HALF))
    one = m.f(1.0)
    f = m.select(low, m.sub(m.add(mant, mant), one), m.sub(mant, one))
    e = m.select(low, m.b.sub(e, m.i(1)), e)
    z = m.mul(f, f)
    y = m.mul(m.mul(f, z), m.poly(f, LOG_P))
    return m.b.sitofp(e, m.ft), f, z, y


def _log_specials(m: _Emitter, x, result):
    """log's value at 0 (-inf), below 0 (NaN), at inf and at NaN."""
    result = m.select(m.eq(x, m.f(0.0)), m.f(-math.inf), result)
    result = m.select(m.lt(x, m.f(0.0)), m.f(math.nan), result)
    result = m.select(m.eq(x, m.f(math.inf)), x, result)
    return m.select(m.is_nan(x), x, result)


def _log(m: _Emitter, x):
    e, f, z, y = _log_parts(m, x)
    y = m.fma(e, m.f(LN2_LO), y)
    y = m.fma(z, m.f(-0.5), y)
    r = m.fma(e, m.f(LN2_HI), m.add(f, y))
    return _log_specials(m, x, r)


def _log2(m: _Emitter, x):
    e, f, z, y = _log_parts(m, x)
    y = m.fma(z, m.f(-0.5), y)
    r = m.mul(y, m.f(LOG2EA))
    r = m.fma(f, m.f(LOG2EA), r)
    r = m.add(m.add(m.add(r, y), f), e)
    return _log_specials(m, x, r)


def _log10(m: _Emitter, x):
    e, f, z, y = _log_parts(m, x)
    y = m.fma(z, m.f(-0.5), y)
    r = m.mul(y, m.f(L10EB))
    r = m.fma(f, m.f(L10EB), r)
    r = m.fma(e, m.f(L102B), r)
    r = m.fma(y, m.f(L10EA), r)
    r = m.fma(f, m.f(L10EA), r)
    r = m.fma(e, m.f(L102A), r)
    return _log_specials(m, x, r)


def _tanh(m: _Emitter, x):
    a = m.abs(x)
    z = m.mul(x, x)
    small = m.fma(m.mul(x, z), m.poly(z, TANH_P), x)
    one = m.f(1.0)
    e = _exp(m, m.add(a, a))  # inf beyond 44: tanh = 1
    big = m.with_sign(m.sub(one, m.div(m.f(2.0), m.add(e, one))), m.sign(x))
    small = m.select(m.eq(x, m.f(0.0)), x, small)  # -0 stays -0
    return m.select(m.lt(a, m.f(TANH_SPLIT)), small, big)  # NaN: big, which is NaN


def _erf(m: _Emitter, x):
    a = m.abs(x)
    small = m.fma(x, m.poly(m.mul(x, x), ERF_SMALL_P), x)
    minus_q = m.poly(m.clamp(a, 0.0, ERF_BIG_END), tuple(-c for c in ERF_BIG_Q))
    big = m.with_sign(m.sub(m.f(1.0), _exp(m, minus_q)), m.sign(x))
    big = m.select(m.lt(a, m.f(ERF_ONE)), big, m.with_sign(m.f(1.0), m.sign(x)))
    result = m.select(m.lt(a, m.f(ERF_SPLIT)), small, big)
    return m.select(m.is_nan(x), x, result)


# pow in float64: log2 by 2/ln(2) * atanh(s), s = (m-1)/(m+1); exp2 by the Taylor polynomial
_ATANH_D = tuple(1.0 / (2 * k + 1) for k in range(9))  # |s| <= 0.1716: s^18/19 < 2^-48
_EXP2_D = tuple(math.log(2) ** k / math.factorial(k) for k in range(12))  # |r| <= 1/2


def _log2_wide(d: _Emitter, x):
    """log2(x) in float64 for x a positive finite float32 value (a normal float64)."""
    bits = d.as_int(x)
    e = d.b.sub(d.b.ashr(bits, d.i(52)), d.i(1023))
    mant = d.as_float(d.b.or_(d.b.and_(bits, d.i((1 << 52) - 1)), d.i(0x3FF << 52)))  # [1, 2)
    high = d.gt(mant, d.f(math.sqrt(2.0)))
    mant = d.select(high, d.mul(mant, d.f(0.5)), mant)
    e = d.select(high, d.b.add(e, d.i(1)), e)
    one = d.f(1.0)
    s = d.div(d.sub(mant, one), d.add(mant, one))
    ln_mant = d.mul(d.add(s, s), d.poly(d.mul(s, s), _ATANH_D))
    return d.fma(ln_mant, d.f(1.0 / math.log(2.0)), d.b.sitofp(e, d.ft))


def _pow(m: _Emitter, x, y):
    d = m.like(F64)
    xd, yd = m.b.fpext(x, d.ft), m.b.fpext(y, d.ft)
    ax = d.abs(xd)
    lg = d.select(d.eq(ax, d.f(0.0)), d.f(-math.inf), _log2_wide(d, ax))
    lg = d.select(d.eq(ax, d.f(math.inf)), ax, lg)
    t = d.clamp(d.mul(yd, lg), -160.0, 140.0)  # beyond: 0 and inf after rounding to float32
    n = d.round(t)
    r = d.sub(t, n)
    p = d.poly(r, _EXP2_D)
    magnitude = m.b.fptrunc(d.scale(p, d.to_int(n)), m.ft)
    # the sign: a negative base (or -0) to an odd integer power
    ay = m.abs(y)
    whole_range = m.lt(ay, m.f(2.0**24))
    yi = m.to_int(m.select(whole_range, y, m.f(0.0)))
    integer = m.b.or_(m.b.fcmp_ordered(">=", ay, m.f(2.0**23)), m.eq(m.b.sitofp(yi, m.ft), y))
    odd_bit = m.b.icmp_unsigned("!=", m.b.and_(yi, m.i(1)), m.i(0))
    odd = m.b.and_(m.b.and_(whole_range, integer), odd_bit)
    flip = m.b.and_(odd, m.b.icmp_unsigned("!=", m.sign(x), m.i(0)))
    result = m.select(flip, m.as_float(m.b.xor(m.as_int(magnitude), m.i(1 << 31))), magnitude)
    negative_finite = m.b.and_(m.lt(x, m.f(0.0)), m.gt(x, m.f(-math.inf)))
    nan = m.f(math.nan)
    result = m.select(m.b.and_(negative_finite, m.b.not_(integer)), nan, result)
    result = m.select(m.is_nan(x, y), nan, result)
    one = m.f(1.0)
    minus_one_to_inf = m.b.and_(m.eq(x, m.f(-1.0)), m.eq(ay, m.f(math.inf)))
    result = m.select(minus_one_to_inf, one, result)
    return m.select(m.b.or_(m.eq(x, one), m.eq(y, m.f(0.0))), one, result)


_BODIES: dict[str, Callable] = {
    "exp": _exp,
    "exp2": _exp2,
    "log": _log,
    "log2": _log2,
    "log10": _log10,
    "tanh": _tanh,
    "erf": _erf,
    "pow": _pow,
}


# -- the interface -------------------------------------------------------------------------------
def computes(op: str, dtype: DataType) -> bool:
    """Whether this module computes intrinsic `op` of `dtype` (float32 and float16)."""
    return op in _BODIES and dtype.is_float and dtype.element.bits in (16, 32)


def function(module: ir.Module, op: str, typ: ir.Type) -> ir.Function:
    """The internal function computing `op` on float32 values of `typ` (a float or a vector of
    floats), defined in `module` on first use."""
    name = f"loom.vecmath.{op}.{mangle(typ)}"
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    arity = 2 if op == "pow" else 1
    fn = ir.Function(module, ir.FunctionType(typ, [typ] * arity), name)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    lanes = typ.count if isinstance(typ, ir.VectorType) else 0
    b.ret(_BODIES[op](_Emitter(b, module, F32, lanes), *fn.args))
    return fn


def call(builder: ir.IRBuilder, module: ir.Module, op: str, args: list[ir.Value]) -> ir.Value:
    """`op` of `args` (float32 or float16 values, scalars or vectors); float16 is computed in
    float32 and rounded back."""
    typ = args[0].type
    element = typ.element if isinstance(typ, ir.VectorType) else typ
    if element == F32:
        return builder.call(function(module, op, typ), args)
    wide = ir.VectorType(F32, typ.count) if isinstance(typ, ir.VectorType) else F32
    result = builder.call(function(module, op, wide), [builder.fpext(a, wide) for a in args])
    return builder.fptrunc(result, typ)
