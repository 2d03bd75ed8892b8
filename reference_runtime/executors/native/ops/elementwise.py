"""Native kernels: elementwise (see the registry module for the kernel conventions).

Every kernel returns exactly the dtype ONNX assigns its output. Binary and variadic ops use
NumPy-style (multidirectional) broadcasting, so only the versions that broadcast that way are
registered (the legacy ``broadcast``/``axis`` attributes of opsets < 7 are refused). Composite
float functions (Gelu, Mish, Softplus, ...) are evaluated in float32 for float16/bfloat16 inputs
and rounded once at the end.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .. import dtypes
from ..registry import Unsupported, op

# ---------------------------------------------------------------------------- helpers


def _is_int(x) -> bool:
    return x.dtype.kind in "iu"


def _compute(node, x, f):
    """Apply the float function ``f`` in at least float32 and round back to ``x``'s dtype."""
    work = x.astype(node.xp.float32) if x.dtype.itemsize < 4 else x
    return f(work).astype(x.dtype, copy=False)


def _safe_divisor(xp, b):
    """Integer divisors with zeros replaced by 1 (integer division by zero is undefined in
    ONNX; this keeps it from trapping or warning, the result there is 0)."""
    return xp.where(b == 0, xp.asarray(1, dtype=b.dtype), b)


def _choice(name: str, allowed: tuple, default):
    def check(node):
        value = node.attr(name, default)
        if value not in allowed:
            raise Unsupported(f"{node.op_type} with {name}={value!r}")

    return check


# ---------------------------------------------------------------------------- arithmetic


@op("Add", since=(7, 13, 14), inline="{0} + {1}")
def add(node, a, b):
    return a + b


@op("Sub", since=(7, 13, 14), inline="{0} - {1}")
def sub(node, a, b):
    return a - b


@op("Mul", since=(7, 13, 14), inline="{0} * {1}")
def mul(node, a, b):
    return a * b


@op("Div", since=(7, 13, 14))
def div(node, a, b):
    if not _is_int(a):
        return a / b
    xp = node.xp
    safe = _safe_divisor(xp, b)
    q = a // safe  # floors; integer division in ONNX truncates toward zero
    if a.dtype.kind == "i":
        q = q + ((a % safe != 0) & ((a < 0) != (safe < 0))).astype(q.dtype)
    return xp.where(b == 0, xp.asarray(0, dtype=q.dtype), q)


@op("Mod", since=(10, 13, 28), check=_choice("fmod", (0, 1), 0))
def mod(node, a, b):
    xp = node.xp
    fn = xp.fmod if node.attr("fmod", 0) else xp.remainder  # C fmod / Python % (sign of b)
    if not _is_int(a):
        return fn(a, b)
    r = fn(a, _safe_divisor(xp, b))
    return xp.where(b == 0, xp.asarray(0, dtype=r.dtype), r)


@op("Pow", since=(7, 12, 13, 15))
def pow_(node, base, exponent):
    """Output dtype is the base's dtype, whatever the exponent's."""
    xp = node.xp
    if not _is_int(base):
        work = xp.float32 if base.dtype.itemsize < 4 else base.dtype
        return xp.power(base.astype(work), exponent.astype(work)).astype(base.dtype, copy=False)
    if not _is_int(exponent):
        return xp.power(base.astype(xp.float64), exponent.astype(xp.float64)).astype(base.dtype)
    e = exponent.astype(base.dtype)
    r = xp.power(base, xp.abs(e))
    # x ** -n is 1 / x ** n truncated: +-1 for |x| == 1, otherwise 0.
    negative = (e < 0) & (xp.abs(r) != 1)
    return xp.where(negative, xp.asarray(0, dtype=base.dtype), r)


@op("Neg", since=(6, 13))
def neg(node, x):
    return node.xp.negative(x)


@op("Abs", since=(6, 13))
def abs_(node, x):
    return node.xp.abs(x)


@op("Sign", since=(9, 13))
def sign(node, x):
    return node.xp.sign(x)


@op("Reciprocal", since=(6, 13))
def reciprocal(node, x):
    return node.xp.reciprocal(x)


@op("Sqrt", since=(6, 13), inline="XP.sqrt({0})")
def sqrt(node, x):
    return node.xp.sqrt(x)


