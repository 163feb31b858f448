"""attncert.blocks: `attncert block-bound` from Python.

    report = block_bound({"heads": 4, "norm": "layernorm", "activation": "gelu_tanh", "eps": 1e-5,
                          "blocks": [{"norm1_gamma": g1, "w_q": wq, ...}, ...]}, x=x)
    report = block_bound("gpt2.safetensors", architecture={"style": "gpt2", ...}, ids=[464, 3290, 318])
    for ap in report["approximations"]:
        for row in ap["stages"]:
            print(ap["approximation"], row["block"], row["stage"], row["measured_hi"], row["bound_direct"])

block_bound writes the model as a temporary model directory (model.json, x.npy, block<b>.<name>.npy, every
array in float64), runs the command line's `block-bound --format json` on it and returns the parsed JSON
report.  It computes nothing itself: every number in the report is the command line's (its help and
proofs/L7-block-bound.md say what each one means).  Converting to float64 is exact for float16, bfloat16,
float32 and float64 values, so the model the command line bounds is exactly the one given.

The model (pre-norm, GPT-2 style), per block on the residual stream x (n tokens x width E):
    h = norm1(x); q, k, v = h @ w_q + b_q, h @ w_k + b_k, h @ w_v + b_v   (heads: consecutive column groups)
    o_h = softmax(q_h k_h^T / sqrt(E / H), causal) v_h;  a = concat(o_h) @ w_o + b_o;  x1 = x + a
    g = norm2(x1);  out = x1 + act(g @ w1 + b1) @ w2 + b2
Array names (the model directory's): norm1_gamma, norm1_beta, w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o, norm2_gamma,
norm2_beta, w1, b1, w2, b2; betas and biases are optional (zero).

The command line is found as: the environment variable ATTNCERT_CLI, else the file `attncert` two directories
above this package (the build tree: build/python/attncert/ -> build/attncert), else `attncert` on PATH.

Errors: ValueError for bad input, with a one-line message (checked here where obvious: shapes of x and ids,
non-finite values, unknown names and keys; otherwise the command line's own message, exit status 2);
TimeoutError when `timeout` seconds pass; RuntimeError when the command line is not found or fails otherwise.
"""
from __future__ import annotations

import json
import math
import numbers
import os
import shutil
import subprocess
import tempfile

import numpy as np

__all__ = ["block_bound"]

DEFAULT_APPROX = ("float32", "bfloat16", "top-k:32", "random-features:64")

_REQUIRED = ("norm1_gamma", "w_q", "w_k", "w_v", "w_o", "norm2_gamma", "w1", "w2")
_OPTIONAL = ("norm1_beta", "b_q", "b_k", "b_v", "b_o", "norm2_beta", "b1", "b2")
_MATRICES = {"w_q", "w_k", "w_v", "w_o", "w1", "w2"}  # 2-D; every other array is 1-D
_MODEL_KEYS = {"heads", "blocks", "norm", "activation", "eps", "description"}
_MODEL_DEFAULTS = {"norm": "layernorm", "activation": "gelu_tanh", "eps": 1e-5}  # the command line's defaults
_NORMS = ("layernorm", "rmsnorm")
_ACTIVATIONS = ("gelu_tanh", "silu", "relu")

EXIT_INPUT = 2      # bad input (one line on stderr)
EXIT_TIMEOUT = 3    # --max-seconds reached
_GRACE_SECONDS = 30  # beyond `timeout`, before the process itself is stopped (it normally stops on its own)


# ---------------------------------------------------------------------------------------------- the command line

def _find_cli():
    """The path of the attncert executable (module docstring); RuntimeError when there is none."""
    env = os.environ.get("ATTNCERT_CLI")
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise RuntimeError("ATTNCERT_CLI=%s is not an executable file" % env)
        return env
    package = os.path.dirname(os.path.abspath(__file__))
    beside = os.path.normpath(os.path.join(package, os.pardir, os.pardir, "attncert"))
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("attncert")
    if found:
        return found
    raise RuntimeError("block_bound: the attncert command line was not found (set ATTNCERT_CLI to the built binary, "
                       "e.g. build/attncert, or put attncert on PATH; looked at %s)" % beside)


