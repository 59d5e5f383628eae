/* Hexagon: the floating-point operations v66 has no instruction for, which LLVM calls as
 * routines: double multiply and divide, float divide (clang 14; newer LLVM inlines it), square
 * roots, and half-precision conversions.
 *
 * Integer arithmetic only, so each result is IEEE 754's correctly rounded one (round to nearest,
 * ties to even) whatever the FPU does, with subnormals, infinities and NaNs. One representation
 * serves every format: a finite non-zero value is (-1)^sign * sig * 2^(exp - 63) with sig's top
 * bit set, plus a sticky flag for non-zero bits lost below sig. Each operation computes at
 * least 60 significant bits and rounds once, in pack(). No `/` or `%` appears here: they would
 * call the division routines of intdiv.c, and on floats these very functions. */
#include <stdint.h>

typedef struct {
    int mbits, ebits; /* fraction and exponent field widths */
} format;

static const format F16 = {10, 5}, F32 = {23, 8}, F64 = {52, 11};

typedef enum { ZERO, FINITE, INF, NAN_ } category;

typedef struct {
    category what;
    uint32_t sign;
    int32_t exp;
    uint64_t sig;
} unpacked;

static int32_t bias(format f) { return (1 << (f.ebits - 1)) - 1; }
static uint64_t all_ones(int bits) { return bits == 64 ? ~(uint64_t)0 : ((uint64_t)1 << bits) - 1; }
static uint64_t sign_bit(format f, uint32_t sign) {
    return (uint64_t)sign << (f.mbits + f.ebits);
}

static unpacked unpack(uint64_t bits, format f) {
    unpacked u;
    uint64_t field = (bits >> f.mbits) & all_ones(f.ebits);
    uint64_t fraction = bits & all_ones(f.mbits);
    u.sign = (uint32_t)(bits >> (f.mbits + f.ebits)) & 1;
    u.exp = 0;
    u.sig = 0;
    if (field == all_ones(f.ebits)) {
        u.what = fraction ? NAN_ : INF;
        return u;
    }
    if (field == 0 && fraction == 0) {
        u.what = ZERO;
        return u;
    }
    /* value = m * 2^(e - bias - mbits); a subnormal has no implicit bit and e = 1 */
    uint64_t m = field ? fraction | (uint64_t)1 << f.mbits : fraction;
    int32_t e = (field ? (int32_t)field : 1) - bias(f) - f.mbits;
    int lz = __builtin_clzll(m);
    u.what = FINITE;
    u.sig = m << lz;
    u.exp = e - lz + 63;
    return u;
}

static uint64_t infinity(format f, uint32_t sign) {
    return sign_bit(f, sign) | all_ones(f.ebits) << f.mbits;
}
static uint64_t zero(format f, uint32_t sign) { return sign_bit(f, sign); }
static uint64_t default_nan(format f) {
    return all_ones(f.ebits) << f.mbits | (uint64_t)1 << (f.mbits - 1);
}
/* An input NaN comes back quiet, its payload kept (narrowed to the result's format). */
static uint64_t quiet_nan(uint64_t bits, format from, format to) {
    uint32_t sign = (uint32_t)(bits >> (from.mbits + from.ebits)) & 1;
    uint64_t payload = bits & all_ones(from.mbits);
    payload = to.mbits >= from.mbits ? payload << (to.mbits - from.mbits)
                                     : payload >> (from.mbits - to.mbits);
    return sign_bit(to, sign) | default_nan(to) | payload;
}

/* Round (-1)^sign * (sig + sticky) * 2^(exp - 63) to format f: the only rounding step. */
static uint64_t pack(uint32_t sign, int32_t exp, uint64_t sig, int sticky, format f) {
    const int32_t emin = 1 - bias(f), emax = bias(f);
    if (exp > emax) return infinity(f, sign);
    /* keep mbits + 1 bits of sig; a subnormal keeps fewer, its last bit weighing 2^emin-mbits */
    int32_t shift = 63 - f.mbits;
    uint64_t field_below = (uint64_t)(exp + bias(f) - 1);
    if (exp < emin) {
        shift += emin - exp;
        field_below = 0;
    }
    uint64_t mant, rest, half;
    if (shift > 64) { /* below half the smallest subnormal */
        mant = 0;
        rest = 0;
        half = 1;
    } else if (shift == 64) {
        mant = 0;
        rest = sig;
        half = (uint64_t)1 << 63;
    } else {
        mant = sig >> shift;
        rest = sig & all_ones(shift);
        half = (uint64_t)1 << (shift - 1);
    }
    if (rest > half || (rest == half && (sticky || (mant & 1)))) ++mant;
    /* mant carries its leading one into the exponent field; a carry out of rounding (mant
     * reaching 2^(mbits+1), or a subnormal reaching 2^mbits) bumps the field, up to infinity */
    return sign_bit(f, sign) | ((field_below << f.mbits) + mant);
}

/* -- operations on bits of format f ------------------------------------------------------- */

