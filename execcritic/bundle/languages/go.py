"""Go test-patch rules: `*_test.go` files, anything under `testdata/` (the go tool ignores it) or another
test directory (terraform's `internal/providers/testing/provider_mock.go` is a test helper package
that SWE-bench's own split puts in the test patch). Added tests are `func TestX(t *testing.T)` and
`func FuzzX(f *testing.F)`; `TestMain` is set-up, not a test."""

from __future__ import annotations

import posixpath
import re

from execcritic.bundle.languages._common import under_test_dir

LANGUAGE = "go"
EXTENSIONS = (".go",)

_FUNC = re.compile(r"^func\s+(?P<name>(?:Test|Fuzz)\w*)\s*\(\s*\w+\s+\*testing\.[TF]\b")


def is_test_path(path: str) -> bool:
    return path.endswith("_test.go") or under_test_dir(path)


def test_support_path(path: str) -> bool:
    """Data files of a test-harness package: a directory named `*test`/`*tests` (caddy's
    `caddytest/integration/caddyfile_adapt/*.caddyfiletest`, which SWE-bench's split puts in the test
    patch) or files with a `.golden`/`*test` extension."""
    dirs = [d.lower() for d in path.split("/")[:-1]]
    base = posixpath.basename(path).lower()
    return any(d.endswith(("test", "tests")) for d in dirs) or base.endswith((".golden", "test"))


def added_tests(path: str, added_lines: list[str], removed_lines: list[str]) -> list[str]:
    if not path.endswith("_test.go"):
        return []
    removed = {m.group("name") for m in map(_FUNC.match, removed_lines) if m}
    out: list[str] = []
    for line in added_lines:
        m = _FUNC.match(line)
        if (
            m
            and m.group("name") != "TestMain"
            and m.group("name") not in removed
            and m.group("name") not in out
        ):
            out.append(m.group("name"))
    return out
