#!/usr/bin/python3
"""`attncert check` must not pass a wrong number (issue 28, item 6): its rows against mpmath.

Usage: truths_mpmath.py ATTNCERT_BINARY [REPO_ROOT]

Independent truths (mpmath, at 1,200 decimal digits; nothing shared with attncert):
  1. causal-mask, S_ij = 0 (j < i), S_ii = -delta, delta = 50 and 800, n = 4: the smallest
     singular value of the exact causal softmax A.  In every mpfrN rank row the certified
     enclosure of sigma_min (of the matrix as formed, within 2^-200 of the exact A) must contain
     it to a relative 1e-60, and a measured sigma_min off the truth by more than a relative 1/4
     must be flagged `sigma_min_diverges`.  proofs/P03 must state sigma_min for delta = 800
     within 1 % of the truth.
  2. two-token: tanh a, p = 1/(1 + e^-2a) and 1 - tanh^2 a at the stored a (a rounded to the
     row's format: binary64 by Python's float, mpfr256 by mpmath at 257 bits).  A row of
     diagonal-p, det-equals-tanh, singular-value-tanh or saturation-derivative that PASSES must be
     within a relative 1/4 of the truth and within its printed tolerance of it, and its
     `expected` must be the certified value (leading digits of the truth), never a formula
     evaluated in the failing format.
  3. rank-collapse, the residual stack (declared weights of checks/rank_collapse.cpp) computed to
     depth 20: a passing residual claim whose statement is not bounded to the declared depths
     ("every layer") must hold at every depth computed here; the bounded statement must name
     the depths it covers and hold there.
Exit 0 pass, 1 fail, 77 skip (no mpmath).
"""
import json, os, re, subprocess, sys

try:
    from mpmath import mp, mpf, matrix, exp, tanh, svd_r, sqrt
except ImportError as e:  # pragma: no cover
    print("SKIP:", e)
    sys.exit(77)

BIN = sys.argv[1]
ROOT = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
failures = []
checked = 0


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def check_json(ids, formats="binary64,mpfr256"):
    p = subprocess.run([BIN, "check", *ids, "--formats", formats, "--format", "json"], capture_output=True, text=True)
    if p.returncode not in (0, 1):
        sys.exit(f"FAIL: attncert check {ids} exited {p.returncode}: {p.stderr.strip()}")
    return json.loads(p.stdout)["checks"]


def num(s):
    m = re.match(r"\s*([-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?)", s or "")
    return mpf(m.group(1)) if m else None


def interval(s):
    m = re.match(r"\s*\[\s*([^,\]]+)\s*,\s*([^\]]+)\]", s or "")
    return (mpf(m.group(1)), mpf(m.group(2))) if m else None


mp.dps = 1200

# ---- 1. causal sigma_min ---------------------------------------------------------------------
def causal_sigma_min(delta, n=4):
    A = matrix(n, n)
    for i in range(n):
        z = i + exp(-mpf(delta))
        for j in range(i):
            A[i, j] = 1 / z
        A[i, i] = exp(-mpf(delta)) / z
    return min(svd_r(A, compute_uv=False))


truth = {d: causal_sigma_min(d) for d in (50, 800)}
print("mpmath sigma_min: delta=50 %s, delta=800 %s" % (mp.nstr(truth[50], 6), mp.nstr(truth[800], 6)))
(causal,) = check_json(["causal-mask"], "binary64,mpfr256,mpfr512")
for r in causal["ranks"]:
    m = re.match(r"diagonal-(\d+)-below-max", r["instance"])
    if not m or not r["format"].startswith("mpfr"):
        continue
    t = truth[int(m.group(1))]
    checked += 1
    enc = interval(r.get("sigma_min_certified", ""))
    if enc is None:
        fail("causal %s %s: no certified sigma_min enclosure (%r)" % (r["instance"], r["format"], r.get("sigma_min_certified")))
    elif not (enc[0] * (1 - mpf(10) ** -60) <= t <= enc[1] * (1 + mpf(10) ** -60)):
        fail("causal %s %s: certified %s does not contain the truth %s" % (r["instance"], r["format"], r["sigma_min_certified"], mp.nstr(t, 10)))
    measured = num(r["singular_values"][-1])
    if abs(measured - t) > t / 4 and not r.get("sigma_min_diverges", False):
        fail("causal %s %s: sigma_min %s is off the truth %s and not flagged DIVERGES" % (r["instance"], r["format"], r["singular_values"][-1], mp.nstr(t, 6)))

sup = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")
p03 = open(os.path.join(ROOT, "proofs", "P03-causal-full-rank.md"), encoding="utf-8").read()
stated = re.findall(r"δ = 800 \(σ_min (?:≈|=) ([0-9.]+)·10([⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+)", p03)
if not stated:
    fail("proofs/P03 states no 'δ = 800 (σ_min ≈ X·10^E' value")
for mant, e in stated:
    v = mpf(mant) * mpf(10) ** int(e.translate(sup))
    checked += 1
    if abs(v - truth[800]) > truth[800] / 100:
        fail("proofs/P03 states sigma_min %s·10^%s for delta = 800; the truth is %s" % (mant, e.translate(sup), mp.nstr(truth[800], 6)))

