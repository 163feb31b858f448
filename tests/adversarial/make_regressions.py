#!/usr/bin/python3
"""Writes tests/data/adversarial/*.json and manifest.json (the regression claims of issue 11).

Each claim's truth is written by hand below and re-derived by truth.py here (and again by
campaign.py on every run); this script refuses to write a claim whose truth disagrees.
"""
import json
import os
import sys

import mpmath

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from truth import truth  # noqa: E402

OUT = os.path.join(HERE, "..", "data", "adversarial")

MIN = {"S": [[0, 1, 2]], "V": [[0], [-1], [2]]}  # (AV)(a) = e^a (2e^a - 1)/(1 + e^a + e^2a)
ENTRY = {"kind": "output_value", "object": "output", "row": 0, "col": 0}
RANK_OUT = {"kind": "rank", "object": "output"}
GOLDEN4 = [[-2, 1, 0, -1], [2, -2, -2, 0], [2, 0, 1, 0], [0, 0, 0, 0]]  # det ~ (u^2+u-1)(u-1)^3(u+1)(u^2+u+1)
DROP2 = {"S": [[0, 1]], "V": [[2], [-1]]}  # (AV) = (2 - u)/(1 + u): zero at u = 2 (a = log 2)
TANGENT = {"S": [[0, 1, 2]], "V": [["19/2"], ["-59/2"], ["51/2"]]}  # (AV) - 1/2 = (5u - 3)^2/D
RESIDUAL = {"S": [[1, -1], [-1, 1]], "V": [[1, 0], [0, 1]], "X": [[1, 1], [1, 1]]}  # det ~ tanh a

mpmath.mp.dps = 400
LOG2 = mpmath.log(2)


def near(x, side, exp=300):
    return mpmath.nstr(x + side * mpmath.mpf(10) ** -exp, exp + 25, strip_zeros=False)


def claim(title, objects, family, quantity, relation, value, **extra):
    c = {"title": title, "objects": objects, "family": family, "quantity": quantity,
         "relation": relation, "value": value}
    c.update(extra)
    return c


