import json
import subprocess
from pathlib import Path


def ref(base, over):
    out = dict(base)
    for k, v in over.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = ref(out[k], v)
        else:
            out[k] = v
    return out


def run(tmp_path, base, over):
    b, o = tmp_path / "b.json", tmp_path / "o.json"
    b.write_text(json.dumps(base))
    o.write_text(json.dumps(over))
    res = subprocess.run(["python3", "/app/merge.py", str(b), str(o)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_merged_production_file():
    base = json.loads(Path("/app/config/base.json").read_text())
    over = json.loads(Path("/app/config/production.json").read_text())
    assert base["replicas"] == 1 and over["replicas"] == 4
    assert Path("/app/config/merged.json").read_text() == json.dumps(ref(base, over), indent=2) + "\n"


def test_deep_merge_and_order(tmp_path):
    base = {"z": 1, "a": {"y": 1, "x": {"k": [1, 2]}}, "m": "s"}
    over = {"a": {"x": {"k": [3], "n": False}, "b": 2}, "new": {"q": 1}, "z": {"now": "obj"}}
    out = run(tmp_path, base, over)
    assert out == json.dumps(ref(base, over), indent=2) + "\n"
    assert list(json.loads(out)) == ["z", "a", "m", "new"]


def test_null_deletes(tmp_path):
    base = {"a": {"b": 1, "c": 2}, "d": [1], "e": 0}
    over = {"a": {"b": None, "zz": None}, "d": None, "missing": None, "e": False}
    assert json.loads(run(tmp_path, base, over)) == {"a": {"c": 2}, "e": False}


def test_type_replacement(tmp_path):
    base = {"a": {"b": 1}, "l": [1, 2, 3], "s": "x", "u": "ünï"}
    over = {"a": 5, "l": [], "s": {"t": 1}}
    out = run(tmp_path, base, over)
    assert out == json.dumps(ref(base, over), indent=2) + "\n"
