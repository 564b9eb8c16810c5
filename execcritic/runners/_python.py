"""The Python interpreter's own command line, shared by the Python runners.

`python [options] SCRIPT args` and `python [options] -m MODULE args` are the two shapes a test
command can take; everything else (`-c CODE`, an option we do not know) is not a test command we
can bind, so it is refused rather than guessed at.
"""

from __future__ import annotations

import re
from typing import Literal

PYTHON_EXE = re.compile(r"^(python|python3|python3\.\d+|python2(\.\d+)?|pypy3?)$")
_FLAGS = re.compile(r"^-[bBdEiIOqsSuvR]+$")


def is_python(program: str) -> bool:
    return bool(PYTHON_EXE.match(program.rsplit("/", 1)[-1]))


def python_main(argv: list[str]) -> tuple[Literal["script", "module"], int] | None:
    """For an interpreter command line: whether it runs a script or a module, and the index of the
    script path / module name in `argv`. None when argv[0] is not Python or the shape is unknown."""
    if not argv or not is_python(argv[0]):
        return None
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "-m":
            return ("module", i + 1) if i + 1 < len(argv) else None
        if a in ("-X", "-W"):
            i += 2
        elif _FLAGS.match(a) or a.startswith(("-X", "-W")):
            i += 1
        elif a.startswith("-"):
            return None
        else:
            return "script", i
    return None
