"""Every numeric flag of every subcommand refuses NaN, infinities and negatives on one line
naming the flag, with exit status 2, before any input is read (`mapper.flags`)."""
import subprocess
import sys

import pytest

from mapper.cli import build_parser, main

SEARCH_FLAGS = ("--time-limit", "--cpsat-seconds", "--seed", "--samples", "--max-evaluations")
FLAGS = {
    "search": (["toy", "gemm-256"], SEARCH_FLAGS),
    "compare": (["toy", "gemm-256"], SEARCH_FLAGS),
    "explain": (["toy", "gemm-256"], ("--time-limit", "--cpsat-seconds", "--max-evaluations")),
    "mapspace": (["toy", "gemm-256"], ("--exact-limit",)),
    "sweep": (["toy", "--gemm", "m=64 n=64 k=64"], ("--time-limit", "--cpsat-seconds", "--seed", "--samples",
                                                    "--jobs")),
}
CASES = [(command, flag) for command, (_, flags) in FLAGS.items() for flag in flags]


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "-inf", "1e12", "many"])
@pytest.mark.parametrize("command,flag", CASES, ids=[f"{c}{f}" for c, f in CASES])
def test_each_flag_refuses_non_finite_negative_and_absurd_values(capsys, command, flag, value):
    positional, _ = FLAGS[command]
    # argparse takes `-inf` for an option unless it is joined to its flag
    given = [f"{flag}={value}"] if value == "-inf" else [flag, value]
    with pytest.raises(SystemExit) as exit_:
        main([command, *positional, *given])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"mapper {command}: error: argument {flag}: expected ")
    assert repr(value) in err[-1]


@pytest.mark.parametrize("command,flag,value", [
    ("search", "--cpsat-seconds", "0"), ("search", "--seed", "0"), ("explain", "--cpsat-seconds", "0"),
    ("sweep", "--time-limit", "0"), ("sweep", "--seed", "0"), ("search", "--time-limit", "0.5"),
    ("mapspace", "--exact-limit", "1"), ("sweep", "--jobs", "1"), ("search", "--max-evaluations", "1000000000")])
def test_the_floor_and_the_ceiling_of_each_kind_are_accepted(command, flag, value):
    positional, _ = FLAGS[command]
    args = build_parser().parse_args([command, *positional, flag, value])
    assert getattr(args, flag[2:].replace("-", "_")) == float(value)


@pytest.mark.parametrize("command,flag", [("search", "--time-limit"), ("explain", "--time-limit"),
                                          ("search", "--samples"), ("sweep", "--samples"), ("sweep", "--jobs"),
                                          ("mapspace", "--exact-limit"), ("compare", "--max-evaluations")])
def test_zero_is_refused_where_the_value_must_be_positive(capsys, command, flag):
    positional, _ = FLAGS[command]
    with pytest.raises(SystemExit) as exit_:
        main([command, *positional, flag, "0"])
    assert exit_.value.code == 2 and f"argument {flag}: expected " in capsys.readouterr().err


def test_the_command_exits_with_status_2_and_one_line():
    done = subprocess.run([sys.executable, "-m", "mapper", "sweep", "toy", "--gemm", "m=64 n=64 k=64",
                           "--time-limit", "inf"], capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines()[-1] == ("mapper sweep: error: argument --time-limit: expected a "
                                                   "number of seconds >= 0 up to 1e9, got 'inf'")
