"""attncert.distributed on a LocalCluster of this machine: 1 worker against 2 (README, Running on a cluster).

    PYTHONPATH=build/python /usr/bin/python3 bench/distributed_scaling.py [--shape 2,8,768,64] [--kv-heads H]
        [--repeat 3] [--backward] [--rows-per-task N]

For seeded float32 Q, K, V of the given (b, h, n, d) shape, causal, binary32 target: the single-process
call attncert.attention (threads=1 and 2), then attncert.distributed.attention on LocalClusters of 1 and 2
worker processes (one thread each), the median wall time of each, every result checked bit for bit
against the single-process one.  With --backward, attention_vjp likewise (rows_per_task "auto" unless given:
units split into row blocks only when there are fewer than two per worker).  --kv-heads: K and V heads
(default h; 1 is multi-query attention: one unit per batch).
"""
import argparse
import statistics
import time

import numpy as np

import attncert
import attncert.distributed as ad


def median_time(f, repeat):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="2,8,768,64")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rows-per-task", type=int, default=None)
    ap.add_argument("--kv-heads", type=int, default=None)
    ap.add_argument("--backward", action="store_true")
    a = ap.parse_args()
    import distributed

    shape = tuple(int(x) for x in a.shape.split(","))
    rng = np.random.default_rng(0)
    kv_shape = (shape[0], a.kv_heads or shape[1]) + shape[2:]
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in (shape, kv_shape, kv_shape))
    do = rng.standard_normal(shape).astype(np.float32)
    kw = dict(causal="top-left")
    if a.backward:
        single = lambda t: attncert.attention_vjp(q, k, v, do, threads=t, **kw)  # noqa: E731
        dist = lambda c: ad.attention_vjp(q, k, v, do, client=c, rows_per_task=a.rows_per_task or "auto", **kw)  # noqa: E731
    else:
        single = lambda t: attncert.attention(q, k, v, threads=t, **kw)  # noqa: E731
        dist = lambda c: ad.attention(q, k, v, client=c, rows_per_task=a.rows_per_task or 1024, **kw)  # noqa: E731
    what = "attention_vjp" if a.backward else "attention"
    t1, ref = median_time(lambda: single(1), a.repeat)
    t2, _ = median_time(lambda: single(2), a.repeat)
    print("%s q %s, k/v %s float32 causal, single process: threads=1 %.3f s, threads=2 %.3f s"
          % (what, shape, kv_shape, t1, t2))
    flat = (lambda g: np.concatenate([x.ravel() for x in g if x is not None])) if a.backward else np.ravel
    for n in (1, 2):
        cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0",
                                           silence_logs=40)
        client = distributed.Client(cluster)
        dist(client)  # warm-up: workers import attncert
        t, out = median_time(lambda: dist(client), a.repeat)
        assert np.array_equal(flat(out), flat(ref), equal_nan=True), "not bit for bit"
        print("  distributed, %d worker%s: %.3f s (bit for bit: yes)" % (n, "" if n == 1 else "s", t))
        if n == 1:
            t_one = t
        else:
            print("  speed-up 2 workers / 1 worker: %.2f" % (t_one / t))
        client.close()
        cluster.close()


if __name__ == "__main__":
    main()
