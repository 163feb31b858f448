"""attncert.rank / certify / check / drift in process: the same answers as the command line's JSON
reports, typed results with readable reprs, and drift of the caller's own diagnostic."""
import json
import os
import subprocess
import tempfile

import numpy as np
import pytest

import attncert

CLI = os.environ.get("ATTNCERT_CLI")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
needs_cli = pytest.mark.skipif(not CLI, reason="ATTNCERT_CLI (the attncert binary) not set")


def cli_json(args, cwd=None):
    p = subprocess.run([CLI] + args + ["--format", "json"], capture_output=True, text=True, cwd=cwd)
    assert p.returncode in (0, 1, 3), p.stderr
    return json.loads(p.stdout)


def strip(report):
    """The report without what names the caller (command line and file names) and the stage timings."""
    return {k: v for k, v in report.items() if k not in ("command", "inputs", "seconds")}


@needs_cli
def test_rank_matches_cli():
    a = 3.0
    S = a * np.array([[1.0, -1.0], [-1.0, 1.0]])  # rank-one scores, full-rank attention (P01)
    r = attncert.rank(S, formats="binary64,binary32", policies=["numpy", "absolute:1e-6"])
    assert r.exact_rank == (2, 2)
    assert "exact rank 2" in repr(r)
    with tempfile.TemporaryDirectory() as tmp:
        np.save(os.path.join(tmp, "S.npy"), S)
        c = cli_json(["rank", "--scores", "S.npy", "--formats", "binary64,binary32", "--policies", "numpy,absolute:1e-6"],
                     cwd=tmp)
    assert strip(r.report) == strip(c)
    json.loads(r.to_json())


@needs_cli
def test_rank_of_qk_with_causal_mask_matches_cli():
    rng = np.random.default_rng(5)
    q, k = rng.integers(-3, 4, (5, 2)).astype(np.float64), rng.integers(-3, 4, (5, 2)).astype(np.float64)
    r = attncert.rank(q=q, k=k, scale="1/2", mask="causal", formats="binary64", policies="numpy")
    with tempfile.TemporaryDirectory() as tmp:
        np.save(os.path.join(tmp, "q.npy"), q)
        np.save(os.path.join(tmp, "k.npy"), k)
        c = cli_json(["rank", "--q", "q.npy", "--k", "k.npy", "--scale", "1/2", "--mask", "causal", "--formats", "binary64",
                      "--policies", "numpy"], cwd=tmp)
    assert strip(r.report) == strip(c)
    assert r.exact_rank == (5, 5)  # causal with finite diagonal: full rank (P03)


def test_rank_escalates_undecided_singular_values_on_a_deflated_subspace():
    # A layer of 160 tokens under a causal mask that also lets the first query see the second key:
    # binary64 leaves its smallest singular values undecided (far below 1e-16), and the attention is not
    # triangular, so no determinant bounds them; the deflated escalation decides them (proofs/P16, part D);
    # deflate_max_k=0 leaves them.
    rng = np.random.default_rng(3)
    q, k = (rng.standard_normal((160, 16)).astype(np.float32) for _ in range(2))
    mask = np.tril(np.ones((160, 160), dtype=bool))
    mask[0, 1] = True
    r = attncert.rank(q=q, k=k, mask=mask, formats="binary64", policies="numpy")
    assert r.report["singular_values_method"] == "binary64+deflated"
    assert r.report["singular_values_certified_positive"] == 160, r.report["notes"]
    assert any("deflated subspace" in n for n in r.report["notes"])
    off = attncert.rank(q=q, k=k, mask=mask, formats="binary64", policies="numpy", deflate_max_k=0)
    assert off.report["singular_values_method"] == "binary64"
    assert off.report["singular_values_certified_positive"] < 160
    for lo_hi, kept in zip(r.report["singular_values"], off.report["singular_values"]):
        assert float(lo_hi["lo"]) >= float(kept["lo"]) and float(lo_hi["hi"]) <= float(kept["hi"])
    with pytest.raises(ValueError, match="deflate_max_k"):
        attncert.rank(q=q, k=k, mask="causal", deflate_max_k=-1)
    # threads= runs the escalation's products and the MPFI enclosures on several threads: the same
    # enclosures, bit for bit, as on one (number/parallel.hpp)
    one = attncert.rank(q=q, k=k, mask=mask, formats="binary64", policies="numpy", threads=1)
    assert one.report["singular_values"] == r.report["singular_values"]
    # the causal mask itself: a triangular attention, decided by binary64 with its determinant (part E)
    c = attncert.rank(q=q, k=k, mask="causal", formats="binary64", policies="numpy")
    assert c.report["singular_values_method"] == "binary64", c.report["notes"]
    assert c.report["singular_values_certified_positive"] == 160
    assert any("the object is triangular" in n for n in c.report["notes"])
    with pytest.raises(ValueError, match="threads"):
        attncert.rank(q=q, k=k, mask="causal", threads=0)


