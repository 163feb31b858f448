"""The README's audit snippet, unchanged: a new user's nn.TransformerEncoder goes to report.json, report.md and
report.html, and what the README says of its result is what the snippet gives."""
import json
import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("torch")
README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")
HEADING = "## `attncert audit`: the article's protocol on your own model"


def snippet():
    with open(README, encoding="utf-8") as f:
        text = f.read()
    assert HEADING in text
    return re.search(r"```python\n(.*?)```", text[text.index(HEADING):], re.S).group(1)


def test_readme_audit_snippet_runs_unchanged(tmp_path):
    (tmp_path / "snippet.py").write_text(snippet(), encoding="utf-8")
    import attncert  # the package under test, wherever it was found (PYTHONPATH may be relative)

    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(attncert.__file__))))
    subprocess.run([sys.executable, "snippet.py"], cwd=tmp_path, check=True, capture_output=True, timeout=300, env=env)
    assert sorted(os.listdir(tmp_path / "audit")) == ["report.html", "report.json", "report.md"]
    assert os.path.isfile(tmp_path / "capture" / "manifest.json")
    with open(tmp_path / "audit" / "report.json", encoding="utf-8") as f:
        d = json.load(f)
    html = (tmp_path / "audit" / "report.html").read_text(encoding="utf-8")
    assert 'id="fig-outcomes"' in html and html.count('class="spectrum"') == 8
    # the README: every head keeps exact rank 8 for scores, values and output and 128 for attention,
    # rank-reduced/adequate, the output error about 3e-8 of the value scale
    assert d["summary"]["outcomes"] == {"rank-reduced/adequate": 8} and d["summary"]["controls_passed"] == 3
    for layer in d["layers"]:
        for h in layer["heads"]:
            ranks = {k: (v["exact_rank"]["lo"], v["exact_rank"]["hi"]) for k, v in h["objects"].items()}
            assert ranks == {"scores": (8, 8), "attention": (128, 128), "values": (8, 8), "output": (8, 8)}
            assert 1e-8 < float(h["output_error"]["relative"]["hi"]) < 1e-7
            assert float(h["target_contrast"]["model"]["lo"]) >= 1e-3
        assert layer["residual"][0]["computed"] and layer["multi_head"][0]["computed"]
