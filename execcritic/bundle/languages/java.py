"""Java test-patch rules: Maven/Gradle `src/test/...`, and any file under a test directory (lombok's
`test/...`, lucene's `src/test`, the `.../tests/...` packages of lucene's test-framework). A class
named `*Test.java` outside a test tree is product code as far as the build is concerned (it is not
compiled with the tests), so the name alone does not make a test file.

Added tests: methods annotated `@Test`, `@ParameterizedTest`, `@RepeatedTest`, `@TestFactory`,
`@TestTemplate`, and JUnit3/LuceneTestCase-style `public void testX()` methods."""

from __future__ import annotations

import re

from execcritic.bundle.languages._common import new_names, under_test_dir

LANGUAGE = "java"
EXTENSIONS = (".java",)

_ANNOT = re.compile(
    r"^\s*@(?:org\.junit\.(?:jupiter\.api\.)?)?(Test|ParameterizedTest|RepeatedTest|TestFactory|"
    r"TestTemplate)\b"
)
_METHOD = re.compile(
    r"^\s*(?:(?:public|protected|private|static|final|synchronized|abstract|default)\s+)*"
    r"(?:<[^>]+>\s+)?[\w<>\[\],.? ]+?\s+(?P<name>\w+)\s*\("
)
_JUNIT3 = re.compile(r"^\s*public\s+(?:static\s+)?void\s+(?P<name>test\w*)\s*\(")


def is_test_path(path: str) -> bool:
    return "/src/test/" in "/" + path or under_test_dir(path)


def added_tests(path: str, added_lines: list[str], removed_lines: list[str]) -> list[str]:
    def names(lines: list[str]) -> list[str]:
        out, pending = [], False
        for line in lines:
            s = line.strip()
            if _ANNOT.match(line):
                pending = True
                continue
            if s.startswith(("@", "//", "*", "/*")) or not s:
                continue
            m = _JUNIT3.match(line)
            if m:
                out.append(m.group("name"))
            elif pending:
                m = _METHOD.match(line)
                if m:
                    out.append(m.group("name"))
            pending = False
        return out

    return new_names(names, added_lines, removed_lines)
