"""SplitMix64 (Steele, Lea, Flood), the generator of the rank-heads check's instances (checks/rank_heads_context.cpp,
checks/rank_heads_trained.cpp), re-implemented for the tests that re-derive those instances: one output at a time in
Python integers, and a block at once in NumPy (the k-th output depends only on seed + k * GAMMA mod 2^64)."""
import numpy as np

MASK64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15
MIX1, MIX2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def splitmix64_scalar(seed, count):
    """The first `count` outputs of SplitMix64 seeded with `seed`, one at a time."""
    state, out = seed & MASK64, []
    for _ in range(count):
        state = (state + GAMMA) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * MIX1) & MASK64
        z = ((z ^ (z >> 27)) * MIX2) & MASK64
        out.append(z ^ (z >> 31))
    return out


def splitmix64_block(seed, start, count):
    """Outputs start + 1, ..., start + count of SplitMix64 seeded with `seed`, computed at once (uint64 products wrap)."""
    with np.errstate(over="ignore"):
        k = np.arange(start + 1, start + count + 1, dtype=np.uint64)
        z = np.uint64(seed & MASK64) + k * np.uint64(GAMMA)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(MIX1)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(MIX2)
        return z ^ (z >> np.uint64(31))
