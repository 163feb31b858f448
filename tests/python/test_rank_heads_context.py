"""attncert check rank-heads-tradeoff, proofs/L4 part G (the rows named context-*: a rank-one hardmax head choosing
among N = 2, 4, 8, 16 keys, and the two-layer vote over those heads), each number recomputed here without the C++
code:

* the finite instance itself, for d = 3 and d = 8: the SplitMix64 stream (vectorized in NumPy uint64, checked
  against a scalar Python SplitMix64), the rejection-sampled lattice points, the inputs redrawn for a tied target,
  every head's hardmax set, the exact hit rates (Fractions), the tied selections and the wrong plurality votes
  for H = 1, 3, 15, 63, 255.  Scores are compared in float64 first; every near tie is decided exactly with
  Python integers through the strictly increasing key A/sqrt(B) -> sign(A) A^2 / B;
* a negative control: the same instance with the sign of a.y ignored must not reproduce the N = 4 rate;
* the closed form p2(d) printed in the pair-witness rows, against 1/2 + E[arcsin|t|]/pi by mpmath's quadrature
  of the density c_d (1 - t^2)^((d-3)/2) at 40 digits;
* a seeded NumPy Monte Carlo of the continuum (Gaussian keys, query and head direction, normalised) for
  N = 4, 8, 16 at d = 3 and d = 8, against the instance's rates within 5 combined standard errors;
* the explicit-network grid rows: pass, rank N - 1, no output or tally otherwise.
"""
import re
from fractions import Fraction
from functools import lru_cache
from math import lcm

import numpy as np
import pytest

from splitmix import MASK64, splitmix64_block, splitmix64_scalar


mpmath = pytest.importorskip("mpmath")
mp = mpmath.mp

DIMS = tuple(range(3, 9))
SIZES = (2, 4, 8, 16)  # the context lengths N; every input draws max(SIZES) keys
VOTES = (1, 3, 15, 63, 255)  # the numbers of heads whose votes the second layer reads
RADIUS = 4096  # lattice points are the nonzero integer points of the ball of this radius
HEAD_SALT = 0x4EAD  # the head pool's generator is seeded with seed XOR this
# float64 scores are within ~2e-12 of the exact |score| <= 4096; candidates within TOL of the float maximum are
# decided exactly, anything further below is exactly smaller
TOL = 1e-7

ROW = re.compile(r"d=(\d+), N=(\d+), H=")
POOL = re.compile(r"(\d+) lattice inputs \((\d+) redrawn for a tie\) x (\d+) heads, radius (\d+), seed (\d+)$")
RATE = re.compile(r"(\d+)(?:/(\d+))? = [0-9.e+-]+ \(\+- ([0-9.eE+-]+) as an estimate of the continuum; (\d+) tied selections split\)$")
WRONG = re.compile(r"wrong outputs of (\d+) \(([^)]*)\)")
CLOSED = re.compile(r"^in \[\s*([-+0-9.eE]+)\s*,\s*([-+0-9.eE]+)\s*\] = (-?\d+(?:/\d+)?) \+ \((-?\d+(?:/\d+)?)\)/pi(\^2)?$")
RATE_KINDS = ("context-pair-witness", "context-hit-rate-falls")
VOTE_KINDS = ("context-vote-helps", "context-vote-error-grows")


@pytest.fixture(scope="module")
def claims(rank_heads_claims):
    return [c for c in rank_heads_claims if c["claim"].startswith("context-")]


# ---------------------------------------------------------------------------------------------------------------
# Parsing the rows


def d_and_n(c):
    d, n = ROW.match(c["instance"]).groups()
    return int(d), int(n)


def pool(c):
    """(inputs, redrawn, heads, radius, seed) printed in a rate or vote row's instance."""
    m = POOL.search(c["instance"])
    assert m, c["instance"]
    return tuple(int(x) for x in m.groups())


