"""`attncert check permutation-symmetry` (issue 33, §2) against an independent reproduction: the instance rebuilt
from the formulas of proofs/L5-permutation-symmetry.md with Python's fractions, the exact claims re-decided over Q,
the equivariance re-checked with mpmath at 60 digits, and every witness entry recomputed inside its reported
intervals."""
import json
import os
import re
import subprocess
from fractions import Fraction as F

import pytest

mpmath = pytest.importorskip("mpmath")

N, D, DE = 6, 4, 2
PI = [3, 0, 5, 1, 4, 2]


def by_formula(rows, cols, a, b, c, m, off, den):
    return [[F((a * i + b * j + c) % m - off, den) for j in range(cols)] for i in range(rows)]


def encoding(cols):
    return [[F((i * (c + 1) + 2 * c) % 5 - 2, 8) for c in range(cols)] for i in range(N)]


def layer(rows):
    return by_formula(rows, D, 2, 3, 1, 5, 2, 2), by_formula(rows, D, 1, 4, 2, 5, 2, 2), by_formula(rows, D, 3, 1, 0, 5, 2, 2)


def mul(A, B):
    return [[sum(A[i][k] * B[k][j] for k in range(len(B))) for j in range(len(B[0]))] for i in range(len(A))]


def T(A):
    return [list(r) for r in zip(*A)]


def scores(X, L):
    WQ, WK, _ = L
    return [[x / 2 for x in row] for row in mul(mul(X, WQ), T(mul(X, WK)))]


def perm_rows(X):
    return [X[p] for p in PI]


def conj(M):
    return [[M[PI[i]][PI[j]] for j in range(len(M))] for i in range(len(M))]


def softmax(S, causal=False):
    mpmath.mp.dps = 60
    out = []
    for i, row in enumerate(S):
        js = [j for j in range(len(row)) if not causal or j <= i]
        e = {j: mpmath.exp(mpmath.mpf(row[j].numerator) / row[j].denominator) for j in js}
        W = mpmath.fsum(e.values())
        out.append([e[j] / W if j in e else mpmath.mpf(0) for j in range(len(row))])
    return out


def add(A, B):
    return [[a + b for a, b in zip(ra, rb)] for ra, rb in zip(A, B)]


def cat(A, B):
    return [ra + rb for ra, rb in zip(A, B)]


@pytest.fixture(scope="module")
def report():
    cli = os.environ.get("ATTNCERT_CLI")
    if not cli:
        pytest.skip("ATTNCERT_CLI not set")
    r = subprocess.run([cli, "check", "permutation-symmetry", "--format", "json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    claims = json.loads(r.stdout)["checks"][0]["claims"]
    return {(c["claim"], c["format"]): c for c in claims}


X = by_formula(N, D, 3, 5, 1, 7, 3, 4)
L, LCAT = layer(D), layer(D + DE)


def test_exact_claims(report):
    assert scores(perm_rows(X), L) == conj(scores(X, L))
    assert mul(perm_rows(X), L[2]) == perm_rows(mul(X, L[2]))
    XE = add(X, encoding(D))
    assert scores(perm_rows(XE), L) == conj(scores(XE, L))
    for name in ("scores-equivariant", "values-equivariant", "encoding-moved-along", "attention-equivariant",
                 "output-equivariant"):
        assert report[(name, "exact")]["verdict"] == "pass"


def test_equivariance_in_mpmath():
    A, AP = softmax(scores(X, L)), softmax(scores(perm_rows(X), L))
    PA = conj(A)
    assert max(abs(AP[i][j] - PA[i][j]) for i in range(N) for j in range(N)) < mpmath.mpf(10) ** -55


WITNESS = re.compile(r"differ at \((\d+), (\d+)\): \[([^,]+), ([^\]]+)\] vs \[([^,]+), ([^\]]+)\]")


@pytest.mark.parametrize("claim", ["causal-breaks", "added-encoding-breaks", "concatenated-encoding-breaks"])
def test_witnesses(report, claim):
    c = report[(claim, "exact")]
    assert c["verdict"] == "pass"
    m = WITNESS.search(c["computed"])
    assert m, c["computed"]
    i, j = int(m.group(1)), int(m.group(2))
    lo1, hi1, lo2, hi2 = (mpmath.mpf(m.group(k)) for k in range(3, 7))
    PX = perm_rows(X)
    if claim == "causal-breaks":
        lhs, rhs = softmax(scores(PX, L), causal=True), conj(softmax(scores(X, L), causal=True))
    elif claim == "added-encoding-breaks":
        E = encoding(D)
        lhs, rhs = softmax(scores(add(PX, E), L)), conj(softmax(scores(add(X, E), L)))
    else:
        E = encoding(DE)
        lhs, rhs = softmax(scores(cat(PX, E), LCAT)), conj(softmax(scores(cat(X, E), LCAT)))
    assert lo1 <= lhs[i][j] <= hi1 and lo2 <= rhs[i][j] <= hi2  # the reported enclosures hold the exact values
    assert hi1 < lo2 or hi2 < lo1                                 # and are disjoint: the values differ


def test_in_format_claims(report):
    for fmt in ("binary64", "mpfr256"):
        c = report[("attention-equivariant-in-format", fmt)]
        assert c["verdict"] == "pass"
        assert float(c["computed"]) <= float(c["tolerance"])
