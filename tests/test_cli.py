"""The command-line tools' help is plain text with every option explained, and a missing optional
dependency ends the command with a message naming the extra to install (exit status 2), not a
traceback and not after a long run."""

from __future__ import annotations

import argparse
import sys

import pytest

from aiorma import _cli
from aiorma.__main__ import main as aiorma_main
from aiorma.bench.__main__ import available
from aiorma.bench.__main__ import main as bench_main
from aiorma.sim.__main__ import EXPERIMENTS
from aiorma.sim.__main__ import main as sim_main
from aiorma.trace.__main__ import main as trace_main

COMMANDS = [
    ("aiorma", aiorma_main, []),
    ("aiorma", aiorma_main, ["info"]),
    ("bench", bench_main, []),
    *[("bench", bench_main, [name]) for name in available()],
    ("sim", sim_main, []),
    *[("sim", sim_main, [name]) for name in EXPERIMENTS],
    ("trace", trace_main, []),
    ("trace", trace_main, ["plot"]),
    ("trace", trace_main, ["merge"]),
]
MARKUP = ("``", ":func:", ":mod:", ":class:", ":data:", "**")


def command_id(command: tuple) -> str:
    return " ".join([command[0], *command[2]])


@pytest.mark.parametrize("command", COMMANDS, ids=command_id)
def test_help_is_plain_and_explains_every_option(
    command: tuple, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _tool, main, args = command
    actions: list[argparse.Action] = []
    add_argument = argparse._ActionsContainer.add_argument

    def recording(self, *a, **k):  # type: ignore[no-untyped-def]
        action = add_argument(self, *a, **k)
        actions.append(action)
        return action

    monkeypatch.setattr(argparse._ActionsContainer, "add_argument", recording)
    try:
        status = main([*args, "--help"])
    except SystemExit as exit_:
        status = exit_.code
    out = capsys.readouterr().out
    assert status == 0
    assert "usage:" in out and len(out.splitlines()) > 3
    for markup in MARKUP:
        assert markup not in out, f"reStructuredText {markup!r} in the help:\n{out}"
    undocumented = [a.option_strings or a.dest for a in actions if not a.help]
    assert not undocumented, f"options without help: {undocumented}"


def test_the_bench_list_names_every_benchmark_with_its_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in ("lu", "transactions", "osu", "patterns"):
        assert f"\n  {name} " in out
    assert "Dense LU over fence epochs" in out


def test_plain_strips_markup_and_keeps_examples() -> None:
    text = (
        "Runs :mod:`aiorma.apps.lu_solver` and :func:`~aiorma.run` with ``--n`` **twice**, a *victim*\n"
        "and patterns_*.png files.\n\n    python -m aiorma.bench lu --n 64\n        --ranks 2\n"
    )
    assert _cli.plain(text) == (
        "Runs aiorma.apps.lu_solver and run with --n twice, a victim and patterns_*.png files.\n\n"
        "    python -m aiorma.bench lu --n 64\n        --ranks 2"
    )


# ------------------------------------------------------------------- missing optional extras


@pytest.fixture
def no_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if matplotlib were not installed (a None entry makes every import of it fail)."""
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)


@pytest.mark.parametrize(
    "command",
    [
        (bench_main, ["lu", "--plot", "DIR"]),
        (bench_main, ["transactions", "--plot", "DIR"]),
        (bench_main, ["patterns", "--transport", "local", "--plot", "DIR"]),
        (sim_main, ["barrier", "--json", "out.json", "--plot", "DIR"]),
        (trace_main, ["plot", "trace.json", "--out", "epochs.png"]),
    ],
    ids=lambda c: " ".join(c[1][:1]),
)
@pytest.mark.usefixtures("no_matplotlib")
def test_plots_without_matplotlib_name_the_extra_before_running(
    command: tuple, tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    main, args = command
    monkeypatch.chdir(tmp_path)  # nothing may be written, and the trace file does not exist
    with pytest.raises(SystemExit) as exit_:
        main(args)
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert "matplotlib is not installed" in err and "pip install 'aiorma[plot]'" in err
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.usefixtures("no_matplotlib")
def test_trace_plot_function_without_matplotlib_names_the_extra(tmp_path) -> None:
    from aiorma.trace.plot import plot

    with pytest.raises(ModuleNotFoundError, match=r"pip install 'aiorma\[plot\]'"):
        plot([tmp_path / "trace.json"], tmp_path / "epochs.png")


@pytest.mark.parametrize(
    ("argv", "heading"),
    [
        (["barrier", "--sizes", "2,16", "--ways", "1,3"], "simulated µs"),
        (["bcast-topology"], "aware µs"),
        (["bcast-multicast", "--sizes", "8", "--losses", "0", "--trials", "1"], "mean µs"),
    ],
)
def test_simulations_print_their_table_without_flags(
    argv: list[str], heading: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """No --json needed: the results table goes to standard output (it refused to run without it)."""
    assert sim_main(argv) == 0
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    assert heading in lines[0] and len(lines) >= 3, out


@pytest.mark.parametrize("name", sorted(available()))
def test_every_benchmark_help_says_what_it_measures_and_in_what_unit(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        bench_main([name, "--help"])
    text = capsys.readouterr().out
    units = ("µs", "tx/s", "MB/s", "seconds", " s ", "%", "calls per")
    assert any(unit in text for unit in units), f"bench {name} --help names no unit:\n{text}"
    assert any(word in text for word in ("ratio", "median", "time", "throughput", "counted")), text
