"""attncert check rank-heads-tradeoff, proofs/L4 parts D and E (the rows for low-rank and hardmax heads),
each number recomputed here without the C++ code:

* the harmonic energies E_l of sign(t) exactly, as rationals (times pi^-2 for even d): P_l expanded in
  Fraction coefficients by the Gegenbauer three-term recurrence, each monomial integrated against
  c_d (1 - t^2)^((d-3)/2) by the Beta function; spot-checked against mpmath's Gegenbauer quadrature and,
  for d = 3, against the Legendre identity int_0^1 P_l = (P_{l-1}(0) - P_{l+1}(0)) / (2l + 1);
* M_d = (4/pi^2) E[arcsin(t)^2] by mpmath's quadrature at 40 digits (never from the series above);
* LB(d, H, r) exactly from those energies, compared with the check's interval (and with its exact text
  wherever the check prints it in full rather than "(exact: ..., n characters)");
* the full-rank head's MSE at lambda = 100 by mpmath's quadrature;
* the relaxed hardmax error 1/2 (1 - tr(K^-1 B)) of the printed directions in mpmath at 30 digits, B by
  the Gegenbauer series to a degree where its tail (M_d minus the partial sum) is below 1e-12, bounded;
* two seeded NumPy Monte Carlo witnesses: the relaxed error itself, and a real hardmax layer with
  least-squares values, whose MSE must not fall below the relaxed error (it is a lower bound).
"""
import glob
import json
import os
import re
import subprocess
from fractions import Fraction
from functools import lru_cache
from math import comb, factorial

import numpy as np
import pytest


mpmath = pytest.importorskip("mpmath")
mp = mpmath.mp

DIMS = tuple(range(3, 9))
CHECK_DEGREE = 81  # the check's LB sums the odd degrees <= 81 (plus, for r = 1, the tail at degree 83)
# degree of the B series per d, so that its tail M_d - sum_{l <= L} E_l^2 / N(d, l) is below 1e-12
SERIES_DEGREE = {3: 601, 4: 401, 5: 161, 6: 121, 7: 121, 8: 121}
INTERVAL = re.compile(r"\[\s*([-+0-9.eE]+)\s*,\s*([-+0-9.eE]+)\s*\]")
TERM = re.compile(r"\s*([+-]?)\s*(\d+)(?:/(\d+))?(/pi\^2)?")


@pytest.fixture(scope="module")
def claims(rank_heads_claims):
    return rank_heads_claims


def rows(claims, name, count):
    got = [c for c in claims if c["claim"] == name]
    assert len(got) == count, (name, len(got))
    assert all(c["verdict"] == "pass" for c in got), name
    return got


def intervals(text):
    return [(mp.mpf(lo), mp.mpf(hi)) for lo, hi in INTERVAL.findall(text)]


def dim(c):
    return int(re.match(r"d=(\d+), ", c["instance"]).group(1))


def instance(c):
    """(d, H, r) of an instance "d=<d>, N=2, H=<H>, r=<r>, ..."."""
    d, H, r = re.match(r"d=(\d+), N=2, H=(\d+), r=(\d+), layers=1, ", c["instance"]).groups()
    return int(d), int(H), int(r)


def exact(text):
    """An exact value printed as a sum of terms p, p/q, p/pi^2, p/q/pi^2: (rational part, coefficient of pi^-2)."""
    text, rat, pi2, pos = text.strip(), Fraction(0), Fraction(0), 0
    while pos < len(text):
        m = TERM.match(text, pos)
        assert m and m.end() > pos and (pos == 0 or m.group(1)), text
        q = Fraction(int(m.group(2)), int(m.group(3) or 1)) * (-1 if m.group(1) == "-" else 1)
        if m.group(4):
            pi2 += q
        else:
            rat += q
        pos = m.end()
    return rat, pi2


def exact_of(c):
    """The exact value after "[lo, hi] = ", or None where the check abbreviates it ("(exact: ..., n characters)")."""
    m = re.fullmatch(r"\[[^\]]*\](?: = (.+)| \(exact: [^)]*\))", c["computed"])
    assert m, c["computed"]
    return None if m.group(1) is None else exact(m.group(1))


