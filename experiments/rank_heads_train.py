#!/usr/bin/python3
"""Train the small nearest-neighbour transformers of `attncert check rank-heads-tradeoff` (proofs/L4 part H).

The task: N keys x_1 ... x_N and a query y, independent and uniform on S^(d-1) (d = 8); the target is the key with
the largest <x_i, y>; the loss is the squared error of the predicted vector, averaged.

The model (attention only, no normalization, no MLP; the same formula is evaluated in intervals by the check):
    tokens   X0 = [x_i, 0] for the keys (rows 0 .. N-1) and [y, 1] for the query (row N), width D = d + 1
    layer    X <- X + sum_h softmax_M((X Wq_h)(X Wk_h)^T) (X Wv_h)    Wq_h, Wk_h: D x r,  Wv_h: D x D
             (mask M: every token attends to the N keys, none to the query: the query is not a key)
    readout  prediction = X[N] Wr                                        Wr: D x d
Configurations: full rank (H = 1 head of rank r = d) against H = d/r heads of rank r (r = 1 and 2), 1 to 3 layers,
N = 4 and 16, seeds 0, 1, 2.  Every run is kept, whatever its loss.

With --positions (proofs/L4 part I) it trains the same model with learned positions instead: width
D = d + 1 + (N + 1) (content, query flag, N + 1 scratch coordinates that are zero in every input), tokens
[x_i, 0, 0] + P_i and [y, 1, 0] + P_N, the positions P_0 .. P_N learned and either concatenated (supported on the
scratch coordinates) or additive (supported on the content coordinates); 8 heads of rank 1, 1 and 2 layers,
N = 4 and 16, both encodings, seeds 0, 1, 2; written to checks/data/rank_heads_positions.inc.

Usage: /usr/bin/python3 experiments/rank_heads_train.py [--steps S] [--out FILE] [--only N,H,r,L,seed]
       /usr/bin/python3 experiments/rank_heads_train.py --positions [--steps S] [--out FILE] [--only ENC,N,L,seed]
It writes the weights (float32, exact hexadecimal literals) and each run's record as a C++ include file that the
check compiles in, and prints one line per run.  Runs are single-threaded and seeded (torch.manual_seed): on one
machine and torch version they repeat bit for bit; elsewhere they may differ in the last bits, which is why the
weights themselves are committed.
"""
import argparse
import functools
import time

import numpy as np
import torch

D_CONTENT = 8
WIDTH = D_CONTENT + 1
TEST_INPUTS = 200
TEST_RADIUS = 4096
LR = 3e-2
MASK64 = (1 << 64) - 1


def splitmix64(state):
    """A SplitMix64 stream as a Python generator (the check's rht::splitmix64)."""
    while True:
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        yield z ^ (z >> 31)


@functools.lru_cache(maxsize=None)
def test_set(n_keys, seed):
    """The fixed test set: lattice points of radius 4096 from SplitMix64(seed) (coordinates (next >> 32) mod 8193 -
    4096, redrawn unless 0 < |z|^2 <= 4096^2), each rounded to binary64 as z_i / sqrt(|z|^2) (both operations
    correctly rounded); per input the query, then the keys.  Returns (queries (M, d), keys (M, N, d)) in float64.
    The check draws the same points (it also redraws an input whose nearest key is tied, which has not happened)."""
    g = splitmix64(seed)

    def point():
        while True:
            z = np.array([((next(g) >> 32) % (2 * TEST_RADIUS + 1)) - TEST_RADIUS for _ in range(D_CONTENT)], dtype=np.int64)
            n2 = int(z @ z)
            if 0 < n2 <= TEST_RADIUS * TEST_RADIUS:
                return z.astype(np.float64) / np.sqrt(np.float64(n2))

    ys, xs = [], []
    for _ in range(TEST_INPUTS):
        ys.append(point())
        xs.append([point() for _ in range(n_keys)])
    return np.array(ys), np.array(xs)


def test_seed(n_keys):
    return 20261205 + n_keys


ENCODINGS = ("none", "additive", "concatenated")


def width_of(encoding, n_keys):
    return WIDTH if encoding == "none" else WIDTH + n_keys + 1


def support_of(encoding, n_keys):
    """The coordinates a position may use: the content (additive) or the N + 1 scratch coordinates (concatenated)."""
    m = torch.zeros(n_keys + 1, width_of(encoding, n_keys))
    if encoding == "additive":
        m[:, :D_CONTENT] = 1
    elif encoding == "concatenated":
        m[:, WIDTH:] = 1
    return m


