"""The truth of a certify claim, computed independently of attncert (sympy + mpmath only).

Tier: exact.  Every answer is derived in exact rational arithmetic (sympy polynomials over QQ,
exact real-root isolation with rational intervals); transcendental range ends e^{k a_e} are
enclosed with mpmath's interval arithmetic (outward rounding) and separated from the algebraic
roots by refining the roots' rational isolating intervals.  Singular values at a point are the
one numerical part: mpmath at 300 digits, and a value within 1e-200 of the claimed bound is not
decided (unless the bound is 0, where sigma_k = 0 <=> rank < k is decided exactly).

truth(claim) returns "CERTIFIED" (the claim holds), "REFUTED" (it is false) or raises Undecided
when this reference cannot decide; the caller counts that as skipped, never as a guess.

The model (the mathematics, not the prover's code): on the mask's support write the scores of
row i as a*S_ij.  softmax is invariant under row shifts, so with F_ij = q*S_ij - min_j q*S_ij
(integers >= 0, q the lcm of the denominators) and g = gcd of all F_ij, put k = g/q and
w = e^{k a} > 0.  Then A(a)_ij = w^{F_ij/g} / D_i(w), D_i = sum_j w^{F_ij/g} > 0, and the rows of
attention / output / residual are the rows of the polynomial matrix M(w) = E, E V, diag(D) X + E V
divided by the positive D_i.  Ranks are ranks of M(w); an entry minus c has the sign of
M_ik - c D_i; a determinant minus c has the sign of det M - c prod D_i.  The reduction by g
makes a claim about (10^9 S0, range / 10^9) exactly as cheap as the original one.
"""
from fractions import Fraction
from functools import reduce
from itertools import combinations
from math import gcd
import re

import mpmath
from mpmath import iv
from mpmath.libmp import to_rational
import sympy
from sympy import Poly, QQ, Rational

W = sympy.Symbol("w")
ONE = Poly(1, W, domain=QQ)
ZERO = Poly(0, W, domain=QQ)
END_PRECISIONS = (1536, 8192)  # bits of the end enclosures; a root 1e-300 from an end needs ~1000


class Undecided(Exception):
    """This reference cannot decide the claim (counted as skipped)."""


class Unsupported(Exception):
    """The claim uses a feature this reference does not model."""


def frac(x):
    if isinstance(x, bool):
        raise Unsupported("boolean where a number is expected")
    if isinstance(x, int):
        return Fraction(x)
    if isinstance(x, float):
        return Fraction(repr(x))
    return Fraction(str(x).strip())


def qq(x):
    x = Fraction(x)
    return Rational(x.numerator, x.denominator)


def sgn(x):
    x = fr(x)
    return (x > 0) - (x < 0)


def fr(x):
    x = Rational(x)
    return Fraction(int(x.p), int(x.q))


