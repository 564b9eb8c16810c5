"""Which tests a patch adds, with what the hunks show of their scope (via the language modules)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from execcritic.bundle import languages
from execcritic.bundle.diff import ParsedPatch, def_base_line, parse_patch, path_problem


@dataclass(frozen=True)
class AddedTest:
    path: str
    name: str
    scope: tuple[str, ...] = ()  # enclosing classes / describe blocks seen in the patch
    scope_certain: bool = True  # False: the enclosing class is not visible in the hunk
    hints: tuple[str, ...] = ()  # sibling test names in the same block (to look the class up)
    section: str = ""  # the hunk header text (another hint)
    base_line: int | None = None  # the Base line the definition is inserted before
    indent: int | None = None  # its indentation (columns)
    occurrence: int = 0  # how many earlier added tests of this file have the same name

    @property
    def qualified(self) -> str:
        return "::".join((self.path, *self.scope, self.name))


def base_scope(added: AddedTest, read_base: Callable[[str], str | None] | None,
               language: str | None = None) -> tuple[str, ...] | None:
    """The enclosing classes (Python) or describe blocks (JS) of a test the hunk shows without them, read from the
    real Base file at the line the patch inserts it (`read_base`: path -> text; a reader of a stand-in Base says
    `exact_lines = False`, and its line numbers do not place anything). None where that cannot be told."""
    if read_base is None or added.base_line is None or added.indent is None \
            or not getattr(read_base, "exact_lines", True):
        return None
    scope_at = getattr(languages.module_for_path(added.path, language), "enclosing_scope", None)
    text = read_base(added.path) if scope_at is not None else None
    return scope_at(text.splitlines(), added.base_line, added.indent) if text else None


def added_tests(patch: str | ParsedPatch, language: str | None = None) -> list[AddedTest]:
    """Tests whose definitions the patch adds, in patch order (via the language modules)."""
    parsed = patch if isinstance(patch, ParsedPatch) else parse_patch(patch)
    out: list[AddedTest] = []
    for fd in parsed.files:
        if fd.deleted or not fd.new_path or path_problem(fd.new_path):
            continue
        mod = languages.module_for_path(fd.new_path, language)
        if mod is None:
            continue
        scoped = getattr(mod, "added_test_nodes", None)
        if scoped is not None:
            for d in scoped(fd.new_path, fd.hunk_texts()):
                out.append(
                    AddedTest(
                        fd.new_path,
                        d.name,
                        tuple(d.scope),
                        d.certain,
                        tuple(d.siblings),
                        d.section,
                        def_base_line(
                            fd, d.name, sum(1 for t in out if t.path == fd.new_path and t.name == d.name)
                        ),
                        getattr(d, "indent", None),
                        sum(1 for t in out if t.path == fd.new_path and t.name == d.name),
                    )
                )
            continue
        for name in mod.added_tests(fd.new_path, fd.added_lines, fd.removed_lines):
            out.append(AddedTest(fd.new_path, name))
    seen: set[tuple] = set()
    unique = []
    for t in out:
        key = (t.path, t.name, t.scope, None if t.scope_certain else t.base_line)
        if key not in seen:
            seen.add(key)
            unique.append(t)
    return unique