class Model(torch.nn.Module):
    def __init__(self, heads, rank, layers, encoding="none", n_keys=0):
        super().__init__()
        D = width_of(encoding, n_keys)
        self.q = torch.nn.Parameter(torch.randn(layers, heads, D, rank) / D ** 0.5)
        self.k = torch.nn.Parameter(torch.randn(layers, heads, D, rank) / D ** 0.5)
        self.v = torch.nn.Parameter(0.1 * torch.randn(layers, heads, D, D) / D ** 0.5)
        self.r = torch.nn.Parameter(torch.randn(D, D_CONTENT) / D ** 0.5)
        self.heads, self.layers, self.encoding, self.width = heads, layers, encoding, D
        if encoding != "none":
            # Created after the other weights, so a model without positions draws exactly as before.
            self.support = support_of(encoding, n_keys)
            self.p = torch.nn.Parameter(torch.randn(n_keys + 1, D) * self.support / self.support.sum(dim=1, keepdim=True) ** 0.5)

    def positions(self):
        return self.p * self.support

    def forward(self, y, x):
        B, N, _ = x.shape
        pad = self.width - D_CONTENT - 1
        keys = torch.cat([x, torch.zeros(B, N, 1 + pad, dtype=x.dtype)], dim=2)
        query = torch.cat([y, torch.ones(B, 1, dtype=y.dtype), torch.zeros(B, pad, dtype=y.dtype)], dim=1)[:, None, :]
        X = torch.cat([keys, query], dim=1)
        if self.encoding != "none":
            X = X + self.positions().to(X.dtype)[None, :, :]
        for layer in range(self.layers):
            Q = torch.einsum("bnd,hdr->bhnr", X, self.q[layer].to(X.dtype))
            K = torch.einsum("bnd,hdr->bhnr", X, self.k[layer].to(X.dtype))
            V = torch.einsum("bnd,hde->bhne", X, self.v[layer].to(X.dtype))
            S = Q @ K.transpose(2, 3)
            S[:, :, :, N] = float("-inf")  # every token attends to the keys only (the query is not a key)
            A = torch.softmax(S, dim=3)
            X = X + (A @ V).sum(dim=1)
        return X[:, N, :] @ self.r.to(X.dtype)

    def flat(self):
        """The weights in the check's order: the positions (N + 1 rows of D, zero off their support; models with
        positions only), per layer, per head Wq, Wk, Wv (row-major), then Wr."""
        parts = [self.positions()] if self.encoding != "none" else []
        for layer in range(self.layers):
            for h in range(self.heads):
                parts += [self.q[layer, h], self.k[layer, h], self.v[layer, h]]
        parts.append(self.r)
        return np.concatenate([p.detach().numpy().astype(np.float32).ravel() for p in parts])


def batch(n_keys, size, gen):
    y = torch.randn(size, D_CONTENT, generator=gen)
    x = torch.randn(size, n_keys, D_CONTENT, generator=gen)
    y = y / y.norm(dim=1, keepdim=True)
    x = x / x.norm(dim=2, keepdim=True)
    target = x[torch.arange(size), (x @ y[:, :, None])[:, :, 0].argmax(dim=1)]
    return y, x, target


def train(n_keys, heads, rank, layers, seed, steps, encoding="none"):
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(1000 + seed)
    model = Model(heads, rank, layers, encoding, n_keys)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    t0 = time.time()
    losses = []
    for _ in range(steps):
        y, x, target = batch(n_keys, 128, gen)
        loss = ((model(y, x) - target) ** 2).sum(dim=1).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    seconds = time.time() - t0
    train_loss = float(np.mean(losses[-100:]))
    # The float32 estimate a user would report: the test set rounded to float32, the model in float32.
    ys, xs = test_set(n_keys, test_seed(n_keys))
    target = xs[np.arange(len(ys)), np.einsum("mnd,md->mn", xs, ys).argmax(axis=1)]
    with torch.no_grad():
        pred = model(torch.tensor(ys, dtype=torch.float32), torch.tensor(xs, dtype=torch.float32)).numpy().astype(np.float64)
    float32_test = float(((pred - target) ** 2).sum(axis=1).mean())
    return model, train_loss, float32_test, seconds