def rate_of(c):
    """(hit rate as a Fraction, its printed standard error, tied selections) of a rate row's computed."""
    m = RATE.match(c["computed"])
    assert m, c["computed"]
    num, den, se, ties = m.groups()
    return Fraction(int(num), int(den or 1)), float(se), int(ties)


def wrong_of(c):
    """(inputs, {H: wrong outputs}) of a vote row's computed."""
    m = WRONG.match(c["computed"])
    assert m, c["computed"]
    per_h = {int(h): int(w) for h, w in re.findall(r"H=(\d+): (\d+)", m.group(2))}
    return int(m.group(1)), per_h


def rows_of_dim(claims, d):
    """The rate and vote rows of dimension d, keyed by (kind, N)."""
    got = {}
    for c in claims:
        if c["claim"] in RATE_KINDS + VOTE_KINDS and d_and_n(c)[0] == d:
            kind = "rate" if c["claim"] in RATE_KINDS else "vote"
            got.setdefault((kind, d_and_n(c)[1]), []).append(c)
    return got


# ---------------------------------------------------------------------------------------------------------------
# The instance: SplitMix64, lattice points, inputs, heads


def lattice_points(seed, d, count):
    """The first `count` lattice points drawn from the generator seeded with `seed`: each attempt takes d outputs,
    c = ((x >> 32) mod (2K + 1)) - K, and is kept when 0 < |c|^2 <= K^2.  Returns (points, squared norms)."""
    width = np.uint64(2 * RADIUS + 1)
    kept, have, used = [], 0, 0
    accept = {3: 0.5, 4: 0.3, 5: 0.16, 6: 0.08, 7: 0.036, 8: 0.015}.get(d, 0.01)  # roughly vol(ball) / vol(cube)
    while have < count:
        attempts = int((count - have) / accept * 1.1) + 64
        x = splitmix64_block(seed, used, attempts * d)
        used += attempts * d
        c = ((x >> np.uint64(32)) % width).astype(np.int64).reshape(attempts, d) - RADIUS
        n2 = np.einsum("ij,ij->i", c, c)
        ok = (n2 > 0) & (n2 <= RADIUS * RADIUS)
        kept.append(c[ok])
        have += int(ok.sum())
    z = np.concatenate(kept)[:count]
    return z, np.einsum("ij,ij->i", z, z)


def exact_key(a, b):
    """A strictly increasing function of a / sqrt(b) (b > 0), exact: sign(a) a^2 / b."""
    a, b = int(a), int(b)
    return Fraction(a * abs(a), b)


def hardmax_sets(num, norm2, n):
    """The maximisers T of num[..., i] / sqrt(norm2[..., i]) over i < n, for every leading index, exactly.

    Returns (first, size, ties): the smallest element of T, |T|, and {leading index: T} for the rows with |T| > 1.
    float64 scores give the candidates; rows with more than one candidate within TOL are decided in integers."""
    num = num[..., :n]
    norm2 = np.broadcast_to(norm2[..., :n], num.shape)
    score = num / np.sqrt(norm2)
    first = score.argmax(axis=-1)
    size = np.ones(first.shape, dtype=np.int64)
    near = score >= score.max(axis=-1, keepdims=True) - TOL
    ties = {}
    for idx in map(tuple, np.argwhere(near.sum(axis=-1) > 1)):
        cand = np.flatnonzero(near[idx])
        keys = {int(i): exact_key(num[idx][i], norm2[idx][i]) for i in cand}
        top = max(keys.values())
        T = tuple(i for i in sorted(keys) if keys[i] == top)
        first[idx], size[idx] = T[0], len(T)
        if len(T) > 1:
            ties[idx] = T
    return first, size, ties


