"""attncert.audit: the article's evaluation protocol on a captured model (attncert.capture), every layer and head.

    with attncert.capture(model) as cap:
        model(x)
    report = attncert.audit(cap, spec={"allowable_output_error": 1e-3, "policies": "numpy"})
    report = attncert.audit(model, x, spec="spec.json")       # the same: captures model(x) first
    report = attncert.audit("gpt2.safetensors", ids, architecture="gpt2.json")   # a safetensors file
    report.to_dict()["layers"][0]["heads"][0]["outcome"]
    report.write("audit")            # report.json, report.md and report.html

The criteria come first: the spec (a dict, or the path of a JSON file; None: attncert.default_audit_spec(),
and the report says so) is written at the top of the report with the SHA-256 of its text, before any result.
The keywords formats=, policies=, max_seconds= are spec keys (given here they are merged into the spec before
it is hashed).  registered= (a SHA-256, or an earlier report.json) refuses a spec that is not the registered one.
Everything is computed by the library (attncert/audit/audit.hpp), which the command line
`attncert audit CAPTURE_DIR` calls on a saved capture: the two give the same numbers.  With client= (a Dask
client) each captured call is one task on the cluster and the parts are joined in C++ (report/audit.hpp).
"""
from __future__ import annotations

import json
import os
import sys
import time

__all__ = ["audit", "default_audit_spec", "AuditReport"]


def default_audit_spec():
    """The default spec as a dict (every key with its default value)."""
    from . import _core

    return json.loads(_core.default_audit_spec())


class AuditReport:
    """An audit's report: to_dict() (the JSON contract: spec and spec_sha256 first, then controls, then layers),
    markdown(), html() (a self-contained page with figures), write(directory)."""

    def __init__(self, text):
        self._text = text
        self._dict = json.loads(text)

    def to_dict(self):
        return json.loads(self._text)

    def markdown(self):
        from . import _core

        return _core.audit_render(self._text, "md")

    def html(self):
        from . import _core

        return _core.audit_render(self._text, "html")

    @property
    def spec_sha256(self):
        return self._dict["spec_sha256"]

    def outcomes(self):
        """{(layer name, batch, head): outcome}."""
        return {(layer["name"], h["batch"], h["head"]): h["outcome"] for layer in self._dict["layers"] for h in layer["heads"]}

    def write(self, directory):
        """Writes report.json, report.md and report.html into `directory` (created if missing); each file is
        written beside its place and renamed into it, so a failure leaves no half-written report."""
        os.makedirs(directory, exist_ok=True)
        for name, text in (("report.json", self._text + "\n"), ("report.md", self.markdown()), ("report.html", self.html())):
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