def value(pair):
    rat, pi2 = pair
    return mp.mpf(rat.numerator) / rat.denominator + mp.mpf(pi2.numerator) / pi2.denominator / mpmath.pi ** 2


def fraction(q):
    return mp.mpf(q.numerator) / q.denominator


# ---------------------------------------------------------------------------------------------------------------
# independent mathematics

def N(d, l):
    return comb(l + d - 1, l) - (comb(l + d - 3, l - 2) if l >= 2 else 0)


def c_d(d):
    return mpmath.gamma(mp.mpf(d) / 2) / (mpmath.sqrt(mpmath.pi) * mpmath.gamma(mp.mpf(d - 1) / 2))


@lru_cache(maxsize=None)
def energies(d):
    """Odd l <= SERIES_DEGREE[d] -> Fraction e_l with E_l = e_l (odd d) or e_l / pi^2 (even d).

    a_l = 2 c_d int_0^1 P_l(t) (1 - t^2)^((d-3)/2) dt with P_l in exact coefficients; for odd k = 2m + 1,
    c_d int_0^1 t^k (1 - t^2)^((d-3)/2) dt = c_d B(m + 1, (d-1)/2) / 2 = kappa_d m! / (2 prod_{j<m} ((d+1)/2 + j))
    with kappa_d = Gamma(d/2) / (sqrt(pi) Gamma((d+1)/2)): 1/2 at d = 3, 2/pi at d = 2, times d/(d+1) per step 2."""
    L = SERIES_DEGREE[d]
    kappa, k = (Fraction(1, 2), 3) if d % 2 else (Fraction(2), 2)  # the factor 1/pi of even d left out
    while k < d:
        kappa, k = kappa * Fraction(k, k + 1), k + 2
    moment, prod = {}, Fraction(1)
    for m in range((L + 1) // 2):
        moment[2 * m + 1] = factorial(m) / prod
        prod *= Fraction(d + 1 + 2 * m, 2)
    out, prev, cur = {}, {0: Fraction(1)}, {1: Fraction(1)}  # P_0, P_1 as {power: coefficient}
    for l in range(1, L + 1):
        if l % 2:
            a = kappa * sum(c * moment[k] for k, c in cur.items())
            out[l] = N(d, l) * a * a
        # (l + d - 2) P_{l+1} = (2l + d - 2) t P_l - l P_{l-1}
        nxt = {k + 1: Fraction(2 * l + d - 2, l + d - 2) * c for k, c in cur.items()}
        for k, c in prev.items():
            nxt[k] = nxt.get(k, 0) - Fraction(l, l + d - 2) * c
        prev, cur = cur, nxt
    return out


def as_pair(rational, energy_part, d):
    """rational + energy_part * (the unit of E_l: 1 or pi^-2) as (rational, coefficient of pi^-2)."""
    return (rational + energy_part, Fraction(0)) if d % 2 else (rational, energy_part)


def lower_bound(d, H, r):
    """LB(d, H, r) of proofs/L4 part D, exactly, as (rational, coefficient of pi^-2)."""
    E = {l: e for l, e in energies(d).items() if l <= CHECK_DEGREE}
    m = (lambda l: comb(l + r - 1, r - 1)) if r < d else (lambda l: N(d, l))  # noqa: E731
    main = sum(e * max(Fraction(0), 1 - Fraction(H * m(l), N(d, l))) for l, e in E.items()) / 2
    if r != 1:
        return as_pair(Fraction(0), main, d)
    w = max(Fraction(0), 1 - Fraction(H, N(d, CHECK_DEGREE + 2)))  # tail T = 1 - sum E_l, all at degree >= 83
    return as_pair(w / 2, main - w / 2 * sum(E.values()), d)


@lru_cache(maxsize=None)
def arcsin_moment(d):
    """M_d = (4/pi^2) E[arcsin(t)^2] by quadrature at 40 digits."""
    with mp.workdps(40):
        f = lambda t: mpmath.asin(t) ** 2 * (1 - t * t) ** (mp.mpf(d - 3) / 2)  # noqa: E731
        return 8 / mpmath.pi ** 2 * c_d(d) * mpmath.quad(f, [0, 1])


@lru_cache(maxsize=None)
def mse_full_rank(d, lam):
    with mp.workdps(40):
        a = mpmath.sqrt(2) * lam
        f = lambda t: (1 / (1 + mpmath.exp(a * t))) ** 2 * (1 - t * t) ** (mp.mpf(d - 3) / 2)  # noqa: E731
        points = sorted({mp.mpf(0), mp.mpf(1)} | {x / a for x in (1, 4, 16, 64) if x / a < 1})
        return 4 * c_d(d) * mpmath.quad(f, points)


@lru_cache(maxsize=None)
def series_weights(d):
    """E_l^2 / N(d, l) as mpf for odd l <= SERIES_DEGREE[d], and the series' tail M_d - their sum (>= 0)."""
    with mp.workdps(40):
        unit = 1 if d % 2 else 1 / mpmath.pi ** 4
        w = {l: fraction(e * e / N(d, l)) * unit for l, e in energies(d).items()}
        return w, arcsin_moment(d) - mpmath.fsum(w.values())


def gegenbauer_series(d, x, weights):
    """sum_l weights[l] P_l(x), P_l normalized at 1, by the three-term recurrence (stable for |x| <= 1)."""
    s, prev, cur = mp.zero, mp.one, x
    for l in range(1, max(weights) + 1):
        if l in weights:
            s += weights[l] * cur
        prev, cur = cur, ((2 * l + d - 2) * x * cur - l * prev) / (l + d - 2)
    return s


def relaxed_error(d, directions):
    """1/2 (1 - tr(K^-1 B)) at 30 digits and a bound on its error from the truncated B series."""
    with mp.workdps(30):
        A = [[mp.mpf(x) for x in row] for row in directions]
        A = [[x / mpmath.sqrt(mpmath.fsum(y * y for y in row)) for x in row] for row in A]
        H = len(A)
        weights, tail = series_weights(d)
        K, B = mp.eye(H), mp.eye(H) * arcsin_moment(d)
        for h in range(H):
            for g in range(h):
                x = mpmath.fsum(p * q for p, q in zip(A[h], A[g]))
                K[h, g] = K[g, h] = 2 / mpmath.pi * mpmath.asin(x)
                B[h, g] = B[g, h] = gegenbauer_series(d, x, weights)
        Kinv = mp.inverse(K)
        trace = mpmath.fsum(Kinv[h, g] * B[g, h] for h in range(H) for g in range(H))
        # |P_l| <= 1 on [-1, 1]: each off-diagonal B entry is within `tail` of the truth (the diagonal is M_d)
        err = tail * mpmath.fsum(abs(Kinv[h, g]) for h in range(H) for g in range(H) if h != g)
        return (1 - trace) / 2, err / 2


def sphere(rng, n, d):
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


# ---------------------------------------------------------------------------------------------------------------

def test_energies_by_recurrence_agree_with_quadrature_and_the_legendre_identity():
    with mp.workdps(40):
        for d, l in ((3, 9), (4, 7), (5, 15), (6, 11), (8, 21)):
            alpha = mp.mpf(d - 2) / 2
            at_one = mpmath.binomial(l + 2 * alpha - 1, l)
            P = lambda t: mpmath.gegenbauer(l, alpha, t) / at_one  # noqa: E731
            a = 2 * c_d(d) * mpmath.quad(lambda t: P(t) * (1 - t * t) ** (mp.mpf(d - 3) / 2), [0, 1])
            want = N(d, l) * a * a
            got = fraction(energies(d)[l]) / (1 if d % 2 else mpmath.pi ** 2)
            assert abs(got - want) <= mp.mpf(10) ** -30 * want, (d, l, got, want)
    # d = 3 (Legendre, c_3 = 1/2): a_l = (P_{l-1}(0) - P_{l+1}(0)) / (2l + 1), P_{n+1}(0) = -n/(n+1) P_{n-1}(0)
    p0 = {0: Fraction(1), 1: Fraction(0)}
    for n in range(1, SERIES_DEGREE[3] + 1):
        p0[n + 1] = -Fraction(n, n + 1) * p0[n - 1]
    for l, e in energies(3).items():
        assert e == (2 * l + 1) * ((p0[l - 1] - p0[l + 1]) / (2 * l + 1)) ** 2, l
    assert energies(3)[1] == Fraction(3, 4) and energies(3)[3] == Fraction(7, 64)
    assert energies(4)[1] == Fraction(64, 9)  # E_1 = 64 / (9 pi^2) on S^3
    with mp.workdps(40):
        for d in DIMS:
            unit = 1 if d % 2 else 1 / mpmath.pi ** 2
            partial = fraction(sum(e for l, e in energies(d).items() if l <= CHECK_DEGREE)) * unit
            assert 1 - mp.mpf("0.02") < partial < 1  # Parseval: sum_l E_l = E[sign^2] = 1
            weights, tail = series_weights(d)
            assert 0 <= tail < mp.mpf("1e-12"), (d, tail)  # the degree chosen for the B series


def test_arcsin_moment_is_the_quadrature_value(claims):
    mp.dps = 40
    got = rows(claims, "arcsin-moment", 6)
    assert sorted(dim(c) for c in got) == list(DIMS) and all(c["instance"] == "d=%d, N=2" % dim(c) for c in got)
    for c in got:
        d = dim(c)
        M = arcsin_moment(d)
        lo, hi = intervals(c["computed"])[0]
        slack = mp.mpf(10) ** -30 * M
        assert lo - slack <= M <= hi + slack, (d, lo, M, hi)
        assert exact_of(c) is not None and abs(value(exact_of(c)) - M) <= slack, (d, c["computed"])
        # the series' enclosure (degrees <= 81 and a bounded tail) contains the partial sum and M_d
        slo, shi = intervals(c["expected"])[0]
        weights, _ = series_weights(d)
        partial = mpmath.fsum(w for l, w in weights.items() if l <= CHECK_DEGREE)
        assert slo - slack <= partial <= M <= shi + slack, (d, slo, partial, M, shi)
        if d == 3:
            assert exact_of(c) == (1, -8)  # 1 - 8/pi^2
        if d == 4:
            assert exact_of(c) == (Fraction(1, 3), -2)  # 1/3 - 2/pi^2


def test_hardmax_one_head_and_orthonormal_heads(claims):
    mp.dps = 40
    moments = {dim(c): exact_of(c) for c in rows(claims, "arcsin-moment", 6)}
    one = rows(claims, "hardmax-one-head", 6)
    ortho = rows(claims, "hardmax-orthonormal-heads", 6)
    for c in one + ortho:
        d = dim(c)
        H = 1 if c["claim"] == "hardmax-one-head" else d
        assert c["instance"].startswith("d=%d, N=2, H=%s, r=1, layers=1, hardmax" % (d, "1" if H == 1 else "d"))
        want = (1 - H * arcsin_moment(d)) / 2
        slack = mp.mpf(10) ** -30
        lo, hi = intervals(c["computed"])[0]
        assert lo - slack <= want <= hi + slack, (c["instance"], lo, want, hi)
        rat, pi2 = moments[d]
        assert exact_of(c) == ((1 - H * rat) / 2, -H * pi2 / 2), c["computed"]  # the same closed form as M_d
        assert 0 < want < mp.mpf(1) / 2
        # ">= LB(d,H,1) = [..]": the printed LB holds ours, below the hardmax error
        llo, lhi = intervals(c["expected"])[0]
        lb = value(lower_bound(d, H, 1))
        assert llo - slack <= lb <= lhi + slack and lb < want, (c["instance"], lb)
        if H > 1:  # "inside the verified solve's enclosure [lo2, hi2]"
            assert c["expected"].rstrip().endswith("]")
            vlo, vhi = intervals(c["expected"])[-1]
            assert vlo - slack <= want <= vhi + slack, (c["instance"], vlo, want, vhi)
            # our relaxed error at orthonormal directions (K = I, B = M_d I) is the same number
            r, err = relaxed_error(d, [[1 if i == h else 0 for i in range(d)] for h in range(d)])
            assert abs(r - want) <= mp.mpf(10) ** -25 + err
    assert [exact_of(c) for c in one if dim(c) == 3] == [(0, 4)]  # d = 3: 4/pi^2


def test_rank_one_lower_bound_above_the_full_rank_mse(claims):
    mp.dps = 40
    got = rows(claims, "rank-one-lower-bound", 39)
    keys = sorted(instance(c) for c in got)
    assert keys == sorted((d, 2 ** k, 1) for d in DIMS for k in range(d + 1))
    for c in got:
        d, H, r = instance(c)
        assert c["instance"].endswith("layers=1, every such layer")
        lb = lower_bound(d, H, 1)
        assert exact_of(c) in (None, lb), (c["instance"], c["computed"][:80])  # when printed in full, equal
        v = value(lb)
        lo, hi = intervals(c["computed"])[0]
        slack = mp.mpf(10) ** -25 * v
        assert lo - slack <= v <= hi + slack, (c["instance"], lo, v, hi)
        flo, fhi = intervals(c["expected"].split("full-rank MSE(lambda=100) in ", 1)[1])[0]
        mse = mse_full_rank(d, 100)
        assert flo <= mse <= fhi, (d, flo, mse, fhi)
        assert v > fhi >= mse and v < mp.mpf(1) / 2, (c["instance"], v, fhi)
    # LB falls as heads are added
    for d in DIMS:
        values = [value(lower_bound(d, 2 ** k, 1)) for k in range(d + 1)]
        assert all(a > b for a, b in zip(values, values[1:])), d


def test_rank_r_lower_bound_falls_with_the_rank(claims):
    mp.dps = 40
    got = rows(claims, "rank-r-lower-bound", 11)
    ranks = {4: (1, 2, 4), 6: (1, 2, 3, 6), 8: (1, 2, 4, 8)}  # H = d / r heads: total rank d
    assert sorted(instance(c) for c in got) == sorted((d, d // r, r) for d in ranks for r in ranks[d])
    by_d = {}
    for c in got:
        d, H, r = instance(c)
        assert c["instance"].endswith("layers=1, every layer")
        lb = lower_bound(d, H, r)
        assert exact_of(c) in (None, lb), (c["instance"], c["computed"][:80])  # when printed in full, equal
        v = value(lb)
        lo, hi = intervals(c["computed"])[0]
        slack = mp.mpf(10) ** -25 * v
        assert lo - slack <= v <= hi + slack, (c["instance"], lo, v, hi)
        if r == d:
            assert lb == (0, 0) and c["computed"].startswith("[0.000000000000e+00, 0.000000000000e+00]")
        else:
            assert v > 0
        by_d.setdefault(d, []).append((r, v))
    for d, vs in by_d.items():
        vs = [v for _, v in sorted(vs)]
        assert all(a > b for a, b in zip(vs, vs[1:])), d
    # with r = 1 it is the rank-one bound of the same (d, H), tail term included
    ones = {instance(c): c["computed"] for c in rows(claims, "rank-one-lower-bound", 39)}
    shared = [c for c in got if instance(c) in ones]
    assert [instance(c) for c in shared] == [(4, 4, 1), (8, 8, 1)]
    assert all(intervals(c["computed"])[0] == intervals(ones[instance(c)])[0] for c in shared)


def optimized(claims):
    got = rows(claims, "hardmax-optimized-heads", 39)
    out = []
    for c in got:
        d, H, r = instance(c)
        assert re.search(r"layers=1, hardmax, seed \d+$", c["instance"]), c["instance"]
        A = json.loads(re.search(r"directions (\[\[.*\]\])", c["note"]).group(1))
        assert len(A) == H and all(len(a) == d for a in A), c["instance"]
        out.append((d, H, A, intervals(c["computed"])[0]))
    assert sorted((d, H) for d, H, _, _ in out) == sorted((d, 2 ** k) for d in DIMS for k in range(d + 1))
    return out


def test_optimized_heads_relaxed_error_recomputed_at_30_digits(claims):
    mp.dps = 30
    checked = 0
    for d, H, A, (lo, hi) in optimized(claims):
        assert 0 < lo <= hi < mp.mpf(1) / 2
        assert value(lower_bound(d, H, 1)) <= hi, (d, H)  # no directions beat the lower bound
        if H > 32:
            continue
        v, err = relaxed_error(d, A)
        assert err <= mp.mpf("1e-11"), (d, H, err)
        slack = mp.mpf("1e-10")
        assert lo - slack <= v - err and v + err <= hi + slack, (d, H, lo, v, hi, err)
        checked += 1
    assert checked == 33


@pytest.mark.parametrize("d, H, seed", [(4, 2, 41), (5, 4, 53)])
def test_optimized_heads_relaxed_error_by_monte_carlo(claims, d, H, seed):
    ((A, (lo, hi)),) = [(A, iv) for dd, HH, A, iv in optimized(claims) if (dd, HH) == (d, H)]
    A = np.array(A)
    A /= np.linalg.norm(A, axis=1, keepdims=True)
    K = 2 / np.pi * np.arcsin(np.clip(A @ A.T, -1, 1))
    np.fill_diagonal(K, 1)
    rng = np.random.default_rng(seed)
    n = 400_000
    e, y = sphere(rng, n, d), sphere(rng, n, d)
    W = np.linalg.solve(K, (2 / np.pi * np.arcsin(np.clip(e @ A.T, -1, 1))).T).T  # w(e) = K^-1 c(e)
    err = 0.5 * (np.sign(np.sum(e * y, axis=1)) - np.sum(W * np.sign(y @ A.T), axis=1)) ** 2
    mean, se = err.mean(), err.std(ddof=1) / np.sqrt(n)
    assert se < 1e-3
    assert float(lo) - 5 * se <= mean <= float(hi) + 5 * se, (d, H, mean, se, float(lo), float(hi))


def orthonormal_pair(rng, n, d):
    x1 = sphere(rng, n, d)
    x2 = rng.standard_normal((n, d))
    x2 -= np.sum(x2 * x1, axis=1, keepdims=True) * x1
    return x1, x2 / np.linalg.norm(x2, axis=1, keepdims=True)


def test_relaxed_error_is_below_a_real_hardmax_layer(claims):
    """d = 4, H = 2: query and key directions a_h, values v_h * I fitted by least squares; its MSE on a fresh
    sample is at least the relaxed error (the relaxation lets the weights depend on x1 - x2)."""
    ((A, (lo, hi)),) = [(A, iv) for d, H, A, iv in optimized(claims) if (d, H) == (4, 2)]
    A = np.array(A)
    A /= np.linalg.norm(A, axis=1, keepdims=True)
    rng = np.random.default_rng(20260407)

    def sample(n):
        x1, x2 = orthonormal_pair(rng, n, 4)
        y = sphere(rng, n, 4)
        target = np.where((np.sum(y * x1, axis=1) > np.sum(y * x2, axis=1))[:, None], x1, x2)
        # head h scores key x_i by (a_h . y)(a_h . x_i) and hardmax takes the larger
        pick = (y @ A.T) * ((x1 - x2) @ A.T) > 0  # (n, H): x1 selected
        selected = np.where(pick[:, :, None], x1[:, None, :], x2[:, None, :])  # (n, H, d)
        return target, selected

    target, selected = sample(200_000)
    design = selected.transpose(0, 2, 1).reshape(-1, A.shape[0])  # rows (sample, coordinate), columns heads
    v, *_ = np.linalg.lstsq(design, target.reshape(-1), rcond=None)
    target, selected = sample(200_000)
    err = np.sum((target - np.einsum("h,nhd->nd", v, selected)) ** 2, axis=1)
    mean, se = err.mean(), err.std(ddof=1) / np.sqrt(err.size)
    assert 0 < se < 2e-3 and mean < 0.5 - 5 * se  # a fitted layer: better than predicting (x1 + x2) / 2
    assert mean >= float(lo) - 5 * se, (mean, se, float(lo), v)


def test_heads_needed(claims):
    mp.dps = 40
    (c,) = rows(claims, "heads-needed", 1)
    found = {int(d): int(n) for d, n in re.findall(r"d=(\d+): (\d+)", c["computed"])}
    assert c["computed"].startswith("H >= ") and sorted(found) == list(DIMS)
    fhi = {}
    for r in rows(claims, "rank-one-lower-bound", 39):
        fhi[instance(r)[0]] = intervals(r["expected"].split("full-rank MSE(lambda=100) in ", 1)[1])[0][1]
    for d in (3, 4, 5):
        n = found[d]
        assert value(lower_bound(d, n - 1, 1)) > fhi[d], (d, n)
        assert value(lower_bound(d, n, 1)) <= fhi[d] * (1 + mp.mpf("1e-9")), (d, n)
    ns = [found[d] for d in DIMS]
    assert all(a < b for a, b in zip(ns, ns[1:])), ns


# ---------------------------------------------------------------------------------------------------------------
# `attncert certify` on the shipped rank_heads_lower_bound claims: the certificate's exact LB is this module's LB

CLI = os.environ.get("ATTNCERT_CLI")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def certify(claim, tmp_path, name="c"):
    path, out = tmp_path / (name + ".json"), tmp_path / (name + ".cert.json")
    path.write_text(json.dumps(claim))
    run = subprocess.run([CLI, "certify", str(path), "--certificate", str(out), "--format", "json"],
                         capture_output=True, text=True, timeout=120)
    return run.returncode, (json.loads(out.read_text()) if out.exists() else None)


@pytest.mark.skipif(not CLI, reason="ATTNCERT_CLI (the attncert binary) not set")
def test_certified_rank_heads_claims_carry_the_exact_bound(tmp_path):
    shipped = sorted(glob.glob(os.path.join(ROOT, "proofs", "claims", "L4-*.json")))
    claims = []
    for f in shipped:
        with open(f) as fh:
            claims.append((f, json.load(fh)))
    claims = [(f, c) for f, c in claims if c["quantity"]["kind"] == "rank_heads_lower_bound"]  # the vote claims: test_rank_heads_depth
    assert len(claims) >= 4
    for i, (f, claim) in enumerate(claims):
        q = claim["quantity"]
        d, H, r, residual = q["d"], int(q["heads"]), q.get("rank", 1), q.get("residual", False)
        rc, cert = certify(claim, tmp_path, "c%d" % i)
        assert rc == 0, f
        body = cert["rank_heads"]
        got = (Fraction(body["lower_bound"]["rational"]), Fraction(body["lower_bound"]["over_pi_squared"]))
        want = lower_bound(d, H, r)
        if residual:  # part F: degree 1 dropped
            e1 = energies(d)[1] * max(Fraction(0), 1 - Fraction(H, d)) / 2
            want = (want[0] - e1, want[1]) if d % 2 else (want[0], want[1] - e1)
        assert got == want, f
        for t in body["terms"]:
            assert Fraction(t["energy"]) == energies(d)[t["degree"]]
            assert int(t["N"]) == N(d, t["degree"])
        lb = value(got)
        assert lb >= fraction(Fraction(claim["value"]))
        # just above the bound: UNDECIDED (exit 3), no certificate, never REFUTED
        above = dict(claim, value=mpmath.nstr(lb * (1 + mp.mpf("1e-9")), 15))
        rc, cert = certify(above, tmp_path, "a%d" % i)
        assert rc == 3 and cert is None, f
