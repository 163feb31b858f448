"""Seeded generator of adversarial certify claims.

claim(seed, i) -> (category, claim dict) is a pure function of (seed, i), so a failure is
reproduced from the seed and the index alone, in any process.

Categories (each aims at a known weakness of root isolation in u = e^{a/q}):
  random        random small layers (1-4 queries, 1-4 keys, integer / half / third scores,
                none / causal / 0-1 mask, V, X), every quantity, ranges from a fixed list;
  factor_u      one or two queries with scores s*(0, 1, ..., m-1), so that an output entry is
                P(w)/D(w) with P any polynomial of degree < m (its coefficients are V): P with
                the factor w and roots in (0, 1) (negative a), over negative / mixed ranges;
  double_root   P with a double root (tangency, no sign change);
  rational_root P with a root at a rational w != 1 (w = 2, 3/5, 1/2, 3, ...), and entries equal
                to their bound exactly there (V shifted by the bound);
  attention     square attention determinants with irrational drops (u^2 + u - 1, u^2 - u - 1);
  near_end      a range end within 1e-300 / 1e-100 / 1e-30 of a drop a* = log(rho)/s, on either
                side, open or closed;
  scaled        any of the above with S multiplied by 10^4 or 10^9 and the range divided by it
                (the same rank function, huge exponents);
  singular      singular values at a point.
"""
from fractions import Fraction
import random

import mpmath

from truth import Layer

RANGES = ["(-1, 0)", "[-3, 2)", "(-inf, -200)", "(0, inf)", "(-inf, inf)", "(-inf, 0]", "[0, 1]",
          "(-2, -1/2]", "[1/3, 5)", "(-1, 1)", "(-inf, 0)", "[-1, 0]", "(0, 1)", "[-5, -1]",
          "(1, inf)", "(-inf, -1)"]
POINTS = ["0", "1/2", "-3", "2", "-1/3", "1"]
ROOTS = [  # (description, polynomial coefficients low -> high with a positive root, the root)
    ("2", [-2, 1]), ("3/5", [-3, 5]), ("1/2", [-1, 2]), ("3", [-3, 1]), ("1/3", [-1, 3]),
    ("5/4", [-5, 4]), ("4/5", [-4, 5]), ("1/phi", [-1, 1, 1]), ("phi", [-1, -1, 1]),
    ("sqrt2", [-2, 0, 1]), ("1/sqrt2", [-1, 0, 2]), ("2 and 1/2", [2, -5, 2]),
]
ROOT_VALUES = {"2": lambda: mpmath.mpf(2), "3/5": lambda: mpmath.mpf(3) / 5, "1/2": lambda: mpmath.mpf(1) / 2,
               "3": lambda: mpmath.mpf(3), "1/3": lambda: mpmath.mpf(1) / 3, "5/4": lambda: mpmath.mpf(5) / 4,
               "4/5": lambda: mpmath.mpf(4) / 5, "1/phi": lambda: (mpmath.sqrt(5) - 1) / 2,
               "phi": lambda: (mpmath.sqrt(5) + 1) / 2, "sqrt2": lambda: mpmath.sqrt(2),
               "1/sqrt2": lambda: 1 / mpmath.sqrt(2), "2 and 1/2": lambda: mpmath.mpf(1) / 2}
SCALES = [Fraction(1), Fraction(1), Fraction(1), Fraction(1, 2), Fraction(2), Fraction(-1), Fraction(1, 3)]


def num(x):
    x = Fraction(x)
    return x.numerator if x.denominator == 1 else "%d/%d" % (x.numerator, x.denominator)


def mul(p, q):
    out = [0] * (len(p) + len(q) - 1)
    for i, a in enumerate(p):
        for j, b in enumerate(q):
            out[i + j] += a * b
    return out


def rank_claim(rng, objects, obj, family):
    rel = rng.choice(["=", "=", "<=", ">="])
    return {"objects": objects, "family": family, "quantity": {"kind": "rank", "object": obj},
            "relation": rel, "value": None}


def pick_family(rng, points=True):
    x = rng.random()
    if points and x < 0.15:
        return {"at": rng.choice(POINTS)}
    if points and x < 0.2:
        return None
    return {"range": rng.choice(RANGES)}