def _run(cli, args, timeout, hide=None):
    """Run `cli block-bound args`; ValueError (exit 2), TimeoutError (exit 3 or past the grace period) or
    RuntimeError (anything else nonzero).  `hide`: a temporary path replaced by "<model>" in messages."""
    limit = None if timeout is None else timeout + _GRACE_SECONDS
    try:
        proc = subprocess.run([cli, "block-bound"] + args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=limit)
    except subprocess.TimeoutExpired:
        raise TimeoutError("block_bound: the command line did not stop within %s s" % limit) from None
    except OSError as e:
        raise RuntimeError("block_bound: cannot run %s (%s)" % (cli, e)) from None
    if proc.returncode == 0:
        return
    text = proc.stderr.decode("utf-8", "replace")
    if hide:
        text = text.replace(hide, "<model>")
    lines = [ln.strip() for ln in text.replace("\r", "\n").splitlines() if ln.strip()]
    ours = [ln for ln in lines if ln.startswith("attncert:")]
    line = ours[-1] if ours else (lines[-1] if lines else "(no message)")
    if proc.returncode == EXIT_INPUT:
        raise ValueError(line)
    if proc.returncode == EXIT_TIMEOUT:
        raise TimeoutError(line)
    raise RuntimeError("block_bound: %s exited with status %d: %s" % (cli, proc.returncode, line))


# ---------------------------------------------------------------------------------------------- arguments

def _float64(a, what):
    """a (array-like of real numbers) as a C-contiguous float64 array; ValueError for non-numbers and
    non-finite values.  torch tensors (including bfloat16) are read exactly."""
    if type(a).__module__.startswith("torch") and hasattr(a, "detach"):
        t = a.detach().cpu()
        if str(t.dtype) == "torch.bfloat16":
            t = t.float()  # exact
        a = t.numpy()
    try:
        arr = np.asarray(a)
    except Exception as e:  # a ragged list, an object that is no array
        raise ValueError("%s: not an array (%s)" % (what, e)) from None
    if arr.dtype.kind not in "fiub":
        raise ValueError("%s: not an array of real numbers (dtype %s)" % (what, arr.dtype))
    if arr.dtype.kind == "b":
        raise ValueError("%s: a boolean array is not a weight" % what)
    out = np.ascontiguousarray(arr, dtype=np.float64)
    if arr.dtype.kind in "iu" and not np.array_equal(out.astype(arr.dtype), arr):
        raise ValueError("%s: an integer is not exactly a float64 number" % what)
    if not np.all(np.isfinite(out)):
        raise ValueError("%s: has a non-finite entry (NaN or Inf)" % what)
    return out


def _input(x, what="x"):
    x = _float64(x, what)
    if x.ndim != 2 or 0 in x.shape:
        raise ValueError("%s: must be a 2-D array (tokens, width) with at least one token, got shape %s"
                         % (what, x.shape))
    return x


def _count(v, what, minimum=1):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or int(v) < minimum:
        raise ValueError("%s: must be an integer >= %d, got %r" % (what, minimum, v))
    return int(v)


def _positive(v, what):
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not 0 < float(v) < math.inf:
        raise ValueError("%s: must be a positive finite number, got %r" % (what, v))
    return float(v)


def _approx_list(approx):
    items = approx.split(",") if isinstance(approx, str) else list(approx)
    for a in items:
        if not isinstance(a, str) or not a.strip() or "," in a:
            raise ValueError("approx: each approximation must be a non-empty name (float32, bfloat16, top-k:K, "
                             "random-features:M), got %r" % (a,))
    if not items:
        raise ValueError("approx: no approximation given")
    return [a.strip() for a in items]