@op("Exp", since=(6, 13), inline="XP.exp({0})")
def exp(node, x):
    return node.xp.exp(x)


@op("Log", since=(6, 13))
def log(node, x):
    return node.xp.log(x)


@op("Floor", since=(6, 13))
def floor(node, x):
    return node.xp.floor(x)


@op("Ceil", since=(6, 13))
def ceil(node, x):
    return node.xp.ceil(x)


@op("Round", since=(11, 22))
def round_(node, x):
    return node.xp.rint(x)  # halves to even


@op("Sin", since=(7, 22))
def sin(node, x):
    return node.xp.sin(x)


@op("Cos", since=(7, 22))
def cos(node, x):
    return node.xp.cos(x)


@op("Tan", since=(7, 22))
def tan(node, x):
    return node.xp.tan(x)


@op("Tanh", since=(6, 13))
def tanh(node, x):
    return node.xp.tanh(x)


# erf after fdlibm's s_erf.c (accurate to about 1 ulp in float64); NumPy itself has no erf.
_ERF_SMALL = ((1.28379167095512558561e-01, -3.25042107247001499370e-01,
               -2.84817495755985104766e-02, -5.77027029648944159157e-03,
               -2.37630166566501626084e-05),
              (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02,
               5.08130628187576562776e-03, 1.32494738004321644526e-04,
               -3.96022827877536812320e-06))  # fmt: skip
_ERF_NEAR_ONE = ((-2.36211856075265944077e-03, 4.14856118683748331666e-01,
                  -3.72207876035701323847e-01, 3.18346619901161753674e-01,
                  -1.10894694282396677476e-01, 3.54783043256182359371e-02,
                  -2.16637559486879084300e-03),
                 (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01,
                  7.18286544141962662868e-02, 1.26171219808761642112e-01,
                  1.36370839120290507362e-02, 1.19844998467991074170e-02))  # fmt: skip
_ERFC_MID = ((-9.86494403484714822705e-03, -6.93858572707181764372e-01,
              -1.05586262253232909814e01, -6.23753324503260060396e01,
              -1.62396669462573470355e02, -1.84605092906711035994e02,
              -8.12874355063065934246e01, -9.81432934416914548592e00),
             (1.0, 1.96512716674392571292e01, 1.37657754143519042600e02,
              4.34565877475229228821e02, 6.45387271733267880336e02,
              4.29008140027567833386e02, 1.08635005541779435134e02,
              6.57024977031928170135e00, -6.04244152148580987438e-02))  # fmt: skip
_ERFC_FAR = ((-9.86494292470009928597e-03, -7.99283237680523006574e-01,
              -1.77579549177547519889e01, -1.60636384855821916062e02,
              -6.37566443368389627722e02, -1.02509513161107724954e03,
              -4.83519191608651397019e02),
             (1.0, 3.03380607434824582924e01, 3.25792512996573918826e02,
              1.53672958608443695994e03, 3.19985821950859553908e03,
              2.55305040643316442583e03, 4.74528541206955367215e02,
              -2.24409524465858183362e01))  # fmt: skip
_ERX = 8.45062911510467529297e-01


def _poly(coefficients, z):
    result = 0.0
    for c in reversed(coefficients):
        result = result * z + c
    return result


def _ratio(pq, z):
    return _poly(pq[0], z) / _poly(pq[1], z)


def _erf(xp, x):
    """erf in float64 for any float array, returned in x's dtype."""
    d = x.astype(xp.float64)
    a = xp.abs(d)
    # Each range is evaluated on clipped values, which keeps the lanes it does not serve finite.
    u = xp.clip(d, -0.84375, 0.84375)  # |x| < 0.84375
    small = u + u * _ratio(_ERF_SMALL, u * u)
    near_one = _ERX + _ratio(_ERF_NEAR_ONE, xp.clip(a, 0.84375, 1.25) - 1.0)  # |x| < 1.25
    t = xp.clip(a, 1.25, 6.0)  # 1.25 <= |x| < 6; erf is 1 to double precision beyond
    s = 1.0 / (t * t)
    tail = xp.where(t < 1 / 0.35, _ratio(_ERFC_MID, s), _ratio(_ERFC_FAR, s))
    z = t.astype(xp.float32).astype(xp.float64)  # z * z is exact: exp(-t*t) to full precision
    erfc = xp.exp(-z * z - 0.5625) * xp.exp((z - t) * (z + t) + tail) / t
    large = xp.where(a < 6.0, 1.0 - erfc, 1.0)
    large = xp.where(a < 1.25, near_one, large)
    result = xp.where(a < 0.84375, small, xp.copysign(large, d))
    return xp.where(xp.isnan(d), d, result).astype(x.dtype)


