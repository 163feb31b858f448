"""attncert.rank, certify, check and drift: the command line's analyses in process, as typed results.

Each result keeps the report the command line writes as JSON (`.report`, `.to_json()`), and names its
main facts as attributes; `repr()` is a readable summary.  Nothing is computed here: the C++ library
does the work (the GIL released), this module converts arguments and wraps reports.
"""
from __future__ import annotations

import json
import os

import numpy as np

from . import _args, _core

__all__ = ["rank", "certify", "check", "drift", "RankResult", "CertifyResult", "CheckResult", "DriftResult"]


def _list_text(x, what):
    if isinstance(x, str):
        return x
    try:
        return ",".join(str(e) for e in x)
    except TypeError:
        raise ValueError("%s: a comma-separated string or a list of names, got %r" % (what, x)) from None


def _matrix(x, what):
    if x is None:
        return None
    from . import _to_numpy  # torch tensors too

    a = _to_numpy(x, what)
    if a.ndim != 2:
        raise ValueError("%s: must be a 2-D array, got shape %s" % (what, a.shape))
    return a


class Result:
    """A report of the command line as a typed result: .report (the JSON as a dict), .to_json()."""

    def __init__(self, report):
        self.report = report

    def to_json(self, indent=2):
        return json.dumps(self.report, indent=indent)

    def __getitem__(self, key):
        return self.report[key]


class RankResult(Result):
    """attncert.rank: the exact rank interval [lo, hi] with witnesses, certified singular values, numerical ranks."""

    @property
    def exact_rank(self):
        e = self.report["exact_rank"]
        return (e["lo"], e["hi"])

    @property
    def numerical(self):
        """[{format, policy, rank, threshold, diverges}, ...] (approx tier: measurements)."""
        return self.report["numerical"]

    @property
    def divergences(self):
        return [m for m in self.numerical if m.get("diverges")]

    @property
    def singular_values(self):
        """Certified enclosures of the exact singular values (decreasing), as the report gives them."""
        return self.report["singular_values"]

    def __repr__(self):
        lo, hi = self.exact_rank
        r = str(lo) if lo == hi else "[%d, %d]" % (lo, hi)
        return "RankResult(object=%s, shape=%s, exact rank %s, %d numerical measurements, %d diverge)" % (
            self.report["settings"].get("object", "?"), tuple(self.report["settings"].get("shape", ())), r, len(self.numerical),
            len(self.divergences))


class CertifyResult(Result):
    """attncert.certify: CERTIFIED / REFUTED / UNDECIDED with a certificate the independent checker re-verified."""

    @property
    def verdict(self):
        return self.report["verdict"]

    @property
    def certificate(self):
        return self.report.get("certificate")

    @property
    def summary(self):
        return self.report.get("summary_text", "")

    def __bool__(self):
        return self.verdict == "CERTIFIED"

    def __repr__(self):
        return "CertifyResult(%s: %s)" % (self.verdict, self.summary.strip().splitlines()[0] if self.summary else "")


class CheckResult(Result):
    """attncert.check: the article's constructions, claims by verdict and numerical-rank divergences."""

    @property
    def totals(self):
        return self.report["summary"]

    @property
    def passed(self):
        t = self.totals
        return t.get("fail", 0) == 0 and t.get("undecided", 0) == 0

    @property
    def partial(self):
        """True when checks were not computed within max_seconds."""
        return bool(self.totals.get("partial", False))

    def text(self):
        """The command line's text report of the same checks."""
        return self._text

    def __repr__(self):
        t = self.totals
        return "CheckResult(%d checks: %s claims, %s pass, %s fail, %s undecided; %s divergences)" % (
            len(self.report.get("checks", [])), t.get("claims"), t.get("pass"), t.get("fail"), t.get("undecided"),
            t.get("divergences"))


class DriftResult(Result):
    """attncert.drift: per grid point the exact rank and each recipe's numerical ranks (and the caller's
    diagnostic), and the bisected intervals where they diverge."""

    @property
    def intervals(self):
        """{(recipe, policy): [(from, to), ...]}; the caller's diagnostic is policy "diagnostic:NAME"."""
        return {(d["recipe"], d["policy"]): [tuple(iv) for iv in d["intervals"]] for d in self.report["divergence"]}

    @property
    def a(self):
        return np.array(self.report["points"]["a"])

    @property
    def exact_rank(self):
        p = self.report["points"]
        return np.array(p["exact_rank_lo"]), np.array(p["exact_rank_hi"])

    def ranks(self, recipe, policy):
        """The numerical ranks of recipe × policy (or "diagnostic:NAME") at every grid point (None: not formed)."""
        for r in self.report["points"]["recipes"]:
            if r["recipe"] == recipe:
                return r["numerical_rank"][policy]
        raise KeyError(recipe)

    def __repr__(self):
        s = self.report["summary"]
        lines = ["DriftResult(%s, %d points, %d diverging, %d intervals)" % (
            self.report["inputs"].get("family", "?"), s["points"], s["diverging_points"], s["intervals"])]
        for (rc, pol), ivs in self.intervals.items():
            if ivs:
                lines.append("  %s %s: %s" % (rc, pol, ", ".join("[%.6g, %.6g]" % iv for iv in ivs)))
        return "\n".join(lines)


