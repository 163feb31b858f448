"""A kernel's test file as a kernel repository would write it: copy it, replace `my_attention` by your kernel.

Run:  /usr/bin/python3 -m pytest -q examples/test_my_kernel.py

`my_attention` is a toy "flash" kernel in torch: blocks of keys, an online softmax with float32 running
max / sum / accumulator, the output cast to the input dtype at the end.  It is graded against the exact
attention by attncert under FlashAttention's own rule: its error must be at most twice that of a plain
implementation in the input dtype (the baseline), plus nothing.  Its gradients (torch.autograd through
the toy kernel) are graded the same way with k = 3, FlashAttention's factor for gradients.
"""
import math

import pytest

torch = pytest.importorskip("torch")
from attncert.testing import assert_attention_close, assert_attention_grads_close  # noqa: E402


def allowed(nq, nk, causal, window):
    """(n_q, n_k) keys allowed: bottom-right aligned causal mask and sliding window (-1 = unbounded)."""
    i = torch.arange(nq).view(-1, 1) + (nk - nq)
    j = torch.arange(nk).view(1, -1)
    ok = torch.ones(nq, nk, dtype=torch.bool)
    if causal:
        ok &= j <= i
    if window[0] >= 0:
        ok &= j >= i - window[0]
    if window[1] >= 0:
        ok &= j <= i + window[1]
    return ok


def my_attention(q, k, v, causal=False, window=(-1, -1), block=16):
    """The kernel under test: (b, h_q, n_q, d) x (b, h_kv, n_k, d) -> (b, h_q, n_q, d_v), bottom-right aligned."""
    b, hq, nq, d = q.shape
    hkv, nk = k.shape[1], k.shape[2]
    k = k.repeat_interleave(hq // hkv, dim=1).float()
    v = v.repeat_interleave(hq // hkv, dim=1).float()
    qf = q.float() * (1.0 / math.sqrt(d))
    m = torch.full((b, hq, nq, 1), -math.inf)
    s = torch.zeros((b, hq, nq, 1))
    acc = torch.zeros((b, hq, nq, v.shape[-1]))
    mask = allowed(nq, nk, causal, window)
    for j0 in range(0, nk, block):
        scores = qf @ k[:, :, j0:j0 + block].transpose(-1, -2)
        scores = scores.masked_fill(~mask[:, j0:j0 + block], -math.inf)
        m_new = torch.maximum(m, scores.amax(-1, keepdim=True))
        shift = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)  # a block with no key yet
        p = torch.exp(scores - shift)
        corr = torch.exp(m - shift)
        s = s * corr + p.sum(-1, keepdim=True)
        acc = acc * corr + p @ v[:, :, j0:j0 + block]
        m = m_new
    return (acc / s).to(q.dtype)


def baseline_attention(q, k, v, causal=False, window=(-1, -1)):
    """A plain implementation in the input dtype (FlashAttention's attention_ref with upcast=False)."""
    hq, hkv, nq, nk = q.shape[1], k.shape[1], q.shape[2], k.shape[2]
    k = k.repeat_interleave(hq // hkv, dim=1)
    v = v.repeat_interleave(hq // hkv, dim=1)
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    return torch.softmax(scores.masked_fill(~allowed(nq, nk, causal, window), -math.inf), dim=-1) @ v


# float16 too on a GPU; the CPU builds of torch 1.13 have no float16 matmul for the baseline.
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window", [(-1, -1), (8, 0)])
@pytest.mark.parametrize("heads", [(4, 4), (4, 2), (4, 1)], ids=["mha", "gqa", "mqa"])
def test_my_kernel_forward(dtype, causal, window, heads):
    torch.manual_seed(0)
    hq, hkv = heads
    q = torch.randn(2, hq, 24, 32, dtype=dtype)
    k = torch.randn(2, hkv, 40, 32, dtype=dtype)
    v = torch.randn(2, hkv, 40, 32, dtype=dtype)
    out = my_attention(q, k, v, causal=causal, window=window)
    ref = baseline_attention(q, k, v, causal=causal, window=window)
    assert_attention_close(out, q, k, v, rule="flash", baseline=ref, causal="bottom-right" if causal else None,
                           window=window if window != (-1, -1) else None)


# bfloat16 only, as FlashAttention's own gradient tests (fp16/bf16): in float32 the kernel's and the
# baseline's gradient errors are both a few roundings, and their ratio against k = 3 depends on the
# BLAS's summation order (on one machine the mqa dq passes with the reference BLAS and needs k = 3.005
# with OpenBLAS), which says nothing about the kernel.
@pytest.mark.parametrize("dtype", [torch.bfloat16])
@pytest.mark.parametrize("heads", [(2, 2), (2, 1)], ids=["mha", "mqa"])
def test_my_kernel_backward(dtype, heads):
    torch.manual_seed(1)
    hq, hkv = heads
    q, k, v = (torch.randn(1, h, 16, 16, dtype=dtype, requires_grad=True) for h in (hq, hkv, hkv))
    do = torch.randn(1, hq, 16, 16, dtype=dtype)
    grads = torch.autograd.grad(my_attention(q, k, v, causal=True), (q, k, v), do)
    base = torch.autograd.grad(baseline_attention(q, k, v, causal=True), (q, k, v), do)
    assert_attention_grads_close(dict(zip(("dq", "dk", "dv"), grads)), q, k, v, do, rule="flash",
                                 baseline=dict(zip(("dq", "dk", "dv"), base)), causal="bottom-right")
