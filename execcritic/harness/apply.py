"""Apply a patch inside a sandbox, recording how (or why not) - one ladder function for every path.

A *ladder* is the order of attempts. Between attempts the sandbox is reset exactly, so a half-applied
attempt never leaks into the next (swebench does `git checkout -- . ; git clean -fd`, which here would
also drop the environment build's untracked outputs):
- `SOURCE`: Repair candidates and Gold in the harness - `git apply`, then `patch --fuzz`;
- `TEST`: a bundle's test.patch was written against Base and must apply exactly (`git apply` only);
- `SWEBENCH`: the official evaluator's order, swebench's `GIT_APPLY_CMDS` verbatim, and an already
  applied patch accepted as swebench accepts it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from execcritic.config import PAPER
from execcritic.errors import SandboxError
from execcritic.hashing import text_sha256
from execcritic.sandbox.base import Sandbox

PATCH_DIR = "/tmp/execcritic"

# swebench.harness.run_evaluation.GIT_APPLY_CMDS, in its order (kept literal: importing that module pulls
# in the docker SDK; tests assert the two lists agree).
SWEBENCH_APPLY_CMDS = (
    "git apply --verbose",
    "git apply --verbose --3way",
    "git apply --verbose --reject",
    "patch --batch --forward --fuzz=5 -p1 -i",
)


@dataclass(frozen=True)
class Ladder:
    name: str
    attempts: tuple[tuple[str, str], ...]    # (method label, command template taking {path})
    accept_already_applied: bool = False


SOURCE = Ladder("source", (("git apply", "git -c safe.directory='*' apply --whitespace=nowarn --verbose {path}"),
                           # no `.orig` backups: the tree is judged after applying, and a backup is a
                           # path the patch does not declare
                           ("patch --fuzz", "patch --batch --forward --no-backup-if-mismatch --fuzz=5 -p1 -i {path}")))
TEST = Ladder("test", (("git apply", "git -c safe.directory='*' apply --whitespace=nowarn --verbose {path}"),))
SWEBENCH = Ladder("swebench", tuple((cmd, f"{cmd} {{path}}") for cmd in SWEBENCH_APPLY_CMDS),
                  accept_already_applied=True)
ALREADY_APPLIED = "git apply --reverse --check (already applied)"


@dataclass(frozen=True)
class ApplyResult:
    applied: bool
    method: str | None      # the ladder label that applied it; None when nothing did
    diagnostic: str         # bounded output of the failed attempts (empty when applied)


def normalize_patch(text: str) -> str:
    """Patches travel as text; git requires a trailing newline (swebench #383)."""
    return text if text.endswith("\n") else text + "\n"


def sha256(text: str | None) -> str:
    return text_sha256(text)


def apply_patch(sandbox: Sandbox, patch: str, *, name: str, ladder: Ladder, timeout: float,
                diag_chars: int = PAPER.repair.apply_diagnostics_chars) -> ApplyResult:
    """Apply `patch` at /testbed by `ladder`. Raises SandboxError only if the sandbox itself fails (or an
    attempt outlives `timeout`)."""
    path = f"{PATCH_DIR}/{name}.patch"
    data = normalize_patch(patch).encode()
    # the patch file is written by the same command that applies it (one sandbox process per attempt)
    place = f"mkdir -p {PATCH_DIR} && cat > {shlex.quote(path)} && "

    diagnostics = []
    for i, (method, template) in enumerate(ladder.attempts):
        if i > 0:
            sandbox.reset()  # exact reset (it empties /tmp: the patch file is placed again)
        res = sandbox.run(place + template.format(path=shlex.quote(path)), timeout=timeout, stdin=data)
        if res.timed_out:
            raise SandboxError(f"applying {name}.patch ({method}) timed out after {timeout:.0f} s")
        if res.exit_code == 0:
            return ApplyResult(True, method, "")
        diagnostics.append(f"$ {method}\n{res.output.strip()}")
    if ladder.accept_already_applied:
        sandbox.reset()
        res = sandbox.run(place + f"git apply --check --reverse {shlex.quote(path)}", timeout=timeout, stdin=data)
        if res.exit_code == 0:
            return ApplyResult(True, ALREADY_APPLIED, "")
    sandbox.reset()
    text = "\n\n".join(diagnostics)
    if len(text) > diag_chars:
        text = text[: diag_chars // 2] + "\n...[truncated]...\n" + text[-diag_chars // 2:]
    return ApplyResult(False, None, text)
