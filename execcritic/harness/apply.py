"""Apply a patch inside a sandbox, recording how (or why not).

Source patches (Repair candidates, Gold) use swebench's order of attempts - `git apply`, then
`patch --fuzz` - with an exact sandbox reset between attempts, so a half-applied attempt never leaks
into the next. A bundle's test.patch must apply exactly (`git apply` only): it was written against Base.
"""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass

from execcritic.errors import SandboxError
from execcritic.sandbox.base import Sandbox

PATCH_DIR = "/tmp/execcritic"
APPLY_TIMEOUT_S = 120.0

GIT_APPLY = "git -c safe.directory='*' apply --whitespace=nowarn --verbose {path}"
FUZZY_APPLY = "patch --batch --forward --fuzz=5 -p1 -i {path}"


@dataclass(frozen=True)
class ApplyResult:
    applied: bool
    method: str | None      # "git apply" | "patch --fuzz" | None
    diagnostic: str         # bounded stderr/stdout of the failed attempts (empty when applied)


def normalize_patch(text: str) -> str:
    """Patches travel as text; git requires a trailing newline (swebench #383)."""
    return text if text.endswith("\n") else text + "\n"


def sha256(text: str | None) -> str:
    return hashlib.sha256(text.encode()).hexdigest() if text else ""


def apply_patch(sandbox: Sandbox, patch: str, *, name: str, fuzzy: bool, diag_chars: int = 12_000) -> ApplyResult:
    """Apply `patch` at /testbed. Raises SandboxError only if the sandbox itself fails."""
    path = f"{PATCH_DIR}/{name}.patch"
    sandbox.run(f"mkdir -p {PATCH_DIR}", timeout=30)
    sandbox.write_file(path, normalize_patch(patch))
    attempts = [("git apply", GIT_APPLY)] + ([("patch --fuzz", FUZZY_APPLY)] if fuzzy else [])
    diagnostics = []
    for i, (method, template) in enumerate(attempts):
        if i > 0:
            # exact reset, then restore the patch file (reset empties /tmp)
            sandbox.reset()
            sandbox.run(f"mkdir -p {PATCH_DIR}", timeout=30)
            sandbox.write_file(path, normalize_patch(patch))
        res = sandbox.run(template.format(path=shlex.quote(path)), timeout=APPLY_TIMEOUT_S)
        if res.timed_out:
            raise SandboxError(f"applying {name}.patch timed out after {APPLY_TIMEOUT_S:.0f} s")
        if res.exit_code == 0:
            return ApplyResult(True, method, "")
        diagnostics.append(f"$ {method}\n{res.output.strip()}")
    text = "\n\n".join(diagnostics)
    if len(text) > diag_chars:
        text = text[: diag_chars // 2] + "\n...[truncated]...\n" + text[-diag_chars // 2:]
    return ApplyResult(False, None, text)