def _dict_model(model, x):
    """(settings, blocks, x) of a model given as a dict."""
    unknown = sorted(set(model) - _MODEL_KEYS)
    if unknown:
        raise ValueError("model: unknown key %r (keys: %s)" % (unknown[0], ", ".join(sorted(_MODEL_KEYS))))
    for key in ("heads", "blocks"):
        if key not in model:
            raise ValueError("model: missing key %r" % key)
    settings = {"heads": _count(model["heads"], "model['heads']")}
    for key, choices in (("norm", _NORMS), ("activation", _ACTIVATIONS)):
        v = model.get(key, _MODEL_DEFAULTS[key])
        if v not in choices:
            raise ValueError("model['%s']: must be one of %s, got %r" % (key, ", ".join(choices), v))
        settings[key] = v
    settings["eps"] = _positive(model.get("eps", _MODEL_DEFAULTS["eps"]), "model['eps']")
    description = model.get("description", "a model given to attncert.block_bound")
    if not isinstance(description, str):
        raise ValueError("model['description']: must be a string, got %s" % type(description).__name__)
    settings["description"] = description
    if x is None:
        raise ValueError("x: a dict model needs x, the (tokens, width) residual stream entering block 0")
    x = _input(x)
    raw = model["blocks"]
    if isinstance(raw, dict) or not hasattr(raw, "__len__") or len(raw) < 1:
        raise ValueError("model['blocks']: must be a non-empty list of {name: array} dicts, one per block")
    blocks = []
    for b, arrays in enumerate(raw):
        if not isinstance(arrays, dict):
            raise ValueError("model['blocks'][%d]: must be a dict {name: array}, got %s" % (b, type(arrays).__name__))
        for name in arrays:
            if name not in _REQUIRED and name not in _OPTIONAL:
                raise ValueError("model['blocks'][%d]: unknown array %r (names: %s)"
                                 % (b, name, ", ".join(_REQUIRED + _OPTIONAL)))
        for name in _REQUIRED:
            if name not in arrays:
                raise ValueError("model['blocks'][%d]: missing array %r" % (b, name))
        block = {}
        for name, a in arrays.items():
            if a is None and name in _OPTIONAL:
                continue
            what = "model['blocks'][%d][%r]" % (b, name)
            arr = _float64(a, what)
            want = 2 if name in _MATRICES else 1
            if arr.ndim != want:
                raise ValueError("%s: must be a %d-D array, got shape %s" % (what, want, arr.shape))
            block[name] = arr
        blocks.append(block)
    return settings, blocks, x


def _gpt2_model(path, architecture, ids):
    """(settings, blocks, x) of a GPT-2 style safetensors file run on token ids."""
    from . import models  # the package's safetensors reader and architecture check

    if architecture is None:
        raise ValueError("architecture: a safetensors model needs its architecture (a dict or a JSON file's path)")
    arch = architecture
    if isinstance(architecture, (str, os.PathLike)):
        try:
            with open(os.fspath(architecture), encoding="utf-8") as f:
                arch = json.load(f)
        except (OSError, UnicodeDecodeError, ValueError):
            arch = architecture  # models._architecture reports the problem in its own words
    if isinstance(arch, dict) and arch.get("style") == "llama":
        raise ValueError("architecture: style 'llama' is not supported: rotary embeddings and SwiGLU are not in "
                         "block-bound's model (pre-norm blocks with learned positions and a one-matrix MLP, as GPT-2)")
    cfg = models._architecture(arch)
    if ids is None:
        raise ValueError("ids: a safetensors model needs the token ids it runs on")
    ids_arr = np.asarray(ids)
    if ids_arr.ndim == 2 and ids_arr.shape[0] == 1:
        ids_arr = ids_arr[0]  # one sequence given as a batch of one
    if ids_arr.ndim != 1 or ids_arr.size < 1 or ids_arr.dtype.kind not in "iu":
        raise ValueError("ids: must be a non-empty 1-D sequence of integer token ids, got %s of shape %s"
                         % (ids_arr.dtype, ids_arr.shape))
    if ids_arr.min() < 0 or ids_arr.max() >= cfg["vocab_size"]:
        raise ValueError("ids: token ids must be in [0, %d), got [%d, %d]"
                         % (cfg["vocab_size"], ids_arr.min(), ids_arr.max()))
    n = int(ids_arr.size)
    if n > cfg["n_positions"]:
        raise ValueError("ids: %d tokens, more than the model's n_positions = %d" % (n, cfg["n_positions"]))
    tensors, _ = models._checked_tensors(os.fspath(path), cfg)
    t = {name: np.asarray(a, dtype=np.float64) for name, a in tensors.items()}  # exact for every float format
    with np.errstate(over="ignore", invalid="ignore"):
        x = t["wte.weight"][ids_arr.astype(np.int64)] + t["wpe.weight"][:n]
    x = _input(x, "x (wte[ids] + wpe[positions])")
    E = cfg["d_model"]
    blocks = []
    for i in range(cfg["n_layer"]):
        p = "h.%d." % i
        w_attn, b_attn = t[p + "attn.c_attn.weight"], t[p + "attn.c_attn.bias"]  # Conv1D (E, 3E): q | k | v
        block = {
            "norm1_gamma": t[p + "ln_1.weight"], "norm1_beta": t[p + "ln_1.bias"],
            "w_q": w_attn[:, :E], "w_k": w_attn[:, E:2 * E], "w_v": w_attn[:, 2 * E:],
            "b_q": b_attn[:E], "b_k": b_attn[E:2 * E], "b_v": b_attn[2 * E:],
            "w_o": t[p + "attn.c_proj.weight"], "b_o": t[p + "attn.c_proj.bias"],
            "norm2_gamma": t[p + "ln_2.weight"], "norm2_beta": t[p + "ln_2.bias"],
            "w1": t[p + "mlp.c_fc.weight"], "b1": t[p + "mlp.c_fc.bias"],
            "w2": t[p + "mlp.c_proj.weight"], "b2": t[p + "mlp.c_proj.bias"],
        }
        blocks.append({name: _float64(a, "%s: tensor for %s" % (os.fspath(path), name)) for name, a in block.items()})
    settings = {"heads": cfg["n_head"], "norm": "layernorm", "activation": "gelu_tanh", "eps": cfg["norm_eps"],
                "description": "GPT-2 %s, %d tokens" % (os.path.basename(os.fspath(path)), n)}
    return settings, blocks, x