@lru_cache(maxsize=None)
def instance(d, seed, inputs, heads):
    """The heads (from seed XOR 0x4EAD), and the accepted inputs (from seed): a query and 16 keys each, an input
    redrawn (its 17 points skipped) while its nearest key is tied for some N.  The targets per N, exactly."""
    a, _ = lattice_points(seed ^ HEAD_SALT, d, heads)
    per = 1 + max(SIZES)
    extra = 0
    while True:  # the number of redraws is not known in advance: ask for more points until enough inputs survive
        pts, n2 = lattice_points(seed, d, per * (inputs + extra))
        pts, n2 = pts.reshape(-1, per, d), n2.reshape(-1, per)
        y, keys, kn2 = pts[:, 0], pts[:, 1:], n2[:, 1:]
        yz = np.einsum("mid,md->mi", keys, y)
        tied = np.zeros(len(y), dtype=bool)
        targets = {}
        for n in SIZES:
            first, size, _ = hardmax_sets(yz, kn2, n)
            tied |= size > 1
            targets[n] = first
        ok = np.flatnonzero(~tied)
        if len(ok) >= inputs:
            last = ok[inputs - 1]
            redrawn = int(tied[: last + 1].sum())
            ok = ok[:inputs]
            return {"a": a, "y": y[ok], "keys": keys[ok], "norm2": kn2[ok], "redrawn": redrawn,
                    "target": {n: t[ok] for n, t in targets.items()}}
        extra += inputs - len(ok) + 8


def selections(inst, n, use_sign=True):
    """Every head's hardmax set over the first n keys of every input: scores s (a_h . z_i) / |z_i| with
    s = sign(a_h . y).  Returns hardmax_sets' (first, size, ties) with leading index (input, head)."""
    a = inst["a"].astype(np.float64)
    # |a . z| <= 2^24 by Cauchy-Schwarz, so these float64 products and sums are exact integers
    az = np.rint(np.einsum("mid,hd->mhi", inst["keys"].astype(np.float64), a)).astype(np.int64)
    if use_sign:
        s = np.sign(np.rint(inst["y"].astype(np.float64) @ a.T)).astype(np.int64)
        az = az * s[:, :, None]
    return hardmax_sets(az, inst["norm2"][:, None, :], n)


@lru_cache(maxsize=None)
def reproduce(d, seed, inputs, heads):
    """Per N: the exact hit rate, the tied selections, and the wrong plurality votes after H heads."""
    inst = instance(d, seed, inputs, heads)
    out = {"redrawn": inst["redrawn"]}
    for n in SIZES:
        first, size, ties = selections(inst, n)
        target = inst["target"][n]
        # hit credit: 1 for a unique selection of the target, 1/|T| for a tied set containing it
        credit = Fraction(int(((size == 1) & (first == target[:, None])).sum()))
        credit += sum((Fraction(1, len(T)) for (m, _), T in ties.items() if target[m] in T), Fraction(0))
        # the tally: every head adds 1/|T| to each key of T; in integer units of lcm of the tie sizes
        unit = lcm(1, *(len(T) for T in ties.values()))
        votes = np.zeros(first.shape + (n,), dtype=np.int64)
        m_idx, h_idx = np.nonzero(size == 1)
        votes[m_idx, h_idx, first[m_idx, h_idx]] = unit
        for (m, h), T in ties.items():
            votes[m, h, list(T)] = unit // len(T)
        cum = np.cumsum(votes, axis=1)
        wrong = {}
        for H in VOTES:
            tally = cum[:, H - 1, :]
            top = tally.max(axis=-1, keepdims=True)
            plural = (tally == top).sum(axis=-1)
            wrong[H] = int(((plural > 1) | (tally.argmax(axis=-1) != target)).sum())
        out[n] = {"rate": credit / (inputs * heads), "ties": len(ties), "wrong": wrong}
    return out


# ---------------------------------------------------------------------------------------------------------------
# Tests


def test_splitmix64_block_matches_the_scalar_generator():
    # the published first output of SplitMix64 seeded with 0, and agreement of the two implementations
    assert splitmix64_scalar(0, 1) == [0xE220A8397B1DCDAF]
    for seed in (0, 3242928394, MASK64, 3242928394 ^ HEAD_SALT):
        block = [int(x) for x in splitmix64_block(seed, 0, 40)]
        assert block == splitmix64_scalar(seed, 40)
        assert [int(x) for x in splitmix64_block(seed, 17, 5)] == splitmix64_scalar(seed, 22)[17:]


