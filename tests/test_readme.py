"""Every `mapper` command README.md shows, as a newcomer types it: each parses, and each runs at a
small size (the substitutions below: a smaller shape, a shorter limit, a two-point grid, a tiny
ONNX model in place of the user's gpt2.onnx) and exits 0 with its output, so that a README
command cannot break silently."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from mapper.cli import build_parser, main
from onnx_graphs import FLOAT, Graph, linear, rmsnorm

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[list[str]]:
    """The `mapper ...` lines of README.md's shell blocks (a trailing backslash continues a line;
    comments dropped), as argv lists without the program name."""
    text = (ROOT / "README.md").read_text()
    out = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            for part in line.split("&&"):
                words = shlex.split(part, comments=True)
                if words and words[0] == "mapper":
                    out.append(words[1:])
    return out


COMMANDS = readme_commands()


def _tiny_onnx(path: Path) -> str:
    g = Graph({"x": (["batch", "seq", 16], FLOAT)})
    h = g.node("Relu", [linear(g, rmsnorm(g, "x", 16, "/blocks.0/norm"), 16, 32, "/blocks.0/up")], "/blocks.0/act")
    y = g.node("Add", ["x", linear(g, h, 32, 16, "/blocks.0/down")], "/blocks.0")
    return g.save(y, path)


def small(argv: list[str], tmp: Path) -> list[str]:
    """The command at a small size; files it names placed in `tmp`."""
    swaps = {"gemm-4096": "gemm-256", "gpt2.onnx": _tiny_onnx(tmp / "gpt2.onnx"), "gpt2.yaml": str(tmp / "gpt2.yaml"),
             "chain-gpt3-6.7b-layer": str(ROOT / "tests" / "data" / "sweep-tiny-chain.yaml"),
             "GlobalBuffer.capacity=8MiB..256MiB:x2": "GlobalBuffer.capacity=8MiB,16MiB",
             "fronts/": str(tmp / "fronts"), "1024": "8"}
    out = [swaps.get(word, word) for word in argv]
    if "--time-limit" in out:          # long enough to print a mapping, not to prove it
        out[out.index("--time-limit") + 1] = "2"
    if out[0] == "sweep":
        out += ["--time-limit", "10", "--max-evaluations", "3000", "--jobs", "1", "--quiet"]
    if out[0] in ("sweep", "results"):
        out += ["--db", str(tmp / "results.sqlite")]
    return out


def test_the_readme_shows_the_commands_a_newcomer_needs():
    names = [argv[0] for argv in COMMANDS]
    assert names[0] == "search" and {"import-model", "sweep", "results"} <= set(names)


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(a[:3]) for a in COMMANDS])
def test_each_readme_command_parses(argv):
    build_parser().parse_args(argv)          # argparse exits (a failure here) on an unknown flag


def test_the_readme_commands_run_at_small_sizes(tmp_path, capsys):
    """In their order (the sweep reads what import-model wrote, results what the sweep stored)."""
    for argv in COMMANDS:
        command = small(argv, tmp_path)
        status = main(command)
        captured = capsys.readouterr()
        assert status == 0, (command, captured.err[-2000:])
        assert captured.out.strip(), command
    assert list((tmp_path / "fronts").glob("*.png"))