# ---- 2. two-token rows against their truths --------------------------------------------------
mp.dps = 400
(two,) = check_json(["two-token"])
for r in two["claims"]:
    if r["claim"] not in ("diagonal-p", "det-equals-tanh", "singular-value-tanh", "saturation-derivative"):
        continue
    if r["format"] not in ("binary64", "mpfr256") or r["verdict"] != "pass":
        continue
    a_text = r["instance"].split("=", 1)[1]
    if r["format"] == "binary64":
        a = mpf(float(a_text))
    else:
        with mp.workprec(257):
            a = +mpf(a_text)
    th = tanh(a)
    t = {"diagonal-p": 1 / (1 + exp(-2 * a)), "det-equals-tanh": th, "singular-value-tanh": th,
         "saturation-derivative": 1 - th * th}[r["claim"]]
    if t == 0:
        continue
    checked += 1
    c = num(r["computed"])
    what = "two-token %s %s %s" % (r["claim"], r["instance"], r["format"])
    if abs(c - t) > abs(t) / 4:
        fail("%s PASSES with %s where the truth is %s" % (what, r["computed"], mp.nstr(t, 6)))
    if abs(c - t) > num(r["tolerance"]) * (1 + mpf(10) ** -6):
        fail("%s PASSES with error %s above its tolerance %s" % (what, mp.nstr(abs(c - t), 6), r["tolerance"]))
    e = num(r["expected"])
    if e is None or abs(e - t) > abs(t) * mpf(10) ** -12:
        fail("%s: expected %r is not the true value %s" % (what, r["expected"], mp.nstr(t, 15)))

# ---- 3. the residual stack beyond the declared depth ---------------------------------------
mp.dps = 60
X0 = ["1", "0.5", "-1", "-0.5", "1.25", "0.75", "0.25", "-1", "0.5", "1.5", "0.25", "-0.25"]
Wqk = ["0.5", "0.25", "0", "-0.25", "0.75", "0.25", "0", "0.5", "-0.5"]
Wv_res = ["0.25", "0.125", "0", "0", "0.25", "0", "0.125", "0", "0.25"]
src = open(os.path.join(ROOT, "checks", "rank_collapse.cpp"), encoding="utf-8").read()
for name, vals in (("X0", X0), ("Wqk", Wqk), ("Wv_res", Wv_res)):
    if ("const std::vector<std::string> %s = {%s};" % (name, ", ".join('"%s"' % v for v in vals))) not in src:
        fail("checks/rank_collapse.cpp: the declared %s changed; update this test" % name)


def mat(r, c, v):
    return matrix([[mpf(v[i * c + j]) for j in range(c)] for i in range(r)])


def ratio(X):
    num_, den = mpf(0), mpf(0)
    for k in range(X.cols):
        mean = sum(X[i, k] for i in range(X.rows)) / X.rows
        for i in range(X.rows):
            num_ += (X[i, k] - mean) ** 2
            den += X[i, k] ** 2
    return sqrt(num_ / den)


X, W, V = mat(4, 3, X0), mat(3, 3, Wqk), mat(3, 3, Wv_res)
r_res = [ratio(X)]
for _ in range(20):
    S = X * W * X.T
    A = matrix(4, 4)
    for i in range(4):
        m = max(S[i, j] for j in range(4))
        e = [exp(S[i, j] - m) for j in range(4)]
        for j in range(4):
            A[i, j] = e[j] / sum(e)
    X = X + A * X * V
    r_res.append(ratio(X))
print("mpmath residual stack: r_7 %s, r_12 %s, r_20 %s" % (mp.nstr(r_res[7], 4), mp.nstr(r_res[12], 4), mp.nstr(r_res[20], 4)))
(rc,) = check_json(["rank-collapse"])
for r in rc["claims"]:
    if r["instance"] != "with residual" or r["tier"] != "enclosure" or r["verdict"] != "pass":
        continue
    m = re.search(r"r_l >= 1/10 (at every layer|for l = (\d+)\.\.(\d+))", r["statement"])
    if not m:
        continue
    checked += 1
    layers = range(0, 21) if m.group(1) == "at every layer" else range(int(m.group(2)), int(m.group(3)) + 1)
    bad = [l for l in layers if r_res[l] < mpf(1) / 10]
    if bad:
        fail("rank-collapse: '%s' (%s) passes, but r_%d = %s < 1/10 (mpmath)" % (r["claim"], r["statement"], bad[0], mp.nstr(r_res[bad[0]], 4)))
    if "every layer" in r["statement"] or "prevents" in r["claim"]:
        fail("rank-collapse: claim '%s' says more than its evidence (declared depths only): %s" % (r["claim"], r["statement"]))

if checked < 20:
    fail("only %d rows checked: the report's shape changed" % checked)
print("%d rows checked, %d failures" % (checked, len(failures)))
sys.exit(1 if failures else 0)