def sample_point(rng, family):
    """A rational a inside the family (for choosing interesting values)."""
    if family is None:
        return Fraction(1)
    if "at" in family:
        return Fraction(family["at"])
    lo, hi = [s.strip() for s in family["range"][1:-1].split(",")]
    lo = None if lo == "-inf" else Fraction(lo)
    hi = None if hi == "inf" else Fraction(hi)
    if lo is None and hi is None:
        return Fraction(rng.randint(-30, 30), 10)
    if lo is None:
        return hi - Fraction(rng.randint(1, 30), 10)
    if hi is None:
        return lo + Fraction(rng.randint(1, 30), 10)
    return lo + (hi - lo) * Fraction(rng.randint(1, 99), 100)


def laplace_det(M):
    if not M:
        return mpmath.mpf(1)
    return sum((-1) ** j * M[0][j] * laplace_det([row[:j] + row[j + 1:] for row in M[1:]])
               for j in range(len(M)))


def fill_value(rng, claim):
    """Choose the claim's value near the quantity's value at a point of the family, so that the
    claims are neither all true nor all false."""
    q = claim["quantity"]
    if q["kind"] == "rank":
        n = len(claim["objects"]["S"])
        claim["value"] = rng.randint(0, n)
        return claim
    layer = Layer(claim["objects"])
    a = sample_point(rng, claim.get("family"))
    with mpmath.workdps(30):
        O = layer.numeric(q["object"] if q["object"] != "scores" else "attention", a)
        if q["kind"] == "determinant":
            v = laplace_det([[O[i, j] for j in range(O.cols)] for i in range(O.rows)])
        elif q["kind"] == "output_value":
            v = O[q["row"], q["col"]]
        else:
            sv = sorted((abs(x) for x in mpmath.svd_r(O, compute_uv=False)), reverse=True)
            v = sv[q["index"] - 1]
        v = Fraction(str(mpmath.nstr(v, 12)))
    x = rng.random()
    if x < 0.25:
        c = Fraction(0)
    elif x < 0.6:
        c = v.limit_denominator(rng.choice([4, 20, 1000]))
    else:
        c = v.limit_denominator(10 ** 9)
    if q["kind"] == "singular_value" and c < 0:
        c = -c
    claim["value"] = num(c)
    if claim["relation"] == "within":
        claim["tolerance"] = rng.choice(["1/10", "1e-3", "1e-6", "1/2"])
    return claim


def random_matrix(rng, r, c, lo=-2, hi=2, dens=(1, 1, 1, 2)):
    return [[num(Fraction(rng.randint(lo, hi), rng.choice(dens))) for _ in range(c)] for _ in range(r)]


def gen_random(rng):
    n, m = rng.randint(1, 4), rng.randint(1, 4)
    den = rng.choice([1, 1, 1, 2, 3])
    S = [[num(Fraction(rng.randint(-3, 3), den)) for _ in range(m)] for _ in range(n)]
    objects = {"S": S}
    x = rng.random()
    if x < 0.2 and n == m:
        objects["mask"] = "causal"
    elif x < 0.35:
        mask = [[rng.randint(0, 1) for _ in range(m)] for _ in range(n)]
        for row in mask:
            if not any(row):
                row[rng.randrange(m)] = 1
        objects["mask"] = mask
    dv = rng.randint(1, 4)
    objects["V"] = random_matrix(rng, m, dv)
    if rng.random() < 0.5:
        objects["X"] = random_matrix(rng, n, dv)
    objs = ["attention", "output"] + (["residual"] if "X" in objects else [])
    family = pick_family(rng)
    kind = rng.choice(["rank", "rank", "rank", "determinant", "output_value", "output_value"])
    obj = rng.choice(objs + (["scores"] if kind == "rank" else []))
    cols = m if obj == "attention" else dv
    if kind == "determinant" and n != cols:
        square = [o for o in objs if n == (m if o == "attention" else dv)]
        if not square:
            kind = "rank"
        else:
            obj = rng.choice(square)
    claim = {"objects": objects}
    if family is not None:
        claim["family"] = family
    if kind == "rank":
        claim.update({"quantity": {"kind": "rank", "object": obj},
                      "relation": rng.choice(["=", "=", "<=", ">="])})
    elif kind == "determinant":
        claim.update({"quantity": {"kind": "determinant", "object": obj},
                      "relation": rng.choice(["=", "<=", ">=", "within"])})
    else:
        cols = m if obj == "attention" else dv
        claim.update({"quantity": {"kind": "output_value", "object": obj, "row": rng.randrange(n),
                                   "col": rng.randrange(cols)},
                      "relation": rng.choice(["=", "<=", ">=", "within"])})
    return fill_value(rng, claim)


