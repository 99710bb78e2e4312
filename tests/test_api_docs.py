"""docs/API.md's examples run as they are: its ```python blocks, in order, in one namespace,
in a fresh folder, through `import mapper` alone (no private module named in them)."""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

import mapper

API_MD = Path(__file__).resolve().parents[1] / "docs" / "API.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", API_MD.read_text(), re.S)


def test_the_examples_use_only_the_public_api():
    code = "\n".join(_blocks())
    assert len(_blocks()) >= 5
    imports = set(re.findall(r"^\s*(?:from|import) ([\w.]+)", code, re.M))
    assert imports <= {"mapper", "numpy", "pathlib", "onnx"}, imports      # onnx: a graph to import
    used = set(re.findall(r"mapper\.(\w+)", code))
    assert used <= set(mapper.__all__), used - set(mapper.__all__)


def test_the_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in _blocks():
            exec(compile(block, str(API_MD), "exec"), namespace)
    printed = out.getvalue()
    assert "refused: <workload dict>: sizes.m" in printed
    assert "proven optimal: True" in printed


@pytest.mark.parametrize("loader", [mapper.load_arch, mapper.load_workload, mapper.load_constraints])
def test_loaders_refuse_what_is_no_spec(loader):
    with pytest.raises(TypeError, match="expected a .* preset name, a YAML file's path or a dict, got int"):
        loader(42)


def test_a_dict_spec_equals_its_file(tmp_path):
    import yaml
    data = yaml.safe_load((Path(mapper.__file__).resolve().parents[1] / "archs" / "toy.yaml").read_text())
    from_dict = mapper.load_arch(data)
    assert from_dict == mapper.load_arch("toy") or (from_dict.levels == mapper.load_arch("toy").levels)
    assert mapper.load_arch(from_dict) is from_dict