@op("Erf", since=(9, 13))
def erf(node, x):
    if _is_int(x):  # Erf accepts integer tensors too
        return _erf(node.xp, x.astype(node.xp.float64)).astype(x.dtype)
    return _erf(node.xp, x)


# ---------------------------------------------------------------------------- activations


@op("Sigmoid", since=(6, 13))
def sigmoid(node, x):
    return _compute(node, x, lambda v: _sigmoid(node.xp, v))


def _sigmoid(xp, v):
    e = xp.exp(-xp.abs(v))  # never overflows
    return xp.where(v >= 0, 1 / (1 + e), e / (1 + e))


@op("Relu", since=(6, 13, 14))
def relu(node, x):
    return node.xp.maximum(x, node.xp.asarray(0, dtype=x.dtype))


@op("LeakyRelu", since=(6, 16))
def leaky_relu(node, x):
    alpha = node.attr("alpha", 0.01)
    return _compute(node, x, lambda v: node.xp.where(v < 0, v * alpha, v))


@op("Elu", since=(6, 22))
def elu(node, x):
    alpha = node.attr("alpha", 1.0)
    xp = node.xp
    return _compute(node, x, lambda v: xp.where(v > 0, v, alpha * xp.expm1(xp.minimum(v, 0))))


@op("Selu", since=(6, 22))
def selu(node, x):
    alpha = node.attr("alpha", 1.67326319217681884765625)
    gamma = node.attr("gamma", 1.05070102214813232421875)
    xp = node.xp

    def f(v):
        return gamma * xp.where(v > 0, v, alpha * xp.expm1(xp.minimum(v, 0)))

    return _compute(node, x, f)


@op("HardSigmoid", since=(6, 22))
def hard_sigmoid(node, x):
    alpha = node.attr("alpha", 0.2)
    beta = node.attr("beta", 0.5)
    return _compute(node, x, lambda v: node.xp.clip(alpha * v + beta, 0, 1))


@op("HardSwish", since=(14, 22))
def hard_swish(node, x):
    return _compute(node, x, lambda v: v * node.xp.clip(v / 6 + 0.5, 0, 1))


@op("Softplus", since=(1, 22))
def softplus(node, x):
    return _compute(node, x, lambda v: _softplus(node.xp, v))


def _softplus(xp, v):
    return xp.logaddexp(v, xp.asarray(0, dtype=v.dtype))  # log(1 + exp(v)), no overflow


@op("Softsign", since=(1, 22))
def softsign(node, x):
    return _compute(node, x, lambda v: v / (1 + node.xp.abs(v)))


@op("Gelu", since=(20,), check=_choice("approximate", ("none", "tanh"), "none"))
def gelu(node, x):
    xp = node.xp
    if node.attr("approximate", "none") == "tanh":

        def f(v):
            inner = math.sqrt(2 / math.pi) * (v + 0.044715 * v * v * v)
            return 0.5 * v * (1 + xp.tanh(inner))

    else:

        def f(v):
            return 0.5 * v * (1 + _erf(xp, v * (1 / math.sqrt(2))))

    return _compute(node, x, f)


@op("Swish", since=(24,))
def swish(node, x):
    alpha = node.attr("alpha", 1.0)
    return _compute(node, x, lambda v: v * _sigmoid(node.xp, alpha * v))


@op("Mish", since=(18, 22))
def mish(node, x):
    return _compute(node, x, lambda v: v * node.xp.tanh(_softplus(node.xp, v)))


# ---------------------------------------------------------------------------- logic


@op("And", since=(7,), inline="XP.logical_and({0}, {1})")
def and_(node, a, b):
    return node.xp.logical_and(a, b)


@op("Or", since=(7,), inline="XP.logical_or({0}, {1})")
def or_(node, a, b):
    return node.xp.logical_or(a, b)


