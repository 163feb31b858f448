"""A tiled (FlashAttention-style) attention forward kernel for the CPU, in torch, with two optional bugs.

    out = tiled_attention(q, k, v, causal=True, window=(64, 0))

q (b, h_q, n_q, d), k (b, h_kv, n_k, d), v (b, h_kv, n_k, d_v), float32 or bfloat16 (torch 1.13 has no float16
matmul on the CPU); GQA/MQA when h_q is a multiple of h_kv (query head h reads kv head h // (h_q // h_kv)).

How it works.  The queries are cut into blocks of `block_q` rows and the keys into blocks of `block_k`.  For each
query block the key blocks are visited in order, keeping per row, in float32:

    m    the running maximum of the scores seen so far
    l    the running sum of exp(score - m)
    acc  the running sum of exp(score - m) * v

For a new key block with scores s (float32, already scaled by 1/sqrt(d) and masked to -inf), m_new =
max(m, rowmax(s)), p = exp(s - m_new), and everything accumulated against the old maximum is rescaled by
alpha = exp(m - m_new):  l = alpha * l + rowsum(p),  acc = alpha * acc + p @ v.  As FlashAttention does, p is
rounded to the input dtype before the p @ v product (accumulated in float32).  At the end o = acc / l, cast to
the input dtype once.  Rows that see no key at all give 0.  Key blocks that a query block cannot see (causal,
window) are skipped.

Masks (FlashAttention's conventions, both aligned to the bottom-right corner, i.e. query i sits at key position
i + n_k - n_q):
    causal=True        key j allowed for query i iff j <= i + n_k - n_q          (attncert: causal="bottom-right")
    window=(L, R)      key j allowed iff i + n_k - n_q - L <= j <= i + n_k - n_q + R; -1 is unbounded
                       (FlashAttention's window_size; attncert: window=(L, R))

The two bugs (bug=..., default None: the correct kernel):
    "window-off-by-one"  the left edge of the sliding window is written `i - left < j` where `i - left <= j`
                         belongs: every row whose window reaches its left edge sees one key too few.
    "no-rescale"         when the running max grows, the running sum l is rescaled by exp(m_old - m_new) but the
                         accumulator acc is not: the earlier key blocks keep too much weight in the output.  Only
                         rows whose maximum grows after their first key block are wrong.
"""
import math

import torch

BUGS = (None, "window-off-by-one", "no-rescale")


def _block_mask(q0, q1, k0, k1, nq, nk, causal, window, bug):
    """(q1 - q0, k1 - k0) bool: which keys k0..k1-1 the queries q0..q1-1 may attend to."""
    i = torch.arange(q0, q1).view(-1, 1) + (nk - nq)  # the query's position on the key axis (bottom-right)
    j = torch.arange(k0, k1).view(1, -1)
    ok = torch.ones(q1 - q0, k1 - k0, dtype=torch.bool)
    left, right = window
    if causal:
        ok &= j <= i
    if left >= 0:
        if bug == "window-off-by-one":
            ok &= i - left < j  # the typo: one key too few at the left edge
        else:
            ok &= i - left <= j
    if right >= 0:
        ok &= j <= i + right
    return ok


def tiled_attention(q, k, v, causal=False, window=(-1, -1), scale=None, block_q=64, block_k=64, bug=None):
    """softmax(scale * q k^T, masked) v by blocks with an online softmax; see the module's docstring."""
    if bug not in BUGS:
        raise ValueError("bug: one of %s, got %r" % (BUGS, bug))
    b, hq, nq, d = q.shape
    hkv, nk, dv = k.shape[1], k.shape[2], v.shape[3]
    if hq % hkv:
        raise ValueError("h_q = %d is not a multiple of h_kv = %d" % (hq, hkv))
    window = tuple(-1 if w is None else w for w in window)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    k = k.repeat_interleave(hq // hkv, dim=1)  # query head h reads kv head h // (h_q // h_kv)
    v = v.repeat_interleave(hq // hkv, dim=1)
    out = torch.empty(b, hq, nq, dv, dtype=q.dtype)
    for q0 in range(0, nq, block_q):
        q1 = min(q0 + block_q, nq)
        qb = q[:, :, q0:q1].float()
        m = torch.full((b, hq, q1 - q0, 1), -math.inf)   # running max
        l = torch.zeros(b, hq, q1 - q0, 1)               # running sum of exp(s - m)
        acc = torch.zeros(b, hq, q1 - q0, dv)            # running sum of exp(s - m) v
        for k0 in range(0, nk, block_k):
            k1 = min(k0 + block_k, nk)
            ok = _block_mask(q0, q1, k0, k1, nq, nk, causal, window, bug)
            if not ok.any():
                continue  # a block this query block cannot see
            s = (qb @ k[:, :, k0:k1].float().transpose(-1, -2)) * scale
            s = s.masked_fill(~ok, -math.inf)
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            m_safe = torch.where(m_new == -math.inf, torch.zeros_like(m_new), m_new)  # rows with no key yet
            p = torch.exp(s - m_safe)
            alpha = torch.exp(m - m_safe)  # 0 on the first block a row sees (m = -inf)
            l = alpha * l + p.sum(-1, keepdim=True)
            pv = p.to(q.dtype).float() @ v[:, :, k0:k1].float()  # p in the input dtype, accumulated in float32
            if bug == "no-rescale":
                acc = acc + pv  # forgot alpha * acc
            else:
                acc = alpha * acc + pv
            m = m_new
        o = torch.where(l > 0, acc / torch.where(l > 0, l, torch.ones_like(l)), torch.zeros_like(acc))
        out[:, :, q0:q1] = o.to(q.dtype)
    return out