def engineered_poly(rng, kind, maxdeg):
    """Coefficients (low -> high) of a polynomial of degree <= maxdeg with the engineered feature."""
    for _ in range(100):
        if kind == "factor_u":
            p = [0, 1]
            root = rng.choice([r for r in ROOTS if len(r[1]) <= maxdeg])
            p = mul(p, root[1])
        elif kind == "double_root":
            root = rng.choice([r for r in ROOTS if len(r[1]) == 2])
            p = mul(root[1], root[1])
        else:
            root = rng.choice([r for r in ROOTS if len(r[1]) == 2])
            p = root[1]
        while len(p) - 1 < maxdeg and rng.random() < 0.4:
            p = mul(p, rng.choice([[0, 1], [1, 1], [1, 0, 1], [2, -1] if kind != "double_root" else [1, 1]]))
        if len(p) - 1 <= maxdeg:
            return [Fraction(x) * rng.choice([1, 1, -1, 2, Fraction(1, 2)]) for x in p], root
    return [Fraction(x) for x in root[1]], root


def gen_poly(rng, kind):
    """One or two queries whose output entries are engineered polynomials over D(w)."""
    m = rng.randint(2 if kind == "rational_root" else 3, 4)
    nq = rng.choice([1, 1, 2])
    s = rng.choice(SCALES)
    shift = rng.randint(-2, 2)
    perm = list(range(m))
    rng.shuffle(perm)
    S, cols = [], []
    for i in range(nq):
        S.append([num(s * (perm[j] + shift)) for j in range(m)])
    # column polys: entries of query i = sum_j w^{perm[j]} V_jc (w = e^{a s}, s > 0)
    dv = rng.choice([1, 1, 2]) if nq == 1 else rng.choice([1, 2])
    bound = Fraction(0)
    roots = []
    if kind == "rational_root" and rng.random() < 0.5:
        bound = Fraction(rng.choice([1, -1, 1, 3])) / rng.choice([1, 2, 5])
    for c in range(dv):
        p, root = engineered_poly(rng, kind, m - 1)
        roots.append(root)
        p = p + [Fraction(0)] * (m - len(p))
        cols.append([p[perm[j]] + (bound if c == 0 else 0) for j in range(m)])
    V = [[num(cols[c][j]) for c in range(dv)] for j in range(m)]
    objects = {"S": S, "V": V}
    root_a = None
    if nq == 1:
        rho = ROOT_VALUES[roots[0][0]]()
        root_a = mpmath.log(rho) / mpmath.mpf(s.numerator) * s.denominator
    family = pick_family(rng)
    if root_a is not None and rng.random() < 0.5:
        # a range around the engineered root
        a0 = Fraction(str(mpmath.nstr(root_a, 8)))
        lo, hi = a0 - Fraction(rng.randint(1, 20), 10), a0 + Fraction(rng.randint(1, 20), 10)
        family = {"range": "%s%s, %s%s" % (rng.choice("(["), num(lo), num(hi), rng.choice(")]"))}
    claim = {"objects": objects}
    if family is not None:
        claim["family"] = family
    x = rng.random()
    if x < 0.55:
        rel = rng.choice([">=", "<=", "=", "within"])
        claim.update({"quantity": {"kind": "output_value", "object": "output", "row": 0, "col": 0},
                      "relation": rel, "value": num(bound)})
        if rel == "within":
            claim["tolerance"] = rng.choice(["1/10", "1e-3", "1"])
        elif rng.random() < 0.3:
            claim = fill_value(rng, claim)
    elif x < 0.85 or nq != dv:
        full = min(nq, dv)
        rel, v = rng.choice([("=", full), (">=", full), ("<=", full - 1), (">=", 1), ("=", full - 1)])
        claim.update({"quantity": {"kind": "rank", "object": "output"}, "relation": rel, "value": v})
    else:
        rel = rng.choice([">=", "<=", "=", "within"])
        claim.update({"quantity": {"kind": "determinant", "object": "output"}, "relation": rel, "value": 0})
        if rel == "within":
            claim["tolerance"] = rng.choice(["1/10", "1e-3"])
    return claim