@op("Xor", since=(7,))
def xor(node, a, b):
    return node.xp.logical_xor(a, b)


@op("Not", since=(1,), inline="XP.logical_not({0})")
def not_(node, x):
    return node.xp.logical_not(x)


@op("Equal", since=(7, 11, 13, 19), inline="{0} == {1}")
def equal(node, a, b):
    return a == b


@op("Greater", since=(7, 9, 13), inline="{0} > {1}")
def greater(node, a, b):
    return a > b


@op("GreaterOrEqual", since=(12, 16), inline="{0} >= {1}")
def greater_or_equal(node, a, b):
    return a >= b


@op("Less", since=(7, 9, 13), inline="{0} < {1}")
def less(node, a, b):
    return a < b


@op("LessOrEqual", since=(12, 16), inline="{0} <= {1}")
def less_or_equal(node, a, b):
    return a <= b


@op("IsInf", since=(10, 20))
def is_inf(node, x):
    xp = node.xp
    result = xp.isinf(x)
    if not node.attr("detect_positive", 1):
        result = result & (x < 0)
    if not node.attr("detect_negative", 1):
        result = result & (x > 0)
    return result


@op("IsNaN", since=(9, 13, 20))
def is_nan(node, x):
    return node.xp.isnan(x)


# ---------------------------------------------------------------------------- bitwise


def _prepare_bit_shift(node, constants):
    """One constant shift amount within the bit width (X and Y share their type): the shift
    ufunc and its scalar operand are chosen once."""
    y = constants.get(1)
    if y is None or y.size != 1 or node.xp is not np:
        return None
    amount = int(y.reshape(-1)[0])
    if not 0 <= amount < 8 * y.dtype.itemsize:
        return None
    dtype, rank = y.dtype, y.ndim
    shift = np.left_shift if node.attr("direction") == "LEFT" else np.right_shift
    operand = dtype.type(amount)

    def kernel(node, x, y):
        if x.dtype is not dtype or x.ndim < rank:  # anything else: the general kernel
            return bit_shift(node, x, y)
        return shift(x, operand)

    return kernel


@op(
    "BitShift",
    since=(11, 28),
    check=_choice("direction", ("LEFT", "RIGHT"), None),
    prepare=_prepare_bit_shift,
)
def bit_shift(node, x, y):
    """Shifts of Y < 0 or Y >= the bit width give what the fill alone produces (0, or -1 for
    a right shift of a negative X); bits shifted out are discarded (uint64 wraps)."""
    xp = node.xp
    bits = 8 * x.dtype.itemsize
    if y.size == 1 and y.ndim <= x.ndim and xp is np:  # one shift amount: shift directly
        amount = int(y.reshape(-1)[0])
        if 0 <= amount < bits:
            shift = xp.left_shift if node.attr("direction") == "LEFT" else xp.right_shift
            return shift(x, x.dtype.type(amount))  # y has no more dims than x: x's shape
    valid = (y >= 0) & (y < bits)
    amount = xp.where(valid, y, xp.asarray(0, dtype=y.dtype)).astype(x.dtype)
    zero = xp.asarray(0, dtype=x.dtype)
    if node.attr("direction") == "LEFT":
        return xp.where(valid, xp.left_shift(x, amount), zero)
    fill = xp.where(x < 0, xp.asarray(-1, dtype=x.dtype), zero) if x.dtype.kind == "i" else zero
    return xp.where(valid, xp.right_shift(x, amount), fill)


@op("BitwiseAnd", since=(18,))
def bitwise_and(node, a, b):
    return node.xp.bitwise_and(a, b)


@op("BitwiseOr", since=(18,))
def bitwise_or(node, a, b):
    return node.xp.bitwise_or(a, b)


@op("BitwiseXor", since=(18,))
def bitwise_xor(node, a, b):
    return node.xp.bitwise_xor(a, b)


@op("BitwiseNot", since=(18,))
def bitwise_not(node, x):
    return node.xp.invert(x)


# ---------------------------------------------------------------------------- selection