def _write_directory(root, settings, blocks, x):
    """The model directory the command line reads (block-bound --help)."""
    meta = dict(settings, blocks=len(blocks))
    with open(os.path.join(root, "model.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f)  # eps: the shortest decimal that reads back as the same binary64 number
    np.save(os.path.join(root, "x.npy"), x)
    for b, arrays in enumerate(blocks):
        for name, a in arrays.items():
            np.save(os.path.join(root, "block%d.%s.npy" % (b, name)), a)


# ---------------------------------------------------------------------------------------------- the entry point

def block_bound(model, x=None, ids=None, approx=DEFAULT_APPROX, depth=0, architecture=None, seed=None,
                target_ratio=None, timeout=None):
    """The `attncert block-bound` report (the parsed JSON) of a model and its input.

    model: either a dict {"heads": H, "blocks": [{name: array, ...}, ...], "norm": "layernorm" | "rmsnorm",
           "activation": "gelu_tanh" | "silu" | "relu", "eps": float, "description": str} (norm, activation,
           eps default to layernorm, gelu_tanh, 1e-5; array names as in the module docstring, y = x @ W + b)
           with x the (tokens, width) residual stream entering block 0;
           or the path of a GPT-2 style .safetensors file with `architecture` (a dict or a JSON file's path,
           style "gpt2", as attncert.models.load_model takes) and `ids` (1-D token ids): x = wte[ids] + wpe[0..n)
           in float64; every block of the file, ln_f not included.  LLaMA-style models are refused.
    approx: approximations (a list or a comma-separated text): float32, bfloat16, top-k:K, random-features:M.
    depth: blocks to run (0: all).  seed: the random features' seed (None: the command line's default).
    target_ratio: where bound / measured exceeds it, the report says so (None: the default, 10).
    timeout: seconds before the command line stops (TimeoutError); None: no limit.

    Returns the report dict: "settings" (tokens, width, heads, mlp_width, depth, ...), and per approximation
    "stages", one row per block (1-based) and stage with measured_lo <= max_i ||xa_i - x_i||_2 <= measured_hi
    and the certified upper bounds bound_article, bound_direct, stage_bound (None where infinite)."""
    if isinstance(model, dict):
        if ids is not None or architecture is not None:
            raise ValueError("ids, architecture: only for a safetensors model; a dict model takes x")
        settings, blocks, x = _dict_model(model, x)
    elif isinstance(model, (str, os.PathLike)):
        if x is not None:
            raise ValueError("x: a safetensors model computes x from ids; give ids, not x")
        settings, blocks, x = _gpt2_model(model, architecture, ids)
    else:
        raise ValueError("model: must be a dict of arrays or the path of a .safetensors file, got %s"
                         % type(model).__name__)
    args = ["--approx", ",".join(_approx_list(approx)), "--depth", str(_count(depth, "depth", 0)),
            "--format", "json"]
    if seed is not None:
        args += ["--seed", str(_count(seed, "seed", 0))]
    if target_ratio is not None:
        args += ["--target-ratio", repr(_positive(target_ratio, "target_ratio"))]
    if timeout is not None:
        timeout = _positive(timeout, "timeout")
        if timeout > 1e7:
            raise ValueError("timeout: at most 1e7 seconds, got %r" % timeout)
        args += ["--max-seconds", repr(timeout)]
    cli = _find_cli()
    with tempfile.TemporaryDirectory(prefix="attncert-block-bound-") as tmp:
        root = os.path.join(tmp, "model")
        os.mkdir(root)
        _write_directory(root, settings, blocks, x)
        out = os.path.join(tmp, "report.json")
        _run(cli, ["--model", root, "--out", out] + args, timeout, hide=root)
        with open(out, encoding="utf-8") as f:
            return json.load(f)