def rank(scores=None, *, q=None, k=None, v=None, x=None, scale=None, mask=None, object="attention",
         formats=None, policies="numpy,matlab,torch,lapack,eigen", max_bits=4096, seed=20261129, max_seconds=0,
         sigma_rel_width=0, deflate_max_k=64, deflate_seconds=120, threads=2):
    """The certified rank of one attention layer's scores, attention, output or residual (`attncert rank`).

    scores (n_q, n_k) used as given, or q (n_q, d) and k (n_k, d) with scale (None: 1/sqrt(d); a number at
    its exact binary value; a string is an exact rational); v, x for the output and residual objects; mask:
    None, "causal" or a boolean (n_q, n_k) array.  Array values are taken exactly.  formats None: the CLI's
    default list (binary16, bfloat16, binary32, binary64, mpfr256), mpfr256 left out above 256 rows or columns
    with a time estimate in .report["notes"]; naming formats runs them all.  max_seconds > 0 stops early
    (.report["partial"]); sigma_rel_width > 0 asks that relative width of every certified singular value.
    Above 128 rows, a square object's undecided smallest singular values escalate on a deflated subspace
    (at most deflate_max_k of them, 0: never; within deflate_seconds, 0: no budget), as --deflate-max-k and
    --deflate-seconds do; that escalation's products and the MPFI enclosures of the scores run on `threads`
    threads (the same enclosures as on one), as --threads does.  Returns a RankResult.
    """
    from . import _exact_text

    o = {"scores": _matrix(scores, "--scores"), "q": _matrix(q, "--q"), "k": _matrix(k, "--k"), "v": _matrix(v, "--v"),
         "x": _matrix(x, "--x"), "scale": None if scale is None else _exact_text(scale, "scale"),
         "object": _args.text(object, "object"),
         "formats": _list_text("binary16,bfloat16,binary32,binary64,mpfr256" if formats is None else formats, "formats"),
         "formats_explicit": formats is not None, "policies": _list_text(policies, "policies"),
         "max_bits": _args.limited(max_bits, "rank.max_bits", "max_bits"), "seed": _args.limited(seed, "seed"),
         "max_seconds": _args.real(max_seconds, "max_seconds", 0), "sigma_rel_width": _args.real(sigma_rel_width,
                                                                                                "sigma_rel_width", 0),
         "deflate_max_k": _args.limited(deflate_max_k, "deflate_max_k"),
         "deflate_seconds": _args.real(deflate_seconds, "deflate_seconds", 0),
         "threads": _args.limited(threads, "threads")}
    if mask is None:
        o["mask_kind"] = "none"
    elif isinstance(mask, str):
        o["mask_kind"] = mask
    else:
        o["mask_kind"] = "matrix"
        o["mask"] = _matrix(mask, "mask")
    return RankResult(json.loads(_core.rank_json(o)))


def certify(claim, *, max_bits=4096, max_seconds=60):
    """Certify a claim (`attncert certify`): a dict in the claim-file format of proofs/README.md, or a path to
    a claim file.  Relative matrix paths resolve against the claim file's folder (for a dict: the current
    folder).  Non-integer numbers are read as their decimal text (0.1 is 1/10).  Returns a CertifyResult:
    CERTIFIED and REFUTED come with a certificate that the independent checker has re-verified.  max_seconds
    (0: none) bounds the prover and that re-check together; past it the verdict is UNDECIDED with the reason."""
    if isinstance(claim, dict):
        text, base = json.dumps(claim), "."
    elif isinstance(claim, (str, os.PathLike)):
        path = os.fspath(claim)
        text, base = _core.read_claim_file(path), os.path.dirname(path) or "."
    else:
        raise ValueError("certify: claim must be a dict or a path to a claim file, got %s" % type(claim).__name__)
    lo, hi = _args.LIMITS["certify.max_seconds"]
    return CertifyResult(json.loads(_core.certify_json(text, base, _args.limited(max_bits, "certify.max_bits", "max_bits"),
                                                       _args.real(max_seconds, "max_seconds", lo, hi))))


