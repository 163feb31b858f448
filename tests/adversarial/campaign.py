#!/usr/bin/python3
"""Adversarial campaign: attncert certify / verify-certificate against an independent truth.

Usage: campaign.py ATTNCERT_BINARY [--count N] [--jobs J] [--timeout SECONDS] [--no-regressions]

1. The regression claims of tests/data/adversarial/ (manifest.json records each one's truth,
   and this script first checks that its own oracle, truth.py, reproduces it), then N claims
   from the seeded generator (generate.py; categories listed there).
2. For each claim: the truth from truth.py (sympy + mpmath, no code shared with attncert),
   `attncert certify CLAIM --certificate C`, and `attncert verify-certificate C` on every
   CERTIFIED / REFUTED certificate.
3. Rules: the verdict equals the truth or is UNDECIDED; every certificate verifies (exit 0);
   certify never exits 2 on these (valid) claims and never exceeds the timeout.  A claim the
   oracle cannot decide is counted as skipped (its certificate is still verified).  The oracle
   is itself cross-checked: a claim it calls CERTIFIED must not be violated at any point of a
   60-digit grid (truth.numeric_counterexample), and it must reproduce the manifest.

Prints the seed (ATTNCERT_SEED overrides), one line per failure with the claim as one line of
JSON, the counts per category, and writes each failing claim to $ATTNCERT_ADVERSARIAL_OUT (or a
temporary directory, printed).  Exit 0 pass, 1 any failure, 77 skip (no sympy/mpmath).
"""
import argparse
import collections
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "adversarial")
sys.path.insert(0, HERE)
try:
    import sympy  # noqa: F401
    import mpmath  # noqa: F401
except ImportError as e:  # pragma: no cover
    print("SKIP:", e)
    sys.exit(77)

import generate  # noqa: E402
import truth as oracle  # noqa: E402

VERDICTS = {0: "CERTIFIED", 1: "REFUTED", 3: "UNDECIDED"}
ARGS = None


def run(cmd, timeout):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
        return p.returncode, p.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
    except subprocess.TimeoutExpired:
        return None, ["timeout"]


def check(job):
    """One claim end to end: a result dict (failures listed in 'failures')."""
    name, category, claim, expected = job
    res = {"name": name, "category": category, "claim": claim, "failures": []}
    t0 = time.time()
    try:
        res["truth"] = oracle.truth(claim)
    except oracle.Undecided as e:
        res["truth"] = None
        res["skip_reason"] = str(e)
    except Exception as e:  # an oracle bug is a failure of this test, reported as such
        res["truth"] = None
        res["failures"].append("oracle-error: %s: %s" % (type(e).__name__, e))
    if res["truth"] == "CERTIFIED":
        # the oracle's own sanity check: no grid point may visibly violate a true claim
        a = oracle.numeric_counterexample(claim)
        if a is not None:
            res["failures"].append("oracle-inconsistent: violated numerically at a = %s" % a)
    if expected is not None and res["truth"] != expected:
        res["failures"].append("oracle-disagrees-with-manifest: %s != %s" % (res["truth"], expected))
    res["truth_seconds"] = time.time() - t0
    with tempfile.TemporaryDirectory(prefix="attncert-adv-") as tmp:
        cpath = os.path.join(tmp, "claim.json")
        cert = os.path.join(tmp, "claim.cert.json")
        with open(cpath, "w") as f:
            json.dump(claim, f)
        rc, err = run([ARGS.binary, "certify", cpath, "--certificate", cert], ARGS.timeout)
        if rc is None:
            res["verdict"] = "TIMEOUT"
            res["failures"].append("timeout")
            return res
        res["verdict"] = VERDICTS.get(rc, "EXIT%d" % rc)
        if rc not in VERDICTS:
            res["failures"].append("certify-exit-%d: %s" % (rc, err[0]))
            return res
        if rc in (0, 1):
            if res["truth"] is not None and res["verdict"] != res["truth"]:
                res["failures"].append("false-verdict")
            if not os.path.exists(cert):
                res["failures"].append("no-certificate")
                return res
            vrc, verr = run([ARGS.binary, "verify-certificate", cert], ARGS.timeout)
            res["verify"] = vrc
            if vrc != 0:
                res["failures"].append("invalid-certificate (verify exit %s: %s)" % (vrc, verr[0]))
    return res


