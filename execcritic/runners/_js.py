"""Shared pieces of the JavaScript runners (jest, vitest, mocha, qunit, karma): how a command
reaches the runner binary through npx/yarn/pnpm, and jest/mocha-style test source patterns.

Why: `npx jest`, `yarn jest`, `pnpm exec jest`, `node_modules/.bin/jest` and
`node node_modules/jest/bin/jest.js` all run the same program with the same arguments; package
scripts (`yarn test`, `npm test`, `pnpm run test`) do not - what they run is written in
package.json, which a command line does not show, so they are not recognized as any runner.
"""

from __future__ import annotations

from collections.abc import Sequence

from execcritic.bundle.command import ParsedCommand
from execcritic.runners import _ml

_NPX_FLAGS = {"-y", "--yes", "--no", "--no-install", "-q", "--quiet", "--prefer-offline", "--offline"}
_JS_EXT = (".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".mts", ".cts")


def tool_args(cmd: ParsedCommand, tools: Sequence[str]) -> tuple[str, list[str]] | None:
    """(launcher prefix as text, the runner's own arguments) if `cmd` runs one of `tools`."""
    argv = list(cmd.argv)
    if not argv:
        return None
    prog = _ml.basename(argv[0])
    if prog in tools:
        return argv[0], argv[1:]
    if prog in ("node", "nodejs") and len(argv) >= 2:
        script = argv[1]
        for t in tools:
            if script.endswith((f"/.bin/{t}", f"/{t}/bin/{t}.js", f"/{t}/bin/{t}", f"/{t}.js")):
                return " ".join(argv[:2]), argv[2:]
        return None
    if prog == "npx":
        i = 1
        while i < len(argv) and argv[i] in _NPX_FLAGS:
            i += 1
        if i < len(argv) and argv[i] in tools:
            return " ".join(argv[: i + 1]), argv[i + 1 :]
        return None
    if prog in ("yarn", "pnpm", "bun"):
        i = 1
        if i < len(argv) and argv[i] in ("exec", "run", "dlx", "x"):
            i += 1
        if i < len(argv) and argv[i] in tools:
            return " ".join(argv[: i + 1]), argv[i + 1 :]
        return None
    if prog == "npm" and len(argv) >= 3 and argv[1] in ("exec", "x"):
        i = 2
        if argv[i] == "--":
            i += 1
        if i < len(argv) and argv[i] in tools:
            return " ".join(argv[: i + 1]), argv[i + 1 :]
    return None


def looks_like_file(arg: str) -> bool:
    return arg.endswith(_JS_EXT) or "/" in arg


def is_test_file(path: str) -> bool:
    return path.endswith(_JS_EXT)