@op("Where", since=(9, 16))
def where(node, condition, x, y):
    if (
        node.xp is np
        and condition.size == 1
        and condition.shape == x.shape == y.shape
        and x.dtype == y.dtype
    ):
        # One element each: choosing the array is several times cheaper than np.where.
        return x if condition.item() else y
    if node.xp is np and x.size >= _ROWS_AT_LEAST and x.shape == y.shape and x.dtype == y.dtype:
        rows = _row_condition(condition, x.shape)
        if rows is not None:
            # One choice per row of contiguous elements (a mask over a KV cache's positions):
            # y, with the chosen rows of x copied over it; np.where would pick element by
            # element.
            out = y.copy()
            table = out.reshape(rows.shape[0], -1)
            table[rows] = x.reshape(table.shape)[rows]
            return out
    return node.xp.where(condition, x, y)


# Where's row-wise selection pays from this many elements, with rows of at least _ROW_AT_LEAST.
_ROWS_AT_LEAST = 16384
_ROW_AT_LEAST = 16


def _row_condition(condition, shape: tuple):
    """A boolean ``condition`` that broadcasts to ``shape`` without enlarging it and is 1 on
    its trailing dims (right-aligned) as one choice per row of those trailing dims, flat; or
    None."""
    if condition.dtype != np.bool_ or condition.ndim > len(shape):
        return None
    full = (1,) * (len(shape) - condition.ndim) + condition.shape
    lead, inner = len(shape), 1
    while lead and full[lead - 1] == 1:
        lead -= 1
        inner *= shape[lead]
    if inner < _ROW_AT_LEAST or any(c not in (1, n) for c, n in zip(full, shape, strict=True)):
        return None
    per_row = condition.reshape(full[:lead])
    if per_row.shape == shape[:lead]:
        return per_row.reshape(-1)
    rows = np.empty(shape[:lead], dtype=np.bool_)
    rows[...] = per_row  # broadcasts
    return rows.reshape(-1)


@op("Max", since=(6, 8, 12, 13), inline="XP.maximum({0}, {1})")
def max_(node, *inputs):
    if len(inputs) == 2:
        return node.xp.maximum(*inputs)
    return functools.reduce(node.xp.maximum, inputs)


@op("Min", since=(6, 8, 12, 13), inline="XP.minimum({0}, {1})")
def min_(node, *inputs):
    if len(inputs) == 2:
        return node.xp.minimum(*inputs)
    return functools.reduce(node.xp.minimum, inputs)


@op("Sum", since=(6, 8, 13))
def sum_(node, *inputs):
    return functools.reduce(node.xp.add, inputs)


@op("Mean", since=(6, 8, 13))
def mean(node, *inputs):
    total = functools.reduce(node.xp.add, inputs)
    return total / node.xp.asarray(len(inputs), dtype=total.dtype)


@op("Clip", since=(6, 11, 12, 13))
def clip(node, x, low=None, high=None):
    """min/max are inputs from opset 11, attributes before; min > max gives max everywhere."""
    xp = node.xp
    if node.opset < 11:
        low, high = node.attr("min"), node.attr("max")
    if low is not None:
        x = xp.maximum(x, xp.asarray(low, dtype=x.dtype).reshape(()))
    if high is not None:
        x = xp.minimum(x, xp.asarray(high, dtype=x.dtype).reshape(()))
    return x


# ---------------------------------------------------------------------------- casts


def _check_cast(node):
    to = node.attr("to")
    if to not in dtypes.NUMPY:
        raise Unsupported(f"Cast to {dtypes.name(to) if isinstance(to, int) else to!r}")
    if to in dtypes.CUDA_UNSUPPORTED and node.xp is not np:
        raise Unsupported(f"Cast to {dtypes.name(to)} on CUDA")


def _prepare_cast(node, constants):
    to = dtypes.NUMPY[node.attr("to")]

    def kernel(node, x):
        return x.astype(to, copy=False)

    return kernel


@op("Cast", since=(6, 9, 13, 19, 21, 23, 24, 25, 28), check=_check_cast, prepare=_prepare_cast)
def cast(node, x):
    """``saturate`` and ``round_mode`` only concern float8 targets, which are refused."""
    return x.astype(dtypes.NUMPY[node.attr("to")], copy=False)


@op("CastLike", since=(15, 19, 21, 23, 24, 25))
def cast_like(node, x, like):
    return x.astype(like.dtype, copy=False)


@op("Identity", since=(1, 13, 14, 16, 19, 21, 23, 24, 25))
def identity(node, x):
    return x
