"""attncert.pytest_plugin: the exact attention as a pytest fixture, and what the run graded at its end.

    pytest -p attncert.pytest_plugin                    # on the command line, or in conftest.py:
    pytest_plugins = ["attncert.pytest_plugin"]

Fixture (session scope):
    attncert_reference(q, k, v, **variant)    attncert.attention(q, k, v, **variant): the correctly rounded
                                              output (and LSE with return_lse=True), from the reference cache
                                              attncert.testing's helpers share, so that a test (or a later test)
                                              grading the same inputs computes the reference once
Terminal summary, at the end of the run (from attncert.testing's stats hook):
    attncert: N elements graded in C calls (F failed)
    attncert: worst ulp per rule: flash X, ulp Y              (the largest max_ulp of each rule's grades)
    attncert: S s in the oracle (R references computed, H reused from the cache)
The counts are this process's (with pytest-xdist, each worker counts its own and the controller prints none).
"""
from __future__ import annotations

import pytest

import attncert
from attncert import testing


class _Stats:
    """Sums of attncert.testing's stats events: grades by rule, oracle time, cache reuse."""

    def __init__(self):
        self.elements = self.calls = self.failed = 0
        self.worst = {}
        self.seconds = 0.0
        self.computed = self.reused = 0

    def __call__(self, event):
        kind = event.get("event")
        if kind == "grade":
            self.calls += 1
            self.elements += int(event["compared"])
            self.failed += event["verdict"] == "fail"
            rule = event["rule"].replace("_", "-")
            self.worst[rule] = max(self.worst.get(rule, 0.0), float(event["max_ulp"]))
        elif kind == "oracle":
            self.computed += 1
            self.seconds += float(event["seconds"])
        elif kind == "cache_hit":
            self.reused += 1

    def lines(self):
        out = ["attncert: %d elements graded in %d calls (%d failed)" % (self.elements, self.calls, self.failed)]
        if self.worst:
            out.append("attncert: worst ulp per rule: " + ", ".join("%s %.4g" % (r, self.worst[r])
                                                                     for r in sorted(self.worst)))
        out.append("attncert: %.3f s in the oracle (%d references computed, %d reused from the cache)"
                   % (self.seconds, self.computed, self.reused))
        return out

    def pytest_terminal_summary(self, terminalreporter):
        terminalreporter.section("attncert")
        for line in self.lines():
            terminalreporter.write_line(line)

    def pytest_unconfigure(self, config):
        testing.remove_stats_hook(self)


def pytest_configure(config):
    stats = _Stats()
    testing.add_stats_hook(stats)
    config.pluginmanager.register(stats, "attncert-stats")


@pytest.fixture(scope="session")
def attncert_reference():
    """attncert.attention(q, k, v, **variant), cached with attncert.testing's references for the whole run."""
    def reference(q, k, v, **variant):
        __tracebackhide__ = True  # noqa: F841  (a bad argument points at the caller's line)
        return attncert.attention(q, k, v, **variant)

    return reference