def test_hardmax_sets_decides_near_ties_exactly():
    """The exact path of hardmax_sets (the instance itself happens to have no tie): parallel keys tie, a zero sign
    ties all keys, and 3880899/sqrt(2) vs 2744210 (3880899^2 - 2 * 2744210^2 = 1, a gap of ~9e-8 < TOL)."""
    a, c = 3880899, 2744210
    assert a * a - 2 * c * c == 1
    num = np.array([[3, 6, -1, 0], [0, 0, 0, 0], [c, a, 1, -5], [-c, -a, -c - 1, -a]], dtype=np.int64)
    norm2 = np.array([[1, 4, 1, 1], [1, 4, 9, 2], [1, 2, 9, 1], [1, 2, 1, 2]], dtype=np.int64)
    first, size, ties = hardmax_sets(num, norm2, 4)
    assert first.tolist() == [0, 0, 1, 0] and size.tolist() == [2, 4, 1, 1]
    assert ties == {(0,): (0, 1), (1,): (0, 1, 2, 3)}
    first, size, ties = hardmax_sets(num, norm2, 1)  # a single key is its own unique maximiser
    assert first.tolist() == [0, 0, 0, 0] and size.tolist() == [1, 1, 1, 1] and not ties


def test_rows_cover_every_dimension_and_length(claims):
    want = {(k, d, 2) for k in ("context-pair-witness", "context-vote-helps") for d in DIMS}
    want |= {(k, d, n) for k in ("context-hit-rate-falls", "context-vote-error-grows") for d in DIMS for n in SIZES[1:]}
    got = [(c["claim"], *d_and_n(c)) for c in claims if c["claim"] in RATE_KINDS + VOTE_KINDS]
    assert set(got) == want
    assert all(c["verdict"] == "pass" for c in claims if c["claim"] in RATE_KINDS + VOTE_KINDS)


@pytest.mark.parametrize("d", (3, 8))
def test_instance_is_reproduced_exactly(claims, d):
    got = rows_of_dim(claims, d)
    assert sorted(got) == sorted([("rate", n) for n in SIZES] + [("vote", n) for n in SIZES])
    pools = {pool(c) for cs in got.values() for c in cs}
    assert len(pools) == 1, pools  # one seed, one redraw count, one pool for every row of this d
    ((inputs, redrawn, heads, radius, seed),) = pools
    assert radius == RADIUS
    mine = reproduce(d, seed, inputs, heads)
    assert mine["redrawn"] == redrawn
    for n in SIZES:
        for c in got[("rate", n)]:
            assert c["verdict"] == "pass"
            rate, _, ties = rate_of(c)
            assert (rate, ties) == (mine[n]["rate"], mine[n]["ties"]), (d, n, rate, mine[n]["rate"])
        for c in got[("vote", n)]:
            assert c["verdict"] == "pass"
            m, wrong = wrong_of(c)
            assert m == inputs and wrong == mine[n]["wrong"], (d, n, wrong, mine[n]["wrong"])


def test_negative_control_ignoring_the_sign_changes_the_rate(claims):
    """Test 1 can fail: the d = 3 instance with s = sign(a.y) dropped does not give the row's N = 4 rate."""
    ((c,),) = [[c for c in claims if c["claim"] == "context-hit-rate-falls" and d_and_n(c) == (3, 4)]]
    inputs, _, heads, _, seed = pool(c)
    rate, se, _ = rate_of(c)
    inst = instance(3, seed, inputs, heads)
    first, size, ties = selections(inst, 4, use_sign=False)
    target = inst["target"][4]
    credit = Fraction(int(((size == 1) & (first == target[:, None])).sum()))
    credit += sum((Fraction(1, len(T)) for (m, _), T in ties.items() if target[m] in T), Fraction(0))
    wrong_rule = credit / (inputs * heads)
    assert wrong_rule != rate
    assert abs(float(wrong_rule - rate)) > 5 * se, (wrong_rule, rate)


