"""The Python binding's overhead over the C++ oracle (README, Python).

    PYTHONPATH=build/python /usr/bin/python3 bench/python_binding.py [--n 1024] [--heads 4] [--repeat 5]

For (1, heads, n, 64) float32 Q, K, V (seeded normal), times the whole call attncert.attention(...)
(conversion in, the request, run_oracle, conversion out; numpy and torch inputs) and, inside the same
call, run_oracle alone (the summary's oracle_seconds); prints the median of each and the overhead.
"""
import argparse
import statistics
import time

import numpy as np

import attncert


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, a.heads, a.n, 64)).astype(np.float32) for _ in range(3))
    inputs = {"numpy": (q, k, v)}
    try:
        import torch

        inputs["torch"] = tuple(torch.from_numpy(x) for x in (q, k, v))
    except ImportError:
        pass
    for name, (tq, tk, tv) in inputs.items():
        whole, core = [], []
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            ref = attncert._reference(tq, tk, tv, causal="top-left", threads=a.threads, target="float32")
            out = attncert._like(ref.output(), tq, ref.target)
            whole.append(time.perf_counter() - t0)
            core.append(ref.summary()["oracle_seconds"])
            assert out.shape == (1, a.heads, a.n, 64)
        w, c = statistics.median(whole), statistics.median(core)
        print("%-5s (1, %d, %d, 64) float32 causal: call %.4f s, run_oracle %.4f s, overhead %.4f s = %.1f%%"
              % (name, a.heads, a.n, w, c, w - c, 100 * (w - c) / c))


if __name__ == "__main__":
    main()