static uint64_t divide(uint64_t a_bits, uint64_t b_bits, format f) {
    unpacked a = unpack(a_bits, f), b = unpack(b_bits, f);
    uint32_t sign = a.sign ^ b.sign;
    if (a.what == NAN_) return quiet_nan(a_bits, f, f);
    if (b.what == NAN_) return quiet_nan(b_bits, f, f);
    if (a.what == INF) return b.what == INF ? default_nan(f) : infinity(f, sign);
    if (b.what == INF) return zero(f, sign);
    if (a.what == ZERO) return b.what == ZERO ? default_nan(f) : zero(f, sign);
    if (b.what == ZERO) return infinity(f, sign);
    /* restoring long division of the significands, one quotient bit per step; the remainder
     * stays below b.sig, and a bit shifted out of it means it certainly exceeds b.sig */
    uint64_t r = a.sig, q = 0;
    int32_t exp = a.exp - b.exp;
    if (r >= b.sig) {
        r -= b.sig;
        q = 1;
    }
    int steps = q ? 63 : 64; /* a quotient below 1 needs one more step to fill 64 bits */
    if (!q) exp -= 1;
    for (int i = 0; i < steps; ++i) {
        uint64_t carry = r >> 63;
        r <<= 1;
        q <<= 1;
        if (carry || r >= b.sig) {
            r -= b.sig;
            q |= 1;
        }
    }
    return pack(sign, exp, q, r != 0, f);
}

static uint64_t multiply(uint64_t a_bits, uint64_t b_bits, format f) {
    unpacked a = unpack(a_bits, f), b = unpack(b_bits, f);
    uint32_t sign = a.sign ^ b.sign;
    if (a.what == NAN_) return quiet_nan(a_bits, f, f);
    if (b.what == NAN_) return quiet_nan(b_bits, f, f);
    if (a.what == INF || b.what == INF)
        return a.what == ZERO || b.what == ZERO ? default_nan(f) : infinity(f, sign);
    if (a.what == ZERO || b.what == ZERO) return zero(f, sign);
    /* the 128-bit product from 32 x 32 -> 64-bit partial products */
    uint64_t a1 = a.sig >> 32, a0 = a.sig & 0xffffffffu, b1 = b.sig >> 32, b0 = b.sig & 0xffffffffu;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);
    uint64_t lo = (mid << 32) | (p00 & 0xffffffffu);
    uint64_t hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
    /* the product of two values in [2^63, 2^64) lies in [2^126, 2^128) */
    if (hi >> 63) return pack(sign, a.exp + b.exp + 1, hi, lo != 0, f);
    return pack(sign, a.exp + b.exp, hi << 1 | lo >> 63, (lo << 1) != 0, f);
}

static uint64_t square_root(uint64_t bits, format f) {
    unpacked a = unpack(bits, f);
    if (a.what == NAN_) return quiet_nan(bits, f, f);
    if (a.what == ZERO) return bits; /* sqrt(-0) is -0 */
    if (a.sign) return default_nan(f);
    if (a.what == INF) return bits;
    /* value = R * 2^(2t) with the 128-bit radicand R = sig << s, s making the exponent even;
     * R lies in [2^118, 2^120), so its integer root has 60 bits */
    int s = ((a.exp - 63 - 55) & 1) ? 56 : 55;
    int32_t t = ((a.exp - 63 - s) + 2048) >> 1; /* exact: the difference is even */
    t -= 1024;
    uint64_t hi = a.sig >> (64 - s), lo = a.sig << s;
    /* digit-by-digit (restoring) square root, two radicand bits per root bit; the remainder
     * stays at most 2 * root < 2^61, so shifting it by two never overflows */
    uint64_t root = 0, rem = 0;
    for (int j = 59; j >= 0; --j) {
        int pos = 2 * j;
        uint64_t pair = pos >= 64 ? (hi >> (pos - 64)) & 3 : (lo >> pos) & 3;
        uint64_t trial = (root << 2) | 1;
        rem = (rem << 2) | pair;
        root <<= 1;
        if (rem >= trial) {
            rem -= trial;
            root |= 1;
        }
    }
    return pack(0, t + 59, root << 4, rem != 0, f);
}

static uint64_t convert(uint64_t bits, format from, format to) {
    unpacked a = unpack(bits, from);
    switch (a.what) {
    case NAN_: return quiet_nan(bits, from, to);
    case INF: return infinity(to, a.sign);
    case ZERO: return zero(to, a.sign);
    default: return pack(a.sign, a.exp, a.sig, 0, to);
    }
}

/* -- the routines, by the names LLVM calls ------------------------------------------------ */

typedef union {
    float f;
    uint32_t u;
} f32_bits;
typedef union {
    double d;
    uint64_t u;
} f64_bits;

static uint64_t bits32(float x) {
    f32_bits b = {.f = x};
    return b.u;
}
static float float32(uint64_t u) {
    f32_bits b = {.u = (uint32_t)u};
    return b.f;
}
static uint64_t bits64(double x) {
    f64_bits b = {.d = x};
    return b.u;
}
static double float64(uint64_t u) {
    f64_bits b = {.u = u};
    return b.d;
}

float __hexagon_divsf3(float a, float b) { return float32(divide(bits32(a), bits32(b), F32)); }
double __hexagon_divdf3(double a, double b) {
    return float64(divide(bits64(a), bits64(b), F64));
}
double __hexagon_muldf3(double a, double b) {
    return float64(multiply(bits64(a), bits64(b), F64));
}
float __hexagon_sqrtf(float a) { return float32(square_root(bits32(a), F32)); }
double __hexagon_sqrt(double a) { return float64(square_root(bits64(a), F64)); }

/* Half precision travels as its 16 bits in an integer register (compiler-rt's ABI where the
 * C compiler has no _Float16, as clang 14 has none for Hexagon). */
float __extendhfsf2(uint16_t h) { return float32(convert(h, F16, F32)); }
uint16_t __truncsfhf2(float a) { return (uint16_t)convert(bits32(a), F32, F16); }
uint16_t __truncdfhf2(double a) { return (uint16_t)convert(bits64(a), F64, F16); }