# square attention layers with known irrational drops
ATTENTION_DROPS = [
    # S, the drop w (w = e^{a}), description
    ([[0, 2, -2], [1, 2, 1], [1, 0, 2]], "phi"),                          # proofs/P09
    ([[0, -2, 2], [-1, -2, -1], [-1, 0, -2]], "1/phi"),                   # -S of P09: factor w^2 + w - 1
    ([[-2, 1, 0, -1], [2, -2, -2, 0], [2, 0, 1, 0], [0, 0, 0, 0]], "1/phi"),  # det ~ (w^2 + w - 1)(w - 1)^3 ...
]


def gen_attention(rng):
    S0, root = rng.choice(ATTENTION_DROPS)
    n = len(S0)
    pr, pc = list(range(n)), list(range(n))
    rng.shuffle(pr)
    rng.shuffle(pc)
    s = rng.choice([Fraction(1), Fraction(1, 2), Fraction(2)])
    S = [[num(s * S0[pr[i]][pc[j]]) for j in range(n)] for i in range(n)]
    a_star = mpmath.log(ROOT_VALUES[root]()) / (mpmath.mpf(s.numerator) / s.denominator)
    a0 = Fraction(str(mpmath.nstr(a_star, 6)))
    family = rng.choice([{"range": rng.choice(RANGES)},
                         {"range": "(%s, %s)" % (num(a0 - Fraction(1, 2)), num(a0 + Fraction(1, 3)))},
                         {"range": "[%s, inf)" % num(a0 + Fraction(1, 100))},
                         {"range": "(-inf, %s]" % num(a0 - Fraction(1, 100))}])
    claim = {"objects": {"S": S}, "family": family}
    if rng.random() < 0.6:
        rel, v = rng.choice([("=", n), (">=", n), (">=", n - 1), ("<=", n - 1), ("=", n - 1)])
        claim.update({"quantity": {"kind": "rank", "object": "attention"}, "relation": rel, "value": v})
    else:
        claim.update({"quantity": {"kind": "determinant", "object": "attention"},
                      "relation": rng.choice([">=", "<="]), "value": 0})
    return claim


def decimal_near(a_star, delta_exp, side):
    """A decimal string d with d - a_star ~ side * 10^-delta_exp (sign certain)."""
    with mpmath.workdps(delta_exp + 60):
        digits = delta_exp + 20
        d = mpmath.nstr(a_star + side * mpmath.mpf(10) ** -delta_exp, digits + 5, strip_zeros=False)
    return d


def gen_near_end(rng):
    delta = rng.choice([300, 300, 100, 30])
    side = rng.choice([-1, 1])
    if rng.random() < 0.35:
        S0, root = rng.choice(ATTENTION_DROPS)
        n = len(S0)
        s = rng.choice([Fraction(1), Fraction(1, 2), Fraction(2)])
        claim = {"objects": {"S": [[num(s * x) for x in row] for row in S0]}}
        if rng.random() < 0.6:
            rel, v = rng.choice([("=", n), (">=", n), (">=", n - 1), ("<=", n - 1)])
            claim.update({"quantity": {"kind": "rank", "object": "attention"}, "relation": rel, "value": v})
        else:
            claim.update({"quantity": {"kind": "determinant", "object": "attention"},
                          "relation": rng.choice([">=", "<="]), "value": 0})
        with mpmath.workdps(delta + 80):
            a_star = mpmath.log(ROOT_VALUES[root]()) / (mpmath.mpf(s.numerator) / s.denominator)
            end = decimal_near(a_star, delta, side)
    else:
        for _ in range(50):
            claim = gen_poly(rng, rng.choice(["factor_u", "double_root", "rational_root"]))
            if len(claim["objects"]["S"]) == 1:
                break
        end = near_root_end(rng, claim, delta, side)
        if end is None:
            return gen_random(rng)
    if rng.random() < 0.5:
        other = rng.choice(["inf", "5"])
        if other != "inf" and Fraction(other) <= Fraction(end):
            other = "inf"
        claim["family"] = {"range": "%s%s, %s)" % (rng.choice("(["), end, other)}
    else:
        other = rng.choice(["-inf", "-5"])
        if other != "-inf" and Fraction(other) >= Fraction(end):
            other = "-inf"
        claim["family"] = {"range": "(%s, %s%s" % (other, end, rng.choice(")]"))}
    return claim