# ---------------------------------------------------------------- the layer
class Layer:
    def __init__(self, objects):
        if "S" not in objects:
            raise Unsupported("only S (not Q/K) is modelled")
        self.S = [[frac(x) for x in row] for row in objects["S"]]
        self.n, self.m = len(self.S), len(self.S[0])
        mask = objects.get("mask", "none")
        if mask == "none":
            self.mask = [[1] * self.m for _ in range(self.n)]
        elif mask == "causal":
            self.mask = [[1 if j <= i else 0 for j in range(self.m)] for i in range(self.n)]
        else:
            self.mask = [[1 if (x is True or x == 1) else 0 for x in row] for row in mask]
        for row in self.mask:
            if not any(row):
                raise Unsupported("fully masked row")
        self.V = [[frac(x) for x in row] for row in objects["V"]] if "V" in objects else None
        self.X = [[frac(x) for x in row] for row in objects["X"]] if "X" in objects else None
        sup = [(i, j) for i in range(self.n) for j in range(self.m) if self.mask[i][j]]
        q = reduce(lambda a, b: a * b // gcd(a, b), (self.S[i][j].denominator for i, j in sup), 1)
        e = [[int(self.S[i][j] * q) if self.mask[i][j] else None for j in range(self.m)] for i in range(self.n)]
        F = []
        for i in range(self.n):
            mi = min(x for x in e[i] if x is not None)
            F.append([None if x is None else x - mi for x in e[i]])
        g = reduce(gcd, (x for row in F for x in row if x is not None), 0) or 1
        self.k = Fraction(g, q)  # w = e^{k a}
        self.E = [[Poly(W ** (x // g), W, domain=QQ) if x is not None else ZERO for x in row] for row in F]
        self.D = [reduce(lambda a, b: a + b, row) for row in self.E]

    def matrix(self, obj):
        """M(w) for the object, as a list of rows of Poly."""
        if obj == "attention":
            return [row[:] for row in self.E]
        if self.V is None:
            raise Unsupported("object needs V")
        EV = [[reduce(lambda a, b: a + b, (self.E[i][j] * qq(self.V[j][c]) for j in range(self.m)))
               for c in range(len(self.V[0]))] for i in range(self.n)]
        if obj == "output":
            return EV
        if obj == "residual":
            if self.X is None:
                raise Unsupported("residual needs X")
            return [[self.D[i] * qq(self.X[i][c]) + EV[i][c] for c in range(len(EV[0]))] for i in range(self.n)]
        raise Unsupported("object " + obj)

    def numeric(self, obj, a):
        """The object at the rational point a, in mpmath at the current precision."""
        A = mpmath.matrix(self.n, self.m)
        a = mpmath.mpf(a.numerator) / a.denominator
        for i in range(self.n):
            sup = [j for j in range(self.m) if self.mask[i][j]]
            mx = max(self.S[i][j] for j in sup)
            ex = {j: mpmath.exp(a * (mpmath.mpf(self.S[i][j].numerator) / self.S[i][j].denominator
                                     - mpmath.mpf(mx.numerator) / mx.denominator)) for j in sup}
            tot = sum(ex.values())
            for j in sup:
                A[i, j] = ex[j] / tot
        if obj == "attention":
            return A
        Vm = mpmath.matrix([[mpmath.mpf(x.numerator) / x.denominator for x in row] for row in self.V])
        O = A * Vm
        if obj == "residual":
            O = O + mpmath.matrix([[mpmath.mpf(x.numerator) / x.denominator for x in row] for row in self.X])
        return O


def all_minors(M):
    """{k: [(rows, cols, poly)]} for every k x k minor, by memoized Laplace expansion."""
    n, c = len(M), len(M[0])
    memo = {}

    def det(rows, cols):
        if not rows:
            return ONE
        key = (rows, cols)
        if key not in memo:
            tot = ZERO
            r0 = rows[0]
            for idx, cc in enumerate(cols):
                if M[r0][cc].is_zero:
                    continue
                sub = det(rows[1:], cols[:idx] + cols[idx + 1:])
                term = M[r0][cc] * sub
                tot = tot + term if idx % 2 == 0 else tot - term
            memo[key] = tot
        return memo[key]

    out = {}
    for k in range(1, min(n, c) + 1):
        out[k] = [(r, cc, det(r, cc)) for r in combinations(range(n), k) for cc in combinations(range(c), k)]
    return out


def rank_at_rational(M, w0):
    rows = [[p.eval(qq(w0)) for p in row] for row in M]
    return sympy.Matrix(rows).rank()


# ---------------------------------------------------------------- ranges and ends
RANGE_RE = re.compile(r"^\s*([\[(])\s*([^,]+?)\s*,\s*([^,]+?)\s*([\])])\s*$")


def parse_family(claim):
    """('point', a) or ('range', lo, lo_closed, hi, hi_closed) with None for infinities."""
    fam = claim.get("family")
    if fam is None:
        return ("point", Fraction(1))
    if "at" in fam:
        return ("point", frac(fam["at"]))
    m = RANGE_RE.match(fam["range"])
    lo_s, hi_s = m.group(2), m.group(3)
    lo = None if lo_s in ("-inf",) else frac(lo_s)
    hi = None if hi_s in ("inf", "+inf") else frac(hi_s)
    return ("range", lo, m.group(1) == "[", hi, m.group(4) == "]")


class End:
    """An end of the image e^{k I} in w: 0, infinity, the rational 1 (a = 0) or transcendental."""

    def __init__(self, a, k, closed, is_low):
        self.a, self.closed, self.is_low = a, closed, is_low
        if a is None:
            self.kind = "zero" if is_low else "inf"
        elif a == 0:
            self.kind = "one"
        else:
            self.kind = "trans"
            self.ka = k * a
        self.prec = None

    def enclose(self, prec):
        """Set (lo, hi), rationals with lo < e^{k a} < hi (mpmath iv, outward rounding)."""
        if self.kind != "trans":
            return
        iv.prec = prec
        x = iv.exp(iv.mpf(self.ka.numerator) / iv.mpf(self.ka.denominator))
        self.lo, self.hi = [Fraction(*to_rational(t)) for t in x._mpi_]
        self.prec = prec


def strip_w(f):
    """f without its factors w (the root w = 0 is never in an image: a = -inf)."""
    while f.degree() > 0 and f.eval(0) == 0:
        f = f.exquo(Poly(W, W, domain=QQ))
    return f


def root_intervals(f):
    """Positive real roots of the squarefree f: [[s, t]] rationals (s == t for a rational root)."""
    if f.degree() <= 0:
        return []
    out = []
    for (s, t), _ in f.intervals():
        s, t = fr(s), fr(t)
        if t <= 0:
            continue
        if s == t:
            if s > 0:
                out.append([s, t])
            continue
        # an isolating interval touching 0: shrink it off 0 (0 is a root iff f(0) == 0)
        while s <= 0:
            s2, t2 = f.refine_root(qq(s), qq(t), steps=1)
            s, t = fr(s2), fr(t2)
            if t <= 0:
                break
        if t > 0 and not (s == t and s <= 0):
            out.append([s, t])
    return out


def refine(f, iv_):
    s, t = iv_
    if s == t:
        return
    s2, t2 = f.refine_root(qq(s), qq(t), eps=qq((t - s) / 64))
    iv_[0], iv_[1] = fr(s2), fr(t2)


def compare(f, root, end):
    """-1 if root < end, 0 if equal, +1 if root > end; refining root (in place); None if undecided."""
    if end.kind == "zero":
        return 1
    if end.kind == "inf":
        return -1
    if end.kind == "one":
        for _ in range(4000):
            s, t = root
            if s == t:
                return (s > 1) - (s < 1)
            # sympy's isolating intervals (s < t) hold their root strictly inside; a rational
            # root on an end is reported as its own interval (r, r)
            if s == 1:
                return 1
            if t == 1:
                return -1
            if f.eval(1) == 0 and s < 1 < t:
                # 1 is the root this interval isolates: make the interval exact
                root[0] = root[1] = Fraction(1)
                return 0
            if t < 1:
                return -1
            if s > 1:
                return 1
            refine(f, root)
        return None
    for _ in range(4000):
        s, t = root
        if t < end.lo:
            return -1
        if s > end.hi:
            return 1
        if s == t or (t - s) < (end.hi - end.lo) / 16:
            return None  # the root sits inside the end's enclosure: more precision needed
        refine(f, root)
    return None


def image_roots(f, lo, hi):
    """The positive roots of squarefree f inside the image (lo, hi) with the ends' closedness:
    a list of isolating intervals, sorted.  f must have no root 0 (see strip_w)."""
    inside = []
    for root in root_intervals(f):
        c1 = compare(f, root, lo)
        c2 = compare(f, root, hi)
        if c1 is None or c2 is None:
            raise _NeedPrecision()
        ok_lo = c1 > 0 or (c1 == 0 and lo.closed)
        ok_hi = c2 < 0 or (c2 == 0 and hi.closed)
        if ok_lo and ok_hi:
            inside.append(root)
    inside.sort(key=lambda r: r[0])
    return inside


class _NeedPrecision(Exception):
    pass


def with_precision(fn, ends):
    for prec in END_PRECISIONS:
        for e in ends:
            e.enclose(prec)
        try:
            return fn()
        except _NeedPrecision:
            continue
    raise Undecided("a root cannot be separated from a range end at %d bits" % END_PRECISIONS[-1])


# ---------------------------------------------------------------- sign of a polynomial on the image
def signs_on_image(H, lo, hi):
    """The set of signs H takes on the image (w in (lo, hi) with closedness), exactly."""
    if H.is_zero:
        return {0}
    sq = strip_w(H.sqf_part()) if H.degree() > 0 else H
    roots = image_roots(sq, lo, hi) if sq.degree() > 0 else []
    signs = set()
    if roots:
        signs.add(0)
    # the open segments between consecutive roots inside the image, each with a rational sample
    if lo.kind == "zero":
        left = Fraction(0)
    elif lo.kind == "one":
        left = Fraction(1)
    else:
        left = lo.hi
    right = None if hi.kind == "inf" else (Fraction(1) if hi.kind == "one" else hi.lo)
    for _ in range(200):
        bounds = [left] + [x for r in roots for x in r] + [right]
        segments = []
        ok = True
        for i in range(len(bounds) // 2):
            a, b = bounds[2 * i], bounds[2 * i + 1]
            if b is None:
                segments.append(a + 1)
            elif a < b:
                segments.append((a + b) / 2)
            elif a == b == 1 and ((i == 0 and lo.kind == "one" and roots[0] == [1, 1]) or
                                  (i == len(bounds) // 2 - 1 and hi.kind == "one" and roots[-1] == [1, 1])):
                continue  # a root exactly at the end w = 1: no segment there
            else:
                ok = False
        if ok:
            break
        for r in roots:
            refine(sq, r)
    else:
        raise Undecided("roots not separated")
    for x in segments:
        v = sgn(H.eval(qq(x)))
        if v == 0:
            raise RuntimeError("sample point is a root: isolation bug")
        signs.add(v)
    # closed end at w = 1: its exact value
    for e in (lo, hi):
        if e.kind == "one" and e.closed:
            signs.add(sgn(H.eval(1)))
    return signs


def sign_at_point(H, a, k):
    """Sign of H(e^{k a}) for a rational a."""
    if H.is_zero:
        return 0
    if a == 0:
        return sgn(H.eval(1))
    # w0 is transcendental, so H(w0) != 0: enclose it and raise the precision until decided
    coeffs = [fr(c) for c in H.all_coeffs()]
    for prec in (256, 1024, 4096, 16384):
        iv.prec = prec
        ka = k * a
        w0 = iv.exp(iv.mpf(ka.numerator) / iv.mpf(ka.denominator))
        acc = iv.mpf(0)
        for c in coeffs:
            acc = acc * w0 + iv.mpf(c.numerator) / iv.mpf(c.denominator)
        lo, hi = [Fraction(*to_rational(t)) for t in acc._mpi_]
        if lo > 0:
            return 1
        if hi < 0:
            return -1
    raise Undecided("sign at the point not decided at 16384 bits")


# ---------------------------------------------------------------- the quantities
def rank_set(layer, obj, fam):
    """The set of ranks the object takes over the family."""
    if obj == "scores":
        r0 = sympy.Matrix([[qq(x) for x in row] for row in layer.S]).rank()
        if fam[0] == "point":
            return {0 if fam[1] == 0 else r0}
        _, lo, lc, hi, hc = fam
        has0 = (lo is None or lo < 0 or (lo == 0 and lc)) and (hi is None or hi > 0 or (hi == 0 and hc))
        nonzero = not (lo == 0 and hi == 0)
        return ({r0} if nonzero else set()) | ({0} if has0 else set())
    M = layer.matrix(obj)
    minors = all_minors(M)
    r = 0
    for k in sorted(minors):
        if any(not p.is_zero for _, _, p in minors[k]):
            r = k
    if fam[0] == "point":
        if fam[1] != 0:
            return {r}  # Hermite-Lindemann: w0 transcendental is a root of no nonzero minor
        return {rank_at_rational(M, Fraction(1))}
    if r == 0:
        return {0}
    g = reduce(lambda a, b: a.gcd(b), (p for _, _, p in minors[r] if not p.is_zero))
    ranks = {r}
    if g.degree() <= 0:
        return ranks
    _, lo_a, lc, hi_a, hc = fam
    lo, hi = End(lo_a, layer.k, lc, True), End(hi_a, layer.k, hc, False)
    for f, _ in g.factor_list()[1]:
        if f.degree() <= 0:
            continue
        f = strip_w(Poly(f, W, domain=QQ))
        if f.degree() <= 0:
            continue
        roots = with_precision(lambda: image_roots(f, lo, hi), (lo, hi))
        if not roots:
            continue
        kf = 0
        for k in range(r - 1, 0, -1):
            if any(not p.is_zero and not p.rem(f).is_zero for _, _, p in minors[k]):
                kf = k
                break
        ranks.add(kf)
    return ranks


def condition_polys(layer, q):
    """(P, R) with the quantity = P(w)/R(w), R > 0 on w > 0."""
    obj = q["object"]
    M = layer.matrix(obj)
    if q["kind"] == "determinant":
        if len(M) != len(M[0]):
            raise Unsupported("determinant of a non-square object")
        P = all_minors(M)[len(M)][0][2]
        R = reduce(lambda a, b: a * b, layer.D)
        return P, R
    i, c = q["row"], q["col"]
    return M[i][c], layer.D[i]


def value_truth(layer, claim, fam):
    q = claim["quantity"]
    P, R = condition_polys(layer, q)
    rel = claim["relation"]
    c = frac(claim["value"])
    if rel == "within":
        t = frac(claim["tolerance"])
        conds = [(c + t, "<="), (c - t, ">=")]
    else:
        conds = [(c, {"≤": "<=", "≥": ">="}.get(rel, rel))]
    ok = True
    for cv, sense in conds:
        H = P * qq(cv.denominator) - R * qq(cv.numerator)
        if fam[0] == "point":
            signs = {sign_at_point(H, fam[1], layer.k)}
        else:
            lo = End(fam[1], layer.k, fam[2], True)
            hi = End(fam[3], layer.k, fam[4], False)
            signs = with_precision(lambda: signs_on_image(H, lo, hi), (lo, hi))
        if sense == "<=":
            ok &= 1 not in signs
        elif sense == ">=":
            ok &= -1 not in signs
        else:
            ok &= signs == {0}
    return ok


def singular_truth(layer, claim, fam):
    if fam[0] != "point":
        raise Undecided("singular values over a range are not modelled")
    q = claim["quantity"]
    k = q["index"]
    a = fam[1]
    c = frac(claim["value"])
    rel = claim["relation"]
    if rel == "within":
        t = frac(claim["tolerance"])
        conds = [(c + t, "<="), (c - t, ">=")]
    else:
        conds = [(c, rel)]
    with mpmath.workdps(300):
        O = layer.numeric(q["object"], a)
        sv = sorted((abs(x) for x in mpmath.svd_r(O, compute_uv=False)), reverse=True)
        if k < 1 or k > len(sv):
            raise Unsupported("singular value index out of range")
        s = sv[k - 1]
        ok = True
        for cv, sense in conds:
            if cv <= 0 and sense in (">=",):
                continue  # sigma >= 0 >= cv
            if cv < 0:
                ok = False  # sigma <= cv < 0 or sigma = cv < 0: false
                continue
            if cv == 0:
                # sigma_k = 0 <=> rank < k, exactly
                r = max(rank_set(layer, q["object"], fam))
                zero = r < k
                ok &= zero if sense in ("<=", "=") else True
                continue
            diff = s - mpmath.mpf(cv.numerator) / cv.denominator
            if abs(diff) < mpmath.mpf(10) ** -200:
                raise Undecided("singular value within 1e-200 of the bound")
            if sense == "<=":
                ok &= diff < 0
            elif sense == ">=":
                ok &= diff > 0
            else:
                ok = False
        return ok


def truth(claim):
    """'CERTIFIED' if the claim holds, 'REFUTED' if not; raises Undecided / Unsupported."""
    layer = Layer(claim["objects"])
    fam = parse_family(claim)
    q = claim["quantity"]
    kind = q["kind"]
    if kind == "rank":
        ranks = rank_set(layer, q["object"], fam)
        v = int(claim["value"])
        rel = {"≤": "<=", "≥": ">="}.get(claim["relation"], claim["relation"])
        test = {"=": lambda x: x == v, "<=": lambda x: x <= v, ">=": lambda x: x >= v}[rel]
        ok = all(test(x) for x in ranks)
    elif kind in ("determinant", "output_value"):
        ok = value_truth(layer, claim, fam)
    elif kind == "singular_value":
        ok = singular_truth(layer, claim, fam)
    else:
        raise Unsupported("quantity " + kind)
    return "CERTIFIED" if ok else "REFUTED"


# ---------------------------------------------------------------- a numerical cross-check of this oracle
def numeric_counterexample(claim, points=24):
    """A point a where the claim is violated by a margin > 1e-30 at 60 digits, or None.

    Approximate (mpmath at 60 digits on a grid): used only to test this oracle, never to decide.
    A CERTIFIED truth with such a point is a bug here."""
    fam = parse_family(claim)
    q = claim["quantity"]
    if q["kind"] not in ("rank", "determinant", "output_value"):
        return None
    layer = Layer(claim["objects"])
    if fam[0] == "point":
        grid = [fam[1]]
    else:
        _, lo, lc, hi, hc = fam
        if lo is None and hi is None:
            lo, hi, lc, hc = Fraction(-40), Fraction(40), True, True
        elif lo is None:
            lo, lc = hi - 40 - abs(hi), True
        elif hi is None:
            hi, hc = lo + 40 + abs(lo), True
        grid = [lo + (hi - lo) * Fraction(k, points) for k in range(points + 1)]
        # ends only when closed and simple (an end 1e-300 from a drop is beyond 60 digits)
        grid = [a for a in grid if (a != lo or (lc and lo.denominator < 10 ** 6)) and
                (a != hi or (hc and hi.denominator < 10 ** 6))]
    spread = max([max(layer.S[i][j] for j in range(layer.m) if layer.mask[i][j]) -
                  min(layer.S[i][j] for j in range(layer.m) if layer.mask[i][j]) for i in range(layer.n)])
    rel = {"≤": "<=", "≥": ">="}.get(claim["relation"], claim["relation"])
    with mpmath.workdps(60):
        tiny = mpmath.mpf(10) ** -30
        for a in grid:
            if q["kind"] == "rank":
                if q["object"] == "scores" or a == 0 or abs(a) * spread > 60:
                    continue  # exact elsewhere / tiny singular values beyond 60 digits
                O = layer.numeric(q["object"], a)
                sv = mpmath.svd_r(O, compute_uv=False) if min(O.rows, O.cols) else []
                big = [abs(x) for x in sv]
                top = max(big) if big else 0
                r = sum(1 for x in big if x > top * mpmath.mpf(10) ** -25)
                rlo = sum(1 for x in big if x > top * mpmath.mpf(10) ** -50)
                v = int(claim["value"])
                if r == rlo and (rel == "=" and r != v or rel == "<=" and r > v or rel == ">=" and r < v):
                    return a
                continue
            O = layer.numeric(q["object"], a)
            if q["kind"] == "determinant":
                x = _laplace([[O[i, j] for j in range(O.cols)] for i in range(O.rows)])
            else:
                x = O[q["row"], q["col"]]
            c = frac(claim["value"])
            c = mpmath.mpf(c.numerator) / c.denominator
            if rel == "within":
                t = frac(claim["tolerance"])
                if abs(x - c) > mpmath.mpf(t.numerator) / t.denominator + tiny:
                    return a
            elif rel == "<=" and x > c + tiny or rel == ">=" and x < c - tiny or \
                    rel == "=" and abs(x - c) > tiny:
                return a
    return None


def _laplace(M):
    if not M:
        return mpmath.mpf(1)
    return sum((-1) ** j * M[0][j] * _laplace([row[:j] + row[j + 1:] for row in M[1:]]) for j in range(len(M)))