def configs(only):
    for n_keys in (4, 16):
        for heads, rank in ((1, D_CONTENT), (D_CONTENT, 1), (D_CONTENT // 2, 2)):
            for layers in (1, 2, 3):
                for seed in (0, 1, 2):
                    c = (n_keys, heads, rank, layers, seed)
                    if only is None or c == only:
                        yield c


def position_configs(only):
    for encoding in ("concatenated", "additive"):
        for n_keys in (4, 16):
            for layers in (1, 2):
                for seed in (0, 1, 2):
                    c = (encoding, n_keys, layers, seed)
                    if only is None or c == only:
                        yield c


def write_positions(path, steps, records):
    with open(path, "w", encoding="utf-8") as f:
        f.write("// Generated by experiments/rank_heads_train.py --positions (--steps %d): do not edit.  The trained models of\n" % steps)
        f.write("// proofs/L4 part I, weights in float32 as exact hexadecimal literals (order: the N + 1 positions of width\n")
        f.write("// D = 10 + N, then per layer, per head Wq, Wk, Wv row-major, then Wr).  Fields: encoding (1 additive,\n")
        f.write("// 2 concatenated), N, H, r, layers, seed, steps, train loss, float32 test MSE, seconds, weights.\n")
        for i, rec in enumerate(records):
            w = rec[-1]
            f.write("static const float positions_w%d[] = {\n" % i)
            for j in range(0, len(w), 8):
                f.write("  " + ", ".join(float(v).hex() + "f" for v in w[j:j + 8]) + ",\n")
            f.write("};\n")
        f.write("static const trained_positions_model positions_models[] = {\n")
        for i, rec in enumerate(records):
            encoding, n_keys, heads, rank, layers, seed, train_loss, f32, seconds, w = rec
            f.write("  {%d, %d, %d, %d, %d, %d, %d, %.17g, %.17g, %.1f, positions_w%d, %d},\n"
                    % (ENCODINGS.index(encoding), n_keys, heads, rank, layers, seed, steps, train_loss, f32, seconds, i, len(w)))
        f.write("};\n")


def main_positions(a):
    only = None
    if a.only:
        e, n, l, s = a.only.split(",")
        only = (e, int(n), int(l), int(s))
    records = []
    for encoding, n_keys, layers, seed in position_configs(only):
        model, train_loss, f32, seconds = train(n_keys, D_CONTENT, 1, layers, seed, a.steps, encoding)
        print(f"{encoding} N={n_keys} H={D_CONTENT} r=1 layers={layers} seed={seed}: train loss {train_loss:.5f}, "
              f"float32 test MSE {f32:.5f}, {seconds:.1f} s", flush=True)
        records.append((encoding, n_keys, D_CONTENT, 1, layers, seed, train_loss, f32, seconds, model.flat()))
    if only is None:
        write_positions(a.out or "checks/data/rank_heads_positions.inc", a.steps, records)
        print("wrote", a.out or "checks/data/rank_heads_positions.inc")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=1500, help="Adam steps per run (batch 128; default 1500)")
    ap.add_argument("--out", default=None,
                    help="the C++ include file to write (default checks/data/rank_heads_trained.inc, or "
                         "checks/data/rank_heads_positions.inc with --positions)")
    ap.add_argument("--only", default=None,
                    help="one run N,H,r,L,seed, or ENC,N,L,seed with --positions (ENC additive or concatenated); "
                         "printed, not written")
    ap.add_argument("--positions", action="store_true", help="train the models of proofs/L4 part I (learned positions)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.positions:
        main_positions(a)
        return
    a.out = a.out or "checks/data/rank_heads_trained.inc"
    only = tuple(int(v) for v in a.only.split(",")) if a.only else None
    records = []
    for n_keys, heads, rank, layers, seed in configs(only):
        model, train_loss, f32, seconds = train(n_keys, heads, rank, layers, seed, a.steps)
        print(f"N={n_keys} H={heads} r={rank} layers={layers} seed={seed}: train loss {train_loss:.5f}, "
              f"float32 test MSE {f32:.5f}, {seconds:.1f} s", flush=True)
        records.append((n_keys, heads, rank, layers, seed, train_loss, f32, seconds, model.flat()))
    if only is not None:
        return
    with open(a.out, "w", encoding="utf-8") as f:
        f.write("// Generated by experiments/rank_heads_train.py (--steps %d): do not edit.  The trained models of\n" % a.steps)
        f.write("// proofs/L4 part H, weights in float32 as exact hexadecimal literals (order: per layer, per head Wq, Wk, Wv\n")
        f.write("// row-major, then Wr).  Fields: N, H, r, layers, seed, steps, train loss, float32 test MSE, seconds, weights.\n")
        for i, rec in enumerate(records):
            w = rec[8]
            f.write("static const float trained_w%d[] = {\n" % i)
            for j in range(0, len(w), 8):
                f.write("  " + ", ".join(float(v).hex() + "f" for v in w[j:j + 8]) + ",\n")
            f.write("};\n")
        f.write("static const trained_model trained_models[] = {\n")
        for i, rec in enumerate(records):
            n_keys, heads, rank, layers, seed, train_loss, f32, seconds, w = rec
            f.write("  {%d, %d, %d, %d, %d, %d, %.17g, %.17g, %.1f, trained_w%d, %d},\n"
                    % (n_keys, heads, rank, layers, seed, a.steps, train_loss, f32, seconds, i, len(w)))
        f.write("};\n")
    print("wrote", a.out)


if __name__ == "__main__":
    main()
