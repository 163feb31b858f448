"""Fixtures shared by several test modules."""
import pytest


@pytest.fixture(scope="session")
def rank_heads_claims():
    """The claims of `attncert check rank-heads-tradeoff` in binary64 and mpfr256 (a run of about 10 s), computed once for
    test_rank_heads.py, test_rank_heads_lowrank.py and test_rank_heads_depth.py."""
    import attncert

    r = attncert.check("rank-heads-tradeoff", formats=("binary64", "mpfr256"))
    assert r.passed, r.totals
    (c,) = r.report["checks"]
    return c["claims"]