def c_d(d):
    return mpmath.gamma(mp.mpf(d) / 2) / (mpmath.sqrt(mpmath.pi) * mpmath.gamma(mp.mpf(d - 1) / 2))


def test_pair_closed_form_is_the_arcsin_mean(claims):
    mp.dps = 40
    got = {d_and_n(c)[0]: c for c in claims if c["claim"] == "context-pair-witness"}
    assert sorted(got) == list(DIMS)
    for d in DIMS:
        m = CLOSED.match(got[d]["expected"])
        assert m, got[d]["expected"]
        lo, hi, A, B, squared = m.groups()
        assert bool(squared) == (d % 2 == 0)
        printed = mp.mpf(Fraction(A).numerator) / Fraction(A).denominator + \
            mp.mpf(Fraction(B).numerator) / Fraction(B).denominator / mpmath.pi ** (2 if squared else 1)
        # E[arcsin|t|] with t of density c_d (1 - t^2)^((d-3)/2) on [-1, 1]: twice the integral over [0, 1]
        mean = 2 * c_d(d) * mpmath.quad(lambda t: mpmath.asin(t) * (1 - t * t) ** (mp.mpf(d - 3) / 2), [0, 1])
        want = mp.mpf(1) / 2 + mean / mpmath.pi
        assert abs(printed - want) <= mp.mpf(10) ** -25 * want, (d, printed, want)
        assert mp.mpf(lo) <= want <= mp.mpf(hi), (d, lo, want, hi)


def monte_carlo_hits(d, samples, seed, chunk=50_000):
    """P(a rank-one head selects the nearest key) for every N, with keys, query and head direction independent
    and uniform on the sphere: {N: (estimate, standard error)}.  The N keys are the first N of 16 draws."""
    rng = np.random.default_rng(seed)
    hits = dict.fromkeys(SIZES[1:], 0)
    for start in range(0, samples, chunk):
        c = min(chunk, samples - start)
        keys = rng.standard_normal((c, max(SIZES), d))
        keys /= np.linalg.norm(keys, axis=-1, keepdims=True)
        y = rng.standard_normal((c, d))
        a = rng.standard_normal((c, d))  # the head direction: only its direction and sign pattern matter
        near = np.einsum("cid,cd->ci", keys, y)
        score = np.sign(np.einsum("cd,cd->c", a, y))[:, None] * np.einsum("cid,cd->ci", keys, a)
        for n in hits:
            hits[n] += int((near[:, :n].argmax(axis=1) == score[:, :n].argmax(axis=1)).sum())
    return {n: (h / samples, np.sqrt(h / samples * (1 - h / samples) / samples)) for n, h in hits.items()}


@pytest.mark.parametrize("d", (3, 8))
def test_rates_witness_the_continuum(claims, d):
    mc = monte_carlo_hits(d, 300_000, seed=20240 + d)
    rows = {d_and_n(c)[1]: c for c in claims if c["claim"] == "context-hit-rate-falls" and d_and_n(c)[0] == d}
    assert sorted(rows) == list(SIZES[1:])
    for n, c in rows.items():
        rate, se_row, _ = rate_of(c)
        p, se_mc = mc[n]
        assert abs(float(rate) - p) <= 5 * np.hypot(se_row, se_mc), (d, n, float(rate), p, se_row, se_mc)


def test_network_grid_rows(claims):
    got = [c for c in claims if c["claim"] == "context-network-grid"]
    assert len(got) == 3 and all(c["verdict"] == "pass" for c in got)
    assert sorted(d_and_n(c)[1] for c in got) == [4, 8, 16]
    for c in got:
        n = d_and_n(c)[1]
        samples = int(re.search(r"(\d+) rational inputs", c["instance"]).group(1))
        m = re.match(r"(\d+) inputs with a unique plurality, (\d+) tied .*; (\d+) outputs or tallies otherwise; "
                     r"rank of W_Q2\^T W_K2 = (\d+)$", c["computed"])
        assert m, c["computed"]
        unique, tied, other, rank = map(int, m.groups())
        assert unique + tied == samples and unique > 0
        assert other == 0 and rank == n - 1
        assert c["expected"] == f"0 outputs or tallies otherwise; rank {n - 1}"


