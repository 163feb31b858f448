"""The model audit's §5 measurement (issue 33; proofs/L6-attenuated-direction.md): for a token contrast the audit
encloses its gain through the exact attention, |A_p - A_q|_2 / sqrt(2), and says on which side of float32's NumPy
numerical-rank threshold it lies.  On the two-token head (scores a [[1, -1], [-1, 1]]) the gain is tanh(a), exactly:
a = 1e-9 is the negative control (discarded: a float32 numerical rank cuts the direction that carries the
contrast), a = 1 the strong direction (kept).  mpmath recomputes tanh(a) at 60 digits inside the enclosure."""
import dataclasses

import numpy as np
import pytest

import attncert
from attncert.capture import Capture, CapturedCall

mpmath = pytest.importorskip("mpmath")


def two_token(scale):
    q = np.array([[[[1.0], [-1.0]]]], np.float32)
    return CapturedCall(name="head a=" + scale, kind="scaled_dot_product_attention", dtype="float32", scale=scale,
                        mask_kind="none", q=q, k=q.copy(), v=np.eye(2, dtype=np.float32)[None, None],
                        output=np.zeros((1, 1, 2, 2), np.float32), weights=None)


@pytest.mark.parametrize("scale,side", [("1e-09", "discarded"), ("1", "kept"), ("1e-3", "kept")])
def test_gain_and_float32_side(scale, side):
    cap = Capture()
    cap.calls = [two_token(scale)]
    spec = {"objects": ["attention"], "allowable_output_error": 0.5, "target_contrast": {"tokens": [0, 1], "margin": 0}}
    d = attncert.audit(cap, spec).to_dict()
    tc = d["layers"][0]["heads"][0]["target_contrast"]
    mpmath.mp.dps = 60
    want = mpmath.tanh(mpmath.mpf(scale))
    lo, hi = mpmath.mpf(tc["gain"]["lo"]), mpmath.mpf(tc["gain"]["hi"])
    assert lo <= want <= hi and hi - lo <= mpmath.mpf("1e-14")  # the binary64 enclosure of A: a few ulps wide
    assert tc["float32_rank_threshold"] == side
    # the side follows from L6's bounds: n eps32 <= tau32 <= sqrt(max column sum) n eps32, n = 2, columns sum to 1
    tau = 2 * mpmath.mpf(2) ** -23
    assert (want < tau) == (side == "discarded")
    report = attncert.audit(cap, spec)
    assert "| " + side + " |" in report.markdown()  # the Markdown table says it too, and the HTML page
    page = report.html()
    assert "<h2>Target contrast</h2>" in page and "<td>" + side + "</td></tr>" in page
    assert "[%s, %s]" % (tc["gain"]["lo"], tc["gain"]["hi"]) in page


def test_no_gain_for_a_contrast_between_inputs():
    cap = Capture()
    c = two_token("1")
    cap.calls = [dataclasses.replace(c, q=np.concatenate([c.q, -c.q]), k=np.concatenate([c.k, -c.k]),
                                     v=np.concatenate([c.v, c.v]), output=np.zeros((2, 1, 2, 2), np.float32))]
    spec = {"objects": ["attention"], "allowable_output_error": 0.5, "target_contrast": {"batches": [0, 1], "margin": 0}}
    tc = attncert.audit(cap, spec).to_dict()["layers"][0]["heads"][0]["target_contrast"]
    assert "gain" not in tc and "float32_rank_threshold" not in tc
