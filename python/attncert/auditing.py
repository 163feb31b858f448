"""attncert.audit: the article's evaluation protocol on a captured model (attncert.capture), every layer and head.

    with attncert.capture(model) as cap:
        model(x)
    report = attncert.audit(cap, spec={"allowable_output_error": 1e-3, "policies": "numpy"})
    report.to_dict()["layers"][0]["heads"][0]["outcome"]
    report.write("audit")            # report.json and report.md

The criteria come first: the spec (a dict, or the path of a JSON file; None: attncert.default_audit_spec(),
and the report says so) is written at the top of the report with the SHA-256 of its text, before any result.
The keywords formats=, policies=, max_seconds= are spec keys (given here they are merged into the spec before
it is hashed).  Everything is computed by the library (attncert/audit/audit.hpp), which the command line
`attncert audit CAPTURE_DIR` calls on a saved capture: the two give the same numbers.
"""
from __future__ import annotations

import json
import os

__all__ = ["audit", "default_audit_spec", "AuditReport"]


def default_audit_spec():
    """The default spec as a dict (every key with its default value)."""
    from . import _core

    return json.loads(_core.default_audit_spec())


class AuditReport:
    """An audit's report: to_dict() (the JSON contract: spec and spec_sha256 first, then controls, then layers),
    markdown(), write(directory)."""

    def __init__(self, text, markdown):
        self._text = text
        self._markdown = markdown
        self._dict = json.loads(text)

    def to_dict(self):
        return json.loads(self._text)

    def markdown(self):
        return self._markdown

    @property
    def spec_sha256(self):
        return self._dict["spec_sha256"]

    def outcomes(self):
        """{(layer name, batch, head): outcome}."""
        return {(layer["name"], h["batch"], h["head"]): h["outcome"] for layer in self._dict["layers"] for h in layer["heads"]}

    def write(self, directory):
        """Writes report.json and report.md into `directory` (created if missing)."""
        os.makedirs(directory, exist_ok=True)
        for name, text in (("report.json", self._text + "\n"), ("report.md", self._markdown)):
            tmp = os.path.join(directory, "." + name + ".tmp")
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, os.path.join(directory, name))

    def __repr__(self):
        s = self._dict["summary"]["outcomes"] or {}
        return "AuditReport(spec_sha256=%s..., %s)" % (self.spec_sha256[:12], ", ".join("%s: %d" % kv for kv in s.items()))


def _spec_text(spec, overrides):
    if spec is None and not overrides:
        from . import _core

        return _core.default_audit_spec(), True
    if spec is None:
        spec = {}
    if isinstance(spec, (str, os.PathLike)):
        path = os.fspath(spec)
        try:
            with open(path, encoding="utf-8", newline="") as f:  # the file's bytes, CRLF kept: its hash is the file's
                text = f.read()
        except OSError as e:
            raise ValueError("spec: cannot read %r: %s" % (path, e.strerror)) from None
        if not overrides:
            return text, False
        try:
            spec = json.loads(text)
        except ValueError as e:
            raise ValueError("spec: %r is not JSON: %s" % (path, e)) from None
    if not isinstance(spec, dict):
        raise ValueError("spec: a dict or the path of a JSON file, got %s" % type(spec).__name__)
    merged = dict(spec)
    merged.update(overrides)
    return json.dumps(merged, indent=2, sort_keys=False) + "\n", False


def audit(cap, spec=None, *, formats=None, policies=None, max_seconds=None, client=None):
    """The audit of every captured call and head (see the module's docstring).  cap: an attncert.capture
    Capture, or the directory a capture was saved in.  client= (a Dask client) is not supported yet: ValueError
    when given.  Returns an AuditReport.  Errors: ValueError for a spec with unknown keys or bad values, a capture
    with no call, malformed arrays."""
    from . import _core
    from .capture import Capture, load_capture

    if client is not None:
        raise ValueError("client: the audit does not run on attncert.distributed yet; call it without client=")
    if isinstance(cap, (str, os.PathLike)):
        cap = load_capture(cap)
    if not isinstance(cap, Capture):
        raise ValueError("cap: an attncert.capture(...) result or a capture directory, got %s" % type(cap).__name__)
    overrides = {k: v for k, v in (("formats", formats), ("policies", policies), ("max_seconds", max_seconds)) if v is not None}
    text, is_default = _spec_text(spec, overrides)
    calls = [dict(name=c.name, kind=c.kind, dtype=c.dtype, scale=c.scale, mask_kind=c.mask_kind, q=c.q, k=c.k, v=c.v,
                  allowed=c.allowed, bias=c.bias, weights=c.weights, output=c.output, w_o=c.w_o, b_o=c.b_o)
             for c in cap.calls]
    if not calls:
        raise ValueError("cap: no attention call was captured")
    j, md = _core.audit(calls, text, is_default)
    return AuditReport(j, md)
