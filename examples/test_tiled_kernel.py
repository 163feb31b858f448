"""Tests of examples/tiled_kernel.py (a tiled online-softmax attention kernel in torch) against the exact attention.

Run:  ATTNCERT_CLI=$PWD/build/attncert PYTHONPATH=build/python /usr/bin/python3 -m pytest -q examples/test_tiled_kernel.py

The kernel is graded by attncert.testing.assert_attention_close with its defaults: FlashAttention's own rule
(flash: max |c - o| <= 2 max |b - o| + fudge, o the exact attention, b attncert's default baseline, the plain
attention computed by torch in the kernel's dtype).  Conventions: causal="bottom-right" is FlashAttention's
causal=True, window=(left, right) is FlashAttention's window_size, -1 unbounded.  float32 and bfloat16 only:
torch 1.13 has no float16 matmul on the CPU.

The correct kernel passes everywhere; each of its two bugs (bug="window-off-by-one", bug="no-rescale") fails,
and the failure names the rule and an element the bug changed.
"""
import math
import re

import pytest

torch = pytest.importorskip("torch")
from attncert.testing import assert_attention_close  # noqa: E402
from tiled_kernel import tiled_attention  # noqa: E402  (pytest puts examples/ on sys.path)

B, NQ, NK, D = 2, 128, 256, 64  # n_q < n_k: the bottom-right alignment matters; 4 key blocks of 64
DECISIVE = re.compile(r"decisive element at \(b,h,i,k\) = \((\d+), (\d+), (\d+), (\d+)\)")


def make_inputs(dtype, hq=4, hkv=4, seed=0):
    torch.manual_seed(seed)
    q = torch.randn(B, hq, NQ, D, dtype=dtype)
    k = torch.randn(B, hkv, NK, D, dtype=dtype)
    v = torch.randn(B, hkv, NK, D, dtype=dtype)
    return q, k, v


def decisive_element(message):
    """The (b, h, i, k) index the failure names (k: the feature index of the output)."""
    m = DECISIVE.search(message)
    assert m, message
    return tuple(int(x) for x in m.groups())


def check_failure_message(message, dtype):
    assert "attention output is not close to the exact attention output under rule flash" in message
    assert "k = 2" in message and "the default rule" in message
    assert "baseline: the default, attncert.testing.default_baseline" in message
    assert "computed by torch in %s" % str(dtype).replace("torch.", "") in message
    assert "worst ulp error at (b,h,i,k) = (" in message
    return decisive_element(message)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("window", [(-1, -1), (48, 16)], ids=["nowin", "win48_16"])
@pytest.mark.parametrize("heads", [(4, 4), (4, 1)], ids=["mha", "mqa"])
def test_tiled_kernel_passes(dtype, causal, window, heads):
    q, k, v = make_inputs(dtype, *heads)
    out = tiled_attention(q, k, v, causal=causal, window=window)
    assert_attention_close(out, q, k, v, causal="bottom-right" if causal else None,
                           window=window if window != (-1, -1) else None)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_window_off_by_one_is_caught(dtype):
    # A window with a finite left side that starts inside the sequence: with (48, 0) and n_k - n_q = 128 every
    # row's left edge i + 128 - 48 is a real key, so every row loses one key.  (With left = -1, or a left side
    # wider than every row's distance to key 0, the bug is invisible.)
    left = 48
    q, k, v = make_inputs(dtype, 4, 2)
    out = tiled_attention(q, k, v, causal=True, window=(left, 0), bug="window-off-by-one")
    with pytest.raises(AssertionError) as e:
        assert_attention_close(out, q, k, v, causal="bottom-right", window=(left, 0))
    b, h, i, c = check_failure_message(str(e.value), dtype)
    assert i + NK - NQ - left >= 0  # a row whose left edge is a key
    good = tiled_attention(q, k, v, causal=True, window=(left, 0))
    assert out[b, h, i, c] != good[b, h, i, c]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_no_rescale_is_caught(dtype):
    # Random inputs with 4 key blocks: in most rows the running max grows after the first block, and the
    # un-rescaled accumulator overweights the earlier blocks by exp(m_new - m_old).  (With n_k <= block_k,
    # one key block, the bug is invisible: see the next test.)
    q, k, v = make_inputs(dtype)
    out = tiled_attention(q, k, v, bug="no-rescale")
    with pytest.raises(AssertionError) as e:
        assert_attention_close(out, q, k, v)
    b, h, i, _ = check_failure_message(str(e.value), dtype)
    s = (q[b, h, i].float() @ k[b, h].float().T) / math.sqrt(D)  # the named row's scores
    block_max = s.view(-1, 64).amax(-1)
    assert block_max[0] < block_max.max()  # its running max grew after the first key block


def test_no_rescale_needs_several_key_blocks():
    # The pitfall of a test too small for its kernel: with a single key block the running max never grows,
    # the buggy kernel computes exactly what the correct one does, and it passes.
    q, k, v = make_inputs(torch.float32)
    out = tiled_attention(q, k, v, block_k=NK, bug="no-rescale")
    assert torch.equal(out, tiled_attention(q, k, v, block_k=NK))
    assert_attention_close(out, q, k, v)
