"""What the command-line tools (``python -m aiorma.bench``, ``aiorma.sim``, ``aiorma.trace``) share:
``--help`` text as plain text, made from the modules' reStructuredText docstrings so that there is
one text to keep accurate, and a one-line message naming the pip extra, instead of a traceback,
when an optional dependency is missing."""

from __future__ import annotations

import argparse
import importlib
import re
import textwrap
from pathlib import Path
from types import ModuleType

# :func:`name`, :mod:`~package.module` (the tilde shows only the last component).
_ROLE = re.compile(r":[a-z]+:`(~?)([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")
_STRONG = re.compile(r"\*\*([^*]+)\*\*")
_EMPHASIS = re.compile(r"(?<![\w*])\*(\w[^*]*)\*(?![\w*])")
WIDTH = 96


def plain(text: str) -> str:
    """``text`` (a docstring in reStructuredText) without its inline markup (literals, roles,
    bold, italics become their bare text), its prose paragraphs refilled to :data:`WIDTH`
    columns; indented blocks (command examples) are kept as they are."""
    text = _ROLE.sub(lambda m: m[2].rsplit(".", 1)[-1] if m[1] else m[2], text)
    text = _LITERAL.sub(r"\1", text)
    text = _EMPHASIS.sub(r"\1", _STRONG.sub(r"\1", text))
    paragraphs = []
    for paragraph in text.strip().split("\n\n"):
        if paragraph.startswith(" "):
            paragraphs.append(paragraph)
        elif paragraph.startswith(("* ", "- ")):
            paragraphs.append(textwrap.fill(paragraph, WIDTH, subsequent_indent="  "))
        else:
            paragraphs.append(textwrap.fill(paragraph, WIDTH))
    return "\n\n".join(paragraphs)


def summary(text: str | None) -> str:
    """The first paragraph of a docstring on one line, as plain text (for lists of commands)."""
    return " ".join(plain(text or "").split("\n\n", 1)[0].split())


def command_parser(prog: str, doc: str | None, **kwargs: object) -> argparse.ArgumentParser:
    """An ArgumentParser whose description is ``doc`` as plain text, with its line breaks kept
    (so paragraphs and command examples stay readable)."""
    return argparse.ArgumentParser(
        prog=prog,
        description=plain(doc or ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **kwargs,  # type: ignore[arg-type]
    )


def import_extra(module: str, extra: str) -> ModuleType:
    """Import the optional dependency ``module``; without it, raise ModuleNotFoundError whose
    message says to install aiorma's extra ``extra``."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            f"{module} is not installed; install it with: pip install 'aiorma[{extra}]'", name=exc.name
        ) from exc


def missing_extra(module: str, extra: str) -> str | None:
    """None if the optional dependency ``module`` imports; otherwise what to install, naming
    aiorma's extra ``extra`` (``pip install 'aiorma[extra]'``)."""
    try:
        importlib.import_module(module)
    except ImportError:
        return f"{module} is not installed; install it with: pip install 'aiorma[{extra}]'"
    return None


def plot_directory(text: str) -> Path:
    """The argparse ``type`` of ``--plot DIR``: refuses at parse time, before a long run, when
    matplotlib is missing (argparse then prints the message and exits with status 2)."""
    if (problem := missing_extra("matplotlib", "plot")) is not None:
        raise argparse.ArgumentTypeError(f"plots need matplotlib, but {problem}")
    return Path(text)