# ---------------------------------------------------------------------------------------------------------------
# `attncert certify` on the shipped part G claims: the certificates' exact rates are this module's re-implementation's,
# and the closed form p2(d) = A + B/pi^k is mpmath's quadrature of the arcsine mean.

import glob  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402

CLI = os.environ.get("ATTNCERT_CLI")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def shipped(kind):
    out = []
    for f in sorted(glob.glob(os.path.join(ROOT, "proofs", "claims", "L4-*.json"))):
        with open(f) as fh:
            c = json.load(fh)
        if c["quantity"]["kind"] == kind:
            out.append((f, c))
    return out


def certified(path, tmp_path):
    out = tmp_path / (os.path.basename(path) + ".cert.json")
    run = subprocess.run([CLI, "certify", path, "--certificate", str(out)], capture_output=True, text=True, timeout=120)
    assert run.returncode in (0, 1), run.stdout + run.stderr
    with open(out) as fh:
        cert = json.load(fh)
    with open(os.path.join(ROOT, "proofs", "certificates", os.path.basename(path)[:-5] + ".cert.json")) as fh:
        assert json.load(fh) == cert, "the shipped certificate differs from certify's: regenerate it"
    return run.returncode, cert


@pytest.mark.skipif(not CLI, reason="ATTNCERT_CLI (the attncert binary) not set")
def test_context_hit_rate_certificates_are_the_reimplementation(tmp_path):
    claims = shipped("rank_heads_context_hit_rate")
    assert len(claims) >= 2
    for path, c in claims:
        q = c["quantity"]
        rc, cert = certified(path, tmp_path)
        mine = reproduce(q["d"], int(q["seed"]), q["inputs"], q["heads"])
        body = cert["rank_heads_context"]
        assert Fraction(body["rate"]) == mine[q["keys"]]["rate"], (path, body["rate"], mine[q["keys"]]["rate"])
        assert body["redrawn"] == mine["redrawn"] and body["head_ties"] == mine[q["keys"]]["ties"], path
        value, rate = Fraction(str(c["value"])), mine[q["keys"]]["rate"]
        holds = {"=": rate == value, "<=": rate <= value, ">=": rate >= value}[c["relation"]]
        assert rc == (0 if holds else 1), path


@pytest.mark.skipif(not CLI, reason="ATTNCERT_CLI (the attncert binary) not set")
def test_pair_hit_certificates_hold_the_mpmath_probability(tmp_path):
    mp.dps = 40
    claims = shipped("rank_heads_pair_hit_probability")
    assert len(claims) >= 1
    for path, c in claims:
        d = c["quantity"]["d"]
        rc, cert = certified(path, tmp_path)
        body = cert["rank_heads_pair_hit"]
        A, B = Fraction(body["rational"]), Fraction(body["over_pi_power"])
        stated = mp.mpf(A.numerator) / A.denominator + mp.mpf(B.numerator) / B.denominator / mpmath.pi ** body["pi_power"]
        mean = 2 * c_d(d) * mpmath.quad(lambda t: mpmath.asin(t) * (1 - t * t) ** (mp.mpf(d - 3) / 2), [0, 1])
        want = mp.mpf(1) / 2 + mean / mpmath.pi
        assert abs(stated - want) <= mp.mpf(10) ** -25, (path, stated, want)
        value = Fraction(str(c["value"]))
        v = mp.mpf(value.numerator) / value.denominator
        holds = want <= v if c["relation"] == "<=" else want >= v
        assert rc == (0 if holds else 1), (path, want, value)