CLAIMS = [
    ("output-value-negative-range", "REFUTED", claim(
        "issue 11: (AV)(a) = e^a(2e^a - 1)/(1 + e^a + e^2a) >= 0 on (-1, 0): false for a < -log 2",
        MIN, {"range": "(-1, 0)"}, ENTRY, ">=", 0)),
    ("output-value-negative-point", "REFUTED", claim(
        "the same entry at a = -1 (u = 1/e < 1/2): negative", MIN, {"at": "-1"}, ENTRY, ">=", 0)),
    ("output-rank-negative-range", "REFUTED", claim(
        "the same objects: rank AV = 1 on (-1, 0) is false, the rank is 0 at a = -log 2",
        MIN, {"range": "(-1, 0)"}, RANK_OUT, "=", 1)),
    ("output-rank-all-reals", "REFUTED", claim(
        "the same objects: rank AV = 1 on (-inf, inf) is false (drop at a = -log 2 = -0.693...)",
        MIN, {"range": "(-inf, inf)"}, RANK_OUT, "=", 1)),
    ("output-rank-end-just-above-drop", "CERTIFIED", claim(
        "rank AV = 1 on (-log 2 + 1e-300, 0): the drop lies 1e-300 outside the range",
        MIN, {"range": "(%s, 0)" % near(-LOG2, 1)}, RANK_OUT, "=", 1)),
    ("output-rank-end-just-below-drop", "REFUTED", claim(
        "rank AV = 1 on (-log 2 - 1e-300, 0): the drop lies 1e-300 inside the range",
        MIN, {"range": "(%s, 0)" % near(-LOG2, -1)}, RANK_OUT, "=", 1)),
    ("output-value-scaled-1e4", "REFUTED", claim(
        "the issue-11 claim with S * 10^4 and the range / 10^4 (the same function)",
        {"S": [[0, 10000, 20000]], "V": [[0], [-1], [2]]}, {"range": "(-1/10000, 0)"}, ENTRY, ">=", 0)),
    ("output-value-scaled-1e9", "REFUTED", claim(
        "the issue-11 claim with S * 10^9 and the range / 10^9 (the same function)",
        {"S": [[0, 1000000000, 2000000000]], "V": [[0], [-1], [2]]}, {"range": "(-1/1000000000, 0)"},
        ENTRY, ">=", 0)),
    ("attention-rank-golden-4x4", "REFUTED", claim(
        "4x4 attention whose det has the factor u^2 + u - 1: rank 4 on (-1, 0) is false at a = -log(phi)",
        {"S": GOLDEN4}, {"range": "(-1, 0)"}, {"kind": "rank", "object": "attention"}, "=", 4)),
    ("attention-rank-golden-4x4-positive", "CERTIFIED", claim(
        "the same 4x4 attention: rank 4 on (0, inf) (its other roots are u = 1 and negative or complex)",
        {"S": GOLDEN4}, {"range": "(0, inf)"}, {"kind": "rank", "object": "attention"}, "=", 4)),
    ("residual-rank-far-negative", "CERTIFIED", claim(
        "rank(X + AV) = 2 on (-inf, -200): det = (1 + 2)(tanh a) vanishes only at a = 0",
        RESIDUAL, {"range": "(-inf, -200)"}, {"kind": "rank", "object": "residual"}, "=", 2)),
    ("residual-rank-through-zero", "REFUTED", claim(
        "the same residual: rank 2 on (-inf, inf) is false at a = 0",
        RESIDUAL, {"range": "(-inf, inf)"}, {"kind": "rank", "object": "residual"}, "=", 2)),
    ("rational-drop-u2-refuted", "REFUTED", claim(
        "V = (2, -1): (AV) = (2 - u)/(1 + u) vanishes at the rational u = 2: rank 1 on (0, 1) is false",
        DROP2, {"range": "(0, 1)"}, RANK_OUT, "=", 1)),
    ("rational-drop-u2-outside", "CERTIFIED", claim(
        "V = (2, -1): rank 1 on (1, inf); the rational root u = 2 (a = log 2) is outside",
        DROP2, {"range": "(1, inf)"}, RANK_OUT, "=", 1)),
    ("rational-drop-u2-value", "CERTIFIED", claim(
        "V = (2, -1): (AV) >= 0 on (-inf, 0.6931471805599453], an end 1e-17 below log 2",
        DROP2, {"range": "(-inf, 0.6931471805599453]"}, ENTRY, ">=", 0)),
    ("rational-drop-u2-value-refuted", "REFUTED", claim(
        "V = (2, -1): (AV) >= 0 on (-inf, 0.6931471805599454], an end 1e-17 above log 2",
        DROP2, {"range": "(-inf, 0.6931471805599454]"}, ENTRY, ">=", 0)),
    ("tangent-bound-at-3-5", "CERTIFIED", claim(
        "(AV) - 1/2 = (5u - 3)^2/(1 + u + u^2) >= 0: the entry equals its bound exactly at u = 3/5",
        TANGENT, {"range": "(-inf, inf)"}, ENTRY, ">=", "1/2")),
    ("tangent-bound-at-3-5-negative-range", "CERTIFIED", claim(
        "the same entry >= 1/2 on (-1, 0), which contains a = log(3/5)",
        TANGENT, {"range": "(-1, 0)"}, ENTRY, ">=", "1/2")),
    ("tangent-bound-at-3-5-refuted", "REFUTED", claim(
        "the same entry <= 1/2 on (-1, 0) is false (it equals 1/2 only at a = log(3/5))",
        TANGENT, {"range": "(-1, 0)"}, ENTRY, "<=", "1/2")),
]

if __name__ == "__main__":
    manifest = {"about": "regression claims of issue 11; 'truth' is the correct verdict "
                         "(certify may also answer UNDECIDED); written by tests/adversarial/make_regressions.py",
                "claims": []}
    for name, want, c in CLAIMS:
        got = truth(c)
        if got != want:
            sys.exit("%s: truth.py says %s, recorded %s" % (name, got, want))
        with open(os.path.join(OUT, name + ".json"), "w") as f:
            json.dump(c, f, indent=1)
            f.write("\n")
        manifest["claims"].append({"file": name + ".json", "truth": want})
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print("wrote %d claims" % len(CLAIMS))
