"""The certified oracle against PyTorch's float64 attention and its autograd, in one process, in one run.

    /usr/bin/python3 bench/oracle_vs_torch.py [--shape 1 8 1024 64] [--reps 5] [--threads 1]

Q, K, V and dO float64 N(0, 1) (NumPy seed 1) of shape (b, h, n, d), scale 1/sqrt(d), no mask, binary64
target.  Timed (attncert's result cache cleared before each call), interleaved, best of --reps, on --threads threads for both sides (torch.set_num_threads):
 * forward:  attncert.attention(q, k, v) on NumPy arrays (every element correctly rounded, certified), and
   torch's float64 scaled dot-product attention (torch 2.x: F.scaled_dot_product_attention; torch 1.13, what
   Debian 12 ships: its private F._scaled_dot_product_attention; else softmax(q k^T * scale) v written out);
 * backward: attncert.attention_vjp(q, k, v, do) (dq, dk, dv correctly rounded), and torch's autograd of the
   same float64 forward (the forward inside the timed region, as attention_vjp recomputes it too).
Prints each time and the ratios (issue 34's targets: forward <= 3x, backward <= 3x torch float64).  The
attncert side includes converting the arrays in and the results out; the inputs are made once.
"""
import argparse
import time

import numpy as np
import torch

import attncert
import attncert.testing


def best(fn, reps):
    t = float("inf")
    for _ in range(reps):
        attncert.testing.clear_cache()  # attention() and attention_vjp() remember results: time the computation
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", type=int, nargs=4, default=[1, 8, 1024, 64], metavar=("B", "H", "N", "D"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    b, h, n, d = args.shape
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(1)
    q, k, v, do = (rng.standard_normal((b, h, n, d)) for _ in range(4))
    tq, tk, tv, tdo = (torch.from_numpy(a) for a in (q, k, v, do))
    scale = 1.0 / np.sqrt(d)
    F = torch.nn.functional
    sdpa, name = getattr(F, "scaled_dot_product_attention", None), "F.scaled_dot_product_attention"
    if sdpa is None and hasattr(F, "_scaled_dot_product_attention"):
        sdpa, name = (lambda x, y, z: F._scaled_dot_product_attention(x, y, z)[0]), "F._scaled_dot_product_attention"

    def torch_forward(x, y, z):
        if sdpa is not None:
            return sdpa(x, y, z)
        return torch.softmax((x @ y.transpose(-2, -1)) * scale, dim=-1) @ z

    def torch_backward():
        x, y, z = (a.clone().requires_grad_(True) for a in (tq, tk, tv))
        out = torch_forward(x, y, z)
        out.backward(tdo)
        return x.grad, y.grad, z.grad

    with torch.no_grad():
        ref = torch_forward(tq, tk, tv).numpy()
    got = attncert.attention(q, k, v, threads=args.threads)
    assert np.max(np.abs(got - ref)) < 1e-12, "torch and attncert disagree beyond float64 noise"

    times = {"fwd attncert": [], "fwd torch": [], "bwd attncert": [], "bwd torch": []}
    for _ in range(args.reps):  # interleaved
        times["fwd attncert"].append(best(lambda: attncert.attention(q, k, v, threads=args.threads), 1))
        with torch.no_grad():
            times["fwd torch"].append(best(lambda: torch_forward(tq, tk, tv), 1))
        times["bwd attncert"].append(best(lambda: attncert.attention_vjp(q, k, v, do, threads=args.threads), 1))
        times["bwd torch"].append(best(torch_backward, 1))
    t = {key: min(vals) for key, vals in times.items()}
    print("shape %s, %d thread(s), torch %s (%s), best of %d" % (
        (b, h, n, d), args.threads, torch.__version__, name if sdpa is not None else "softmax(q k^T) v", args.reps))
    print("| pass | attncert (certified) | torch float64 | ratio |")
    print("|---|---|---|---|")
    print("| forward | %.3f s | %.4f s | %.1f |" % (t["fwd attncert"], t["fwd torch"], t["fwd attncert"] / t["fwd torch"]))
    print("| backward (with its forward) | %.3f s | %.4f s | %.1f |" % (
        t["bwd attncert"], t["bwd torch"], t["bwd attncert"] / t["bwd torch"]))


if __name__ == "__main__":
    main()