def test_rank_at_scale_keywords():
    # 300 tokens of float32 data: the binary64 path certifies every singular value; mpfr256 is left out of
    # the default formats with a time estimate, and kept when named; max_seconds stops early, said so.
    rng = np.random.default_rng(6)
    q, k = (rng.standard_normal((300, 8)).astype(np.float32) for _ in range(2))
    r = attncert.rank(q=q, k=k, policies="numpy")
    assert r.exact_rank == (300, 300)
    assert r.report["singular_values_method"] == "binary64"
    assert r.report["singular_values_certified_positive"] == 300
    assert any("mpfr256 left out" in n for n in r.report["notes"])
    assert {m["format"] for m in r.report["numerical"]} == {"binary16", "bfloat16", "binary32", "binary64"}
    p = attncert.rank(q=q, k=k, formats="binary64", policies="numpy", max_seconds=1e-9)
    assert p.report["partial"] and any("not computed" in n for n in p.report["notes"])
    # the library's notes name the keyword (field.hpp), never the CLI's option nor an unspelled field
    assert any("stopped at max_seconds=" in n for n in p.report["notes"]), p.report["notes"]
    assert not any("--max-seconds" in n or "\x1e" in n or "\x1f" in n for n in p.report["notes"])
    with pytest.raises(ValueError, match=">= 0"):
        attncert.rank(q=q, k=k, max_seconds=-1)


def test_rank_errors():
    with pytest.raises(ValueError, match="give scores=S, or q=Q and k=K"):
        attncert.rank()
    with pytest.raises(ValueError, match="2-D"):
        attncert.rank(np.zeros(3))
    with pytest.raises(ValueError, match="NaN"):
        attncert.rank(np.array([[np.nan, 0.0], [0.0, 1.0]]))


def test_errors_name_keywords():
    # The one builder of each call (rank/spec.hpp, drift/spec.hpp, checks/spec.hpp, proofs/spec.hpp) names
    # fields; Python spells them as its keywords, never as the command line's options.
    def message(call):
        with pytest.raises(ValueError) as e:
            call()
        m = str(e.value)
        assert "--" not in m and "\x1e" not in m and "\x1f" not in m, m
        return m

    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((3, 2)) for _ in range(3))
    # past the Python layer's own checks, the binding's builder: max_seconds out of range
    o = {"q": q, "k": k, "object": "attention", "formats": "binary64", "formats_explicit": True, "policies": "numpy",
         "max_bits": 4096, "seed": 1, "max_seconds": -1.0, "sigma_rel_width": 0.0, "deflate_max_k": 64,
         "deflate_seconds": 120.0}
    assert message(lambda: attncert._core.rank_json(o)).startswith("max_seconds must be in [0, 1e7]")
    o["max_seconds"], o["deflate_max_k"] = 0.0, 5000
    assert message(lambda: attncert._core.rank_json(o)).startswith("deflate_max_k must be in [0, 4096]")
    o["deflate_max_k"], o["max_bits"] = 64, 64
    assert message(lambda: attncert._core.rank_json(o)).startswith("max_bits must be in [128, 1048576]")
    assert message(lambda: attncert.rank(q=q, k=k, object="output")) == "object='output' needs v="
    assert message(lambda: attncert.rank(q @ k.T, scale="1/2")).startswith("scale applies to q=/k=")
    assert message(lambda: attncert.rank(q=q, k=k, v=v, formats="fp7")).startswith("formats: unknown format")
    assert message(lambda: attncert.check(["two-token"], formats="fp7")).startswith("formats: ")
    assert message(lambda: attncert.check(["no-such-check"])).startswith("ids: unknown check 'no-such-check'")
    assert message(lambda: attncert.drift("causal", 2.0, 1.0, points=3, recipes="fp64", policies="numpy")) == \
        "start must be smaller than stop="
    assert message(lambda: attncert.drift("two-token", 0.5, 1.0, points=3, recipes="fp64", policies="numpy", n=3)) == \
        "the two-token family has n = 2, d = 1: n=/d do not apply"
    assert message(lambda: attncert.drift("causal", 0.5, 1.0, points=3, recipes="fp7", policies="numpy")).startswith(
        "recipes: ")