def jobs():
    out = []
    if not ARGS.no_regressions:
        with open(os.path.join(DATA, "manifest.json")) as f:
            manifest = json.load(f)
        for entry in manifest["claims"]:
            with open(os.path.join(DATA, entry["file"])) as f:
                claim = json.load(f)
            out.append((entry["file"], "regression", claim, entry["truth"]))
    for i in range(ARGS.count):
        category, claim = generate.claim(ARGS.seed, i)
        out.append(("seed %d #%d" % (ARGS.seed, i), category, claim, None))
    return out


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--count", type=int, default=80)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--no-regressions", action="store_true")
    ARGS = ap.parse_args()
    ARGS.seed = int(os.environ.get("ATTNCERT_SEED", "20261211"))
    print("seed %d (set ATTNCERT_SEED to override); %d generated claims" % (ARGS.seed, ARGS.count), flush=True)
    outdir = os.environ.get("ATTNCERT_ADVERSARIAL_OUT") or tempfile.mkdtemp(prefix="attncert-adversarial-")
    t0 = time.time()
    work = jobs()
    if ARGS.jobs > 1:
        with multiprocessing.get_context("fork").Pool(ARGS.jobs, initializer=_init, initargs=(ARGS,)) as pool:
            results = pool.map(check, work, chunksize=1)
    else:
        results = [check(j) for j in work]
    counts = collections.Counter()
    per_cat = collections.defaultdict(collections.Counter)
    fails = collections.Counter()
    nfail = 0
    for r in results:
        cat = r["category"]
        counts["claims"] += 1
        counts[r.get("verdict", "?")] += 1
        per_cat[cat]["claims"] += 1
        per_cat[cat][r.get("verdict", "?")] += 1
        if r["truth"] is None:
            counts["skipped"] += 1
            per_cat[cat]["skipped"] += 1
        elif r.get("verdict") == r["truth"]:
            counts["matches"] += 1
        for f in r["failures"]:
            kind = f.split(":")[0].split(" (")[0]
            fails[kind] += 1
            per_cat[cat][kind] += 1
        if r["failures"]:
            nfail += 1
            os.makedirs(outdir, exist_ok=True)
            fname = os.path.join(outdir, "fail-%03d-%s.json" % (nfail, cat))
            with open(fname, "w") as f:
                json.dump(r["claim"], f, indent=1)
            print("FAIL [%s] %s: %s; truth %s, verdict %s; saved %s; claim %s" % (
                cat, r["name"], "; ".join(r["failures"]), r["truth"], r.get("verdict"),
                os.path.basename(fname), json.dumps(r["claim"], separators=(",", ":"))), flush=True)
    print("claims %d: certified %d, refuted %d, undecided %d, matches %d, false verdicts %d, "
          "invalid certificates %d, skipped %d, other failures %d (%.1f s)" % (
              counts["claims"], counts["CERTIFIED"], counts["REFUTED"], counts["UNDECIDED"],
              counts["matches"], fails["false-verdict"], fails["invalid-certificate"], counts["skipped"],
              sum(v for k, v in fails.items() if k not in ("false-verdict", "invalid-certificate")),
              time.time() - t0))
    for cat in sorted(per_cat):
        c = per_cat[cat]
        extra = ", ".join("%s %d" % (k, v) for k, v in sorted(c.items())
                          if k not in ("claims", "CERTIFIED", "REFUTED", "UNDECIDED", "skipped"))
        print("  %-13s %4d claims: certified %d, refuted %d, undecided %d, skipped %d%s" % (
            cat, c["claims"], c["CERTIFIED"], c["REFUTED"], c["UNDECIDED"], c["skipped"],
            ("; " + extra) if extra else ""))
    if nfail:
        print("%d failing claims written to %s" % (nfail, outdir))
        return 1
    print("pass")
    return 0


def _init(args):
    global ARGS
    ARGS = args


if __name__ == "__main__":
    sys.exit(main())