def near_root_end(rng, claim, delta, side):
    """For a one-query claim: a decimal near a* = log(w*)/k for a positive root w* of the output
    entry (0, 0) minus the claim's value (or of the entry itself)."""
    from truth import Layer as L, strip_w, qq
    layer = L(claim["objects"])
    M = layer.matrix("output")
    polys = [M[0][0]]
    if claim["quantity"]["kind"] == "output_value":
        polys.append(M[0][0] - layer.D[0] * qq(Fraction(str(claim["value"]))))
    roots = []
    for p in polys:
        if p.is_zero:
            continue
        p = strip_w(p)
        if p.degree() > 0:
            roots += [r for r in p.sqf_part().real_roots() if r > 0]
    if not roots:
        return None
    r = rng.choice(roots)
    with mpmath.workdps(delta + 80):
        w = mpmath.mpf(str(r.evalf(delta + 70)))
        a_star = mpmath.log(w) / (mpmath.mpf(layer.k.numerator) / layer.k.denominator)
        return decimal_near(a_star, delta, side)


def gen_singular(rng):
    n, m = rng.randint(1, 3), rng.randint(1, 3)
    S = random_matrix(rng, n, m, -2, 2, (1, 1, 2))
    objects = {"S": S}
    obj = rng.choice(["attention", "attention", "output"])
    cols = m
    if obj == "output":
        dv = rng.randint(1, 3)
        objects["V"] = random_matrix(rng, m, dv)
        cols = dv
    k = rng.randint(1, min(n, cols))
    claim = {"objects": objects, "family": {"at": rng.choice(POINTS + ["1/3", "-2"])},
             "quantity": {"kind": "singular_value", "object": obj, "index": k},
             "relation": rng.choice([">=", "<=", "within", "within", "="])}
    return fill_value(rng, claim)


def scale_claim(rng, claim):
    """S -> 10^e S, family -> family / 10^e: the same function of the rescaled a."""
    e = rng.choice([4, 4, 9])
    f = Fraction(10) ** e
    objects = dict(claim["objects"])
    objects["S"] = [[num(Fraction(str(x)) * f) for x in row] for row in objects["S"]]
    claim = dict(claim)
    claim["objects"] = objects
    fam = claim.get("family")
    if fam is None:
        claim["family"] = {"at": num(1 / f)}
    elif "at" in fam:
        claim["family"] = {"at": num(Fraction(fam["at"]) / f)}
    else:
        r = fam["range"]
        lo, hi = [x.strip() for x in r[1:-1].split(",")]
        sc = lambda x: x if "inf" in x else num(Fraction(x) / f)
        claim["family"] = {"range": "%s%s, %s%s" % (r[0], sc(lo), sc(hi), r[-1])}
    return claim


CATEGORIES = [("random", 30), ("factor_u", 14), ("double_root", 10), ("rational_root", 12),
              ("attention", 8), ("near_end", 10), ("scaled", 10), ("singular", 6)]


def claim(seed, i):
    """(category, claim) for index i of the campaign with this seed."""
    rng = random.Random("%d:%d" % (seed, i))
    total = sum(w for _, w in CATEGORIES)
    x = rng.randrange(total)
    for cat, w in CATEGORIES:
        if x < w:
            break
        x -= w
    if cat == "random":
        c = gen_random(rng)
    elif cat in ("factor_u", "double_root", "rational_root"):
        c = gen_poly(rng, cat)
    elif cat == "attention":
        c = gen_attention(rng)
    elif cat == "near_end":
        c = gen_near_end(rng)
    elif cat == "scaled":
        base = rng.choice(["random", "factor_u", "rational_root", "attention"])
        c = gen_random(rng) if base == "random" else (gen_attention(rng) if base == "attention"
                                                      else gen_poly(rng, base))
        c = scale_claim(rng, c)
    else:
        c = gen_singular(rng)
    return cat, c