def _registered(registered):
    """The registered SHA-256: given as 64 lowercase hex digits, or read from an earlier report.json."""
    if registered is None:
        return ""
    if isinstance(registered, str) and len(registered) == 64 and all(c in "0123456789abcdef" for c in registered):
        return registered
    path = os.fspath(registered)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)["spec_sha256"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError("registered: neither a SHA-256 (64 lowercase hex digits) nor a readable audit report (%s: %s)"
                         % (path, e)) from None


def _source_capture(source, inputs, architecture, weights):
    """The Capture an audit works on: a Capture, a capture directory, a torch model run on inputs, or a
    safetensors file (with architecture=) run on inputs."""
    from .capture import Capture, capture, load_capture

    if isinstance(source, Capture):
        return source
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if path.endswith(".safetensors"):
            from . import models

            if architecture is None:
                raise ValueError("architecture: a safetensors file needs architecture= (a dict or a JSON file: "
                                 "style gpt2 or llama, n_layer, n_head, d_model, ...)")
            if not inputs:
                raise ValueError("inputs: a safetensors model needs its input token ids: attncert.audit(path, ids, ...)")
            source = models.load_model(path, architecture)
        else:
            if inputs:
                raise ValueError("inputs: a capture directory takes no inputs (the calls are recorded in it)")
            return load_capture(path)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(source, torch.nn.Module):
        if not inputs:
            raise ValueError("inputs: attncert.audit(model, *inputs): give the inputs the model runs on")
        with torch.enable_grad() if any(p.requires_grad for p in source.parameters()) else _nothing():
            with capture(source, weights=weights) as cap:
                source(*inputs)
        if not cap.calls:
            raise ValueError("model: no attention call was captured (no torch.nn.MultiheadAttention, "
                             "scaled_dot_product_attention or attncert.scaled_dot_product_attention ran)")
        return cap
    raise ValueError("source: an attncert.capture(...) result, a capture directory, a torch model with its inputs or a "
                     ".safetensors file, got %s" % type(source).__name__)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _call_dict(c):
    return dict(name=c.name, kind=c.kind, dtype=c.dtype, scale=c.scale, mask_kind=c.mask_kind, q=c.q, k=c.k, v=c.v,
                allowed=c.allowed, bias=c.bias, weights=c.weights, output=c.output, w_o=c.w_o, b_o=c.b_o,
                residual=getattr(c, "residual", None))


def _audit_task(call, text, is_default, registered, deadline=None):
    """One task of a distributed audit: the audit of one captured call (JSON text).  With the call's deadline,
    the audit gets what is left of it as its budget (at least a millisecond: the heads past it are named as
    not computed)."""
    from attncert import _core

    budget = -1.0 if deadline is None else max(1e-3, deadline - time.time())
    return _core.audit([call], text, is_default, registered, False, budget)


def audit(source, *inputs, spec=None, architecture=None, formats=None, policies=None, max_seconds=None,
          registered=None, progress=None, client=None, weights=True):
    """The audit of every captured call and head (see the module's docstring).

    source: an attncert.capture Capture, the directory a capture was saved in, a torch.nn.Module run on *inputs
    (captured here, under torch.enable_grad() when it has trainable parameters, so torch takes no fused path), or
    a .safetensors file with architecture= (attncert.models.load_model) run on *inputs (token ids).  For a Capture
    or a directory a single extra positional argument is the spec (attncert.audit(cap, spec)).
    registered: a SHA-256 or an earlier report.json; the spec must be that one (ValueError otherwise).
    progress: one line per head on standard error (default: when it is a terminal).
    client: a dask.distributed Client; each call is one task, the parts joined in C++.
    Returns an AuditReport.  Errors: ValueError for a spec with unknown keys or bad values, a capture with no
    call, malformed arrays, a spec that is not the registered one."""
    from . import _core
    from .capture import Capture

    recorded = isinstance(source, Capture) or (isinstance(source, (str, os.PathLike))
                                               and not os.fspath(source).endswith(".safetensors"))
    if recorded and inputs:
        if len(inputs) > 1 or spec is not None:
            raise ValueError("inputs: a capture takes no inputs (its calls are recorded); the one positional argument "
                             "after it is the spec")
        spec, inputs = inputs[0], ()
    overrides = {k: v for k, v in (("formats", formats), ("policies", policies), ("max_seconds", max_seconds)) if v is not None}
    text, is_default = _spec_text(spec, overrides)
    reg = _registered(registered)
    _core.audit_check_spec(text, reg)  # the criteria are checked before the model runs
    cap = _source_capture(source, inputs, architecture, weights)
    calls = [_call_dict(c) for c in cap.calls]
    if not calls:
        raise ValueError("cap: no attention call was captured")
    if progress is None:
        progress = bool(getattr(sys.stderr, "isatty", lambda: False)())
    if client is None:
        return AuditReport(_core.audit(calls, text, is_default, reg, bool(progress)))
    return AuditReport(_distributed(client, calls, text, is_default, reg, progress))


def _distributed(client, calls, text, is_default, reg, progress):
    from . import _core
    from . import distributed

    distributed._check_client(client)
    max_seconds = json.loads(text).get("max_seconds", 0) or 0
    deadline = time.time() + max_seconds if max_seconds else None
    futures = [client.submit(_audit_task, c, text, is_default, reg, deadline, pure=False) for c in calls]
    if progress:
        from distributed import progress as dask_progress

        dask_progress(futures)
    parts = client.gather(futures)
    return _core.audit_merge(parts, "attncert.audit (python, distributed)")
