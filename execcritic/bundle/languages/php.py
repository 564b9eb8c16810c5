"""PHP test-patch rules: files under a test directory (`tests/`, `tests/Fixtures/`), `*Test.php`
anywhere (PHPUnit's default suffix) and `.phpt` tests. Added tests are methods named `test*` or
marked `@test` / `#[Test]` - returned as method names; the PHPUnit runner turns them into testdox
names (its SWE-bench naming) when it binds them."""

from __future__ import annotations

import posixpath
import re

from execcritic.bundle.languages._common import new_names, under_test_dir

LANGUAGE = "php"
EXTENSIONS = (".php", ".phpt")

_FUNC = re.compile(
    r"^\s*(?:(?:public|protected|private|static|final|abstract)\s+)*function\s+(?P<name>\w+)\s*\("
)
_MARK = re.compile(r"(@test\b|#\[\s*(?:\\?PHPUnit\\Framework\\Attributes\\)?Test\s*\])")


def is_test_path(path: str) -> bool:
    base = posixpath.basename(path)
    return base.endswith(("Test.php", ".phpt")) or under_test_dir(path)


def added_tests(path: str, added_lines: list[str], removed_lines: list[str]) -> list[str]:
    def names(lines: list[str]) -> list[str]:
        out, marked = [], False
        for line in lines:
            if _MARK.search(line):
                marked = True
            m = _FUNC.match(line)
            if m:
                if m.group("name").startswith("test") or marked:
                    out.append(m.group("name"))
                marked = False
        return out

    return new_names(names, added_lines, removed_lines)
