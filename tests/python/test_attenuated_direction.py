"""`attncert check attenuated-direction` (issue 33, §5) against an independent reproduction: each instance's squared
gain g^2 = |Ac|^2/|c|^2 recomputed with mpmath at 60 digits (A the softmax of the exact scores of
proofs/L6-attenuated-direction.md), inside the reported enclosure, and each side of float32's threshold re-decided
from it; the two-token rows against their closed forms (g = tanh a on (1, -1), 1 on (1, 1))."""
import json
import os
import re
import subprocess
from fractions import Fraction as F

import pytest

mpmath = pytest.importorskip("mpmath")

T30 = F(1, 2 ** 30)
S3 = [[F(0), T30, F(1)], [F(1), 1 + T30, F(0)], [F(2), 2 + T30, F(1, 2)]]


def two_token(a):
    return [[a, -a], [-a, a]]


CASES = {
    "two-token a=1e-9, c = (1, -1)": (two_token(F(1, 10 ** 9)), [1, -1], True),
    "two-token a=1e-9, c = (1, 1)": (two_token(F(1, 10 ** 9)), [1, 1], False),
    "two-token a=1, c = (1, -1)": (two_token(F(1)), [1, -1], False),
    "two-token a=1, c = (1, 1)": (two_token(F(1)), [1, 1], False),
    "three tokens, keys 0 and 1 within 2^-30, c = e0 - e1": (S3, [1, -1, 0], True),
    "three tokens, keys 0 and 1 within 2^-30, c = e0 - e2": (S3, [1, 0, -1], False),
}


def mp(x):
    return mpmath.mpf(x.numerator) / x.denominator


def softmax(S):
    mpmath.mp.dps = 60
    out = []
    for row in S:
        e = [mpmath.exp(mp(x)) for x in row]
        W = mpmath.fsum(e)
        out.append([x / W for x in e])
    return out


def gain2(S, c):
    A = softmax(S)
    num = mpmath.fsum(mpmath.fsum(a * cj for a, cj in zip(row, c)) ** 2 for row in A)
    return num / sum(x * x for x in c), max(mpmath.fsum(A[i][j] for i in range(len(A))) for j in range(len(A)))


@pytest.fixture(scope="module")
def claims():
    cli = os.environ.get("ATTNCERT_CLI")
    if not cli:
        pytest.skip("ATTNCERT_CLI not set")
    r = subprocess.run([cli, "check", "attenuated-direction", "--format", "json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["checks"][0]["claims"]


INTERVAL = re.compile(r"\[([^,]+), ([^\]]+)\]")


@pytest.mark.parametrize("name", sorted(CASES))
def test_gain_and_threshold_side(claims, name):
    S, c, attenuated = CASES[name]
    g2, colmax = gain2(S, c)
    mine = {x["claim"]: x for x in claims if x["instance"] == name}
    lo, hi = (mpmath.mpf(v) for v in INTERVAL.match(mine["contrast-gain"]["computed"]).groups())
    assert lo <= g2 <= hi and mine["contrast-gain"]["verdict"] == "pass"
    n, e32 = len(S), mpmath.mpf(2) ** -23
    if attenuated:
        assert g2 < (n * e32) ** 2                      # flagged: below float32's threshold whatever sigma_1 is
        assert 1 - g2 / (n * e32) ** 2 >= mpmath.mpf("0.99")
        assert mine["below-float32-threshold"]["verdict"] == "pass" and mine["energy-discarded"]["verdict"] == "pass"
        assert "above-float32-threshold" not in mine
    else:
        assert g2 > colmax * (n * e32) ** 2             # not flagged: above it whatever sigma_1 is
        assert mine["above-float32-threshold"]["verdict"] == "pass"
        assert "below-float32-threshold" not in mine
    if name.startswith("two-token"):                    # closed forms: g = tanh a on (1, -1), 1 on (1, 1)
        a = mp(S[0][0])
        want = mpmath.tanh(a) ** 2 if c == [1, -1] else mpmath.mpf(1)
        assert abs(g2 - want) <= mpmath.mpf(10) ** -50 * want


def test_every_format_row_passes(claims):
    rows = [x for x in claims if x["claim"] == "gain-in-format"]
    assert len(rows) == 2 * len(CASES)  # binary64 and mpfr256
    assert all(x["verdict"] == "pass" for x in rows)


def test_paired_tasks(claims):
    """§7: each head with a task contrast below the threshold and a control above it gets one paired claim, passing
    because both sides were re-decided above (the task lost, the control transmitted)."""
    pairs = [x for x in claims if x["claim"] == "paired-tasks"]
    heads = {name.split(", c = ")[0] for name, (_, _, att) in CASES.items() if att}
    assert {x["instance"] for x in pairs} == heads
    for x in pairs:
        assert x["verdict"] == "pass" and "lost" in x["computed"] and "transmitted" in x["computed"]
        task = [n for n, (_, _, att) in CASES.items() if att and n.startswith(x["instance"])]
        control = [n for n, (_, _, att) in CASES.items() if not att and n.startswith(x["instance"])]
        assert len(task) == 1 and len(control) == 1
        n, e32 = len(CASES[task[0]][0]), mpmath.mpf(2) ** -23
        assert gain2(*CASES[task[0]][:2])[0] < (n * e32) ** 2
        g2, colmax = gain2(*CASES[control[0]][:2])
        assert g2 > colmax * (n * e32) ** 2