@needs_cli
@pytest.mark.parametrize("name", ["P01-two-token-attention-at-zero.json", "P03-causal-full-rank.json"])
def test_certify_matches_cli(name):
    path = os.path.join(ROOT, "proofs", "claims", name)
    r = attncert.certify(path)
    c = cli_json(["certify", path])
    assert r.verdict == c["verdict"] == "CERTIFIED"
    assert bool(r) and r.certificate is not None
    assert r.verdict in repr(r)
    with open(path) as f:
        claim = json.load(f)
    if "npy" not in json.dumps(claim):
        assert attncert.certify(claim).verdict == "CERTIFIED"


def test_certify_refutes_a_false_claim_and_rejects_bad_ones():
    false_claim = {"objects": {"S": [[1, -1], [-1, 1]]}, "family": {"at": "0"},
                   "quantity": {"kind": "rank", "object": "attention"}, "relation": "=", "value": 2}
    r = attncert.certify(false_claim)
    assert r.verdict == "REFUTED" and not r
    with pytest.raises(ValueError):
        attncert.certify({"objects": {}})
    with pytest.raises(ValueError):
        attncert.certify(42)


@needs_cli
def test_check_matches_cli():
    r = attncert.check(["two-token", "residual"], formats="binary64")
    c = cli_json(["check", "two-token", "residual", "--formats", "binary64"])
    assert r.totals == c["summary"]
    assert r.passed
    assert "two-token" in r.text()
    assert "CheckResult(2 checks" in repr(r)
    with pytest.raises(ValueError, match="unknown check"):
        attncert.check(["no-such-check"])


@needs_cli
def test_drift_matches_cli():
    d = attncert.drift("causal", 0.5, 40.0, points=9, recipes="fp64,bf16", policies="numpy,absolute:1e-3",
                       enclosures=True)
    c = cli_json(["drift", "--family", "causal", "--from", "0.5", "--to", "40", "--points", "9", "--recipes", "fp64,bf16",
                  "--policies", "numpy,absolute:1e-3", "--per-point"])
    assert strip(d.report) == strip(c)


@needs_cli
def test_drift_at_layer_size_matches_cli():
    # n = 80 > 64: the factored exact rank and the binary64 singular values, as the CLI's --n/--d
    d = attncert.drift("random", 0.25, 2.0, points=3, log=True, recipes="fp64,fp32", policies="numpy", n=80, d=8,
                       enclosures=True)
    c = cli_json(["drift", "--family", "random", "--from", "0.25", "--to", "2", "--points", "3", "--log", "--recipes",
                  "fp64,fp32", "--policies", "numpy", "--n", "80", "--d", "8", "--per-point"])
    assert strip(d.report) == strip(c)
    assert d.report["points"]["exact_rank_lo"] == [80] * len(d.report["points"]["a"])
    with pytest.raises(ValueError, match=r"n: must be an integer in \[1, 4096\], got 5000"):
        attncert.drift("random", 0.5, 1.0, points=2, recipes="fp64", policies="numpy", n=5000)