def check(ids=None, *, formats=("binary64", "mpfr256"), policies="numpy,matlab,torch,lapack,eigen", seed=20261129,
          certify_bits=128, certify_max_bits=4096, max_seconds=0):
    """Run the article's constructions (`attncert check`): all, or the ids given.  Returns a CheckResult
    (.passed, .totals, .text() for the command line's text report).  max_seconds > 0 bounds the run
    (`check --max-seconds`): checks not finished within it are one undecided "not-computed" claim each,
    .partial is True and .passed False."""
    if isinstance(ids, str):
        ids = [ids]
    if ids is not None and not (isinstance(ids, (list, tuple)) and all(isinstance(i, str) for i in ids)):
        raise TypeError("ids: a check id (str) or a list of them, got %s" % _args._shown(ids))
    args = (list(ids or []), _list_text(formats, "formats"), _list_text(policies, "policies"),
            _args.limited(seed, "seed"), _args.limited(certify_bits, "certify_bits"),
            _args.limited(certify_max_bits, "certify_bits", "certify_max_bits"),
            _args.real(max_seconds, "max_seconds", 0, 1e7))
    report, text = _core.check_report(*args)
    r = CheckResult(json.loads(report))
    r._text = text
    return r


def _drift_options(family, start, stop, points, log, recipes, policies, object, seed, resolution, enclosures, max_bits,
                   grid=None, n=None, d=None, max_seconds=0):
    lo, hi = _args.LIMITS["drift.a"]
    return {"family": _args.text(family, "family"), "start": _args.real(start, "start", lo, hi),
            "stop": _args.real(stop, "stop", lo, hi), "points": _args.limited(points, "points"), "log": _args.flag(log, "log"),
            "recipes": _list_text(recipes, "recipes"), "policies": _list_text(policies, "policies"),
            "object": None if object is None else _args.text(object, "object"), "seed": _args.limited(seed, "seed"),
            "resolution": _args.real(resolution, "resolution", 0, 0.5, lo_open=True, hi_open=True),
            "enclosures": _args.flag(enclosures, "enclosures"),
            "max_bits": _args.limited(max_bits, "drift.max_bits", "max_bits"),
            "grid": None if grid is None else [float(a) for a in grid],
            "n": None if n is None else _args.limited(n, "drift.n", "n"),
            "d": None if d is None else _args.limited(d, "drift.n", "d"),
            "max_seconds": _args.real(max_seconds, "max_seconds", 0, 1e7)}


def _diagnostics(diagnostic):
    if diagnostic is None:
        diags = []
    elif callable(diagnostic):
        diags = [(getattr(diagnostic, "__name__", "user"), diagnostic)]
    elif isinstance(diagnostic, dict):
        diags = list(diagnostic.items())
    else:
        raise ValueError("diagnostic: a callable matrix -> rank, or a dict {name: callable}")
    for name, f in diags:
        if not callable(f):
            raise ValueError("diagnostic %r is not callable" % (name,))
    return [(str(n), f) for n, f in diags]


def drift(family="two-token", start=0.0, stop=1.0, points=101, log=False, recipes="fp16,bf16-fp32acc,fp32,fp64,mpfr256",
          policies="numpy,absolute:1e-6,relative:1e-3", diagnostic=None, *, object=None, seed=20261129,
          resolution=1e-9, enclosures=False, max_bits=4096, n=None, d=None, max_seconds=0, _grid=None):
    """Where numerical ranks leave the exact rank over the score scale a (`attncert drift`).

    diagnostic: a callable taking the formed matrix and returning a rank (e.g. numpy.linalg.matrix_rank), or a
    dict {name: callable}.  The matrix is a NumPy array in the dtype of the recipe's result (float64 for fp64,
    float32 for fp32; float32 holding the float16 / bfloat16 numbers of the 16-bit recipes, as NumPy's and
    PyTorch's SVDs need them upcast; float64 rounded for mpfrN), as a pipeline of that precision would hand
    it to its tool.  It is measured on every recipe
    next to the policies, as policy "diagnostic:NAME", with its own bisected divergence intervals.  This is
    the map of *your* tool, not of attncert's reading of its threshold formula.  enclosures=True adds the
    certified smallest singular values per point (slower).  n, d: tokens and head width (`--n`, `--d`; up to
    4096; None: the family's), as the CLI's.  max_seconds > 0 bounds the grid points (`--max-seconds`): past it
    no point is started and .report["summary"]["partial"] is True, the sweep covering the grid's first points.
    Returns a DriftResult.
    """
    o = _drift_options(family, start, stop, points, log, recipes, policies, object, seed, resolution, enclosures,
                       max_bits, _grid, n, d, max_seconds)
    return DriftResult(json.loads(_core.drift_json(o, _diagnostics(diagnostic))))