def test_drift_of_numpy_matrix_rank():
    calls = []

    def matrix_rank(M):
        k = int(np.linalg.matrix_rank(M))
        calls.append((M.copy(), k))
        return k

    d = attncert.drift("two-token", 1e-18, 1e-12, points=25, log=True, recipes="fp64", policies="numpy",
                       diagnostic=matrix_rank)
    assert d.report["settings"]["diagnostics"][0]["name"] == "diagnostic:matrix_rank"
    iv = d.intervals[("fp64", "diagnostic:matrix_rank")]
    pol = d.intervals[("fp64", "numpy")]
    # numpy.linalg.matrix_rank sees rank 1 at tiny a (the exact rank is 2 for every a > 0): one interval
    # from the start, its end bisected between 1e-16 and 1e-15 (P10's derivation: a ~ 4e-16 for fp64)
    assert len(iv) == 1 and iv[0][0] == 1e-18 and 1e-16 < iv[0][1] < 1e-15, iv
    assert len(pol) == 1 and 1e-16 < pol[0][1] < 1e-15, pol
    # every rank reported at a grid point is the diagnostic's answer on the matrix it was given
    ranks = d.ranks("fp64", "diagnostic:matrix_rank")
    assert len(ranks) == 25 and set(ranks) <= {1, 2}
    assert all(k == int(np.linalg.matrix_rank(M)) for M, k in calls)
    # the matrix passed is the two-token attention formed in binary64: rows sum to ~1, 2 x 2
    assert all(M.shape == (2, 2) and abs(M.sum(axis=1) - 1).max() < 1e-15 for M, _ in calls)
    lo, hi = d.exact_rank
    assert (lo == 2).all() and (hi == 2).all()
    assert "diagnostic:matrix_rank" in repr(d)
    assert all(M.dtype == np.float64 for M, _ in calls)


def test_drift_diagnostic_gets_the_recipes_dtype():
    seen = {}

    def record(M):
        seen.setdefault(str(M.dtype), 0)
        seen[str(M.dtype)] += 1
        return int(np.linalg.matrix_rank(M))

    d = attncert.drift("two-token", 1e-9, 1e-3, points=7, log=True, recipes="fp64,fp32,fp16,bf16-fp32acc",
                       policies="numpy", diagnostic={"np": record})
    assert set(seen) == {"float64", "float32"}
    # on float32 numbers NumPy's own threshold uses float32's epsilon (2 * 2^-23 here): the diagnostic
    # departs below a ~ 2e-7 as the fp32 numpy policy does; where exactly depends on each one's SVD of
    # the float32 matrix (LAPACK's sgesdd, Eigen's Jacobi), so only the decade is asserted
    for key in (("fp32", "diagnostic:np"), ("fp32", "numpy")):
        (start, end), = d.intervals[key]
        assert start == 1e-9 and 1e-7 < end < 1e-6, (key, end)


def test_drift_diagnostic_errors_propagate():
    def broken(M):
        raise RuntimeError("my diagnostic failed")

    with pytest.raises(RuntimeError, match="my diagnostic failed"):
        attncert.drift("two-token", 0.1, 1.0, points=3, recipes="fp64", policies="numpy", diagnostic=broken)
    with pytest.raises(ValueError, match="diagnostic '<lambda>' returned -1"):
        attncert.drift("two-token", 0.1, 1.0, points=3, recipes="fp64", policies="numpy", diagnostic=lambda M: -1)
    with pytest.raises(ValueError, match="callable"):
        attncert.drift("two-token", 0.1, 1.0, points=3, diagnostic=42)


def test_concurrent_drifts_with_diagnostics_match_their_sequential_runs():
    # Two threads sweep in-process at different MPFR precisions while each calls back into Python. Boost
    # keeps one precision for the whole process: the library serializes the threads' precision guards, and a
    # thread waiting for them lets the GIL go (else a callback of the other thread could not run: deadlock).
    import threading

    def rank(M):
        return int(np.linalg.matrix_rank(M))

    jobs = {"a": "fp64,mpfr128", "b": "fp32,mpfr600"}  # about 0.8 s and 1.9 s alone

    def run(name):
        return attncert.drift("random", 0.25, 2.0, points=4, log=True, recipes=jobs[name], policies="numpy", n=40, d=8,
                              diagnostic=rank)

    alone = {name: strip(run(name).report) for name in jobs}
    together, errors = {}, []

    def worker(name):
        try:
            together[name] = strip(run(name).report)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(name,)) for name in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "concurrent drifts did not finish (deadlock?)"
    assert not errors, errors
    assert together == alone
