"""What every run of repository code gets from the harness, on every path (bundle execution, official
evaluation): the tree judged after the patches are applied, and the harness-owned results reporter.

- Tree judging: the gates read a patch's text, but what runs is the tree. After applying, the paths that
  actually changed in the sandbox must be exactly the paths the patches declare (a second diff hidden in a
  patch's preamble, a fuzzy apply that touched something else, a file the apply created on the side: all
  invalid).
- The reporter: a Python test run is started with the reporter's directory first on PYTHONPATH and a one-shot
  socket in the environment (harness/reporter/), its test process kept single (no worker processes), and a
  hash seed the harness picks and records, so that a flaky run can be reproduced.
"""

from __future__ import annotations

import secrets
import shlex
from typing import Any, Callable, Iterable

from execcritic.bundle.command import ParsedCommand
from execcritic.bundle.diff import parse_patch
from execcritic.harness.prestart import Prestarted
from execcritic.harness.reporter.channel import ENV_SOCKET, ReporterChannel, sandbox_facts
from execcritic.harness.reporter.stream import ReporterReport
from execcritic.runners.base import Runner
from execcritic.sandbox.base import HARNESS_MOUNT, CommandResult, Sandbox


def declared_paths(*patches: str | None) -> set[str]:
    out: set[str] = set()
    for text in patches:
        if text and text.strip():
            for fd in parse_patch(text).files:
                out.update(p for p in fd.paths if p)
    return out


def added_lines(patch: str | None, read: Callable[[str], str | None] | None = None) -> dict[str, list[list[int]] | None]:
    """Post-image line ranges ([first, last], 1-based) of the lines a patch adds, per file: the code the
    candidate wrote, for the guard's rules on frame access, trace functions and signal handlers.

    `read(path)`: the file as applied. A patch applies with offsets (`git apply`) where the checkout is not the
    tree it was written against (verified-sdist's release trees), so each hunk is found in the applied file -
    its new side, nearest the header's line - rather than trusted at the header's number (measured: Django-14017's
    Gold, written at line 43, applies at line 73, and the header put its added line inside a metaclass's
    `__subclasscheck__`). A hunk not found (a fuzzy apply) leaves the file without ranges (None): all of it is
    then the candidate's."""
    out: dict[str, list[list[int]] | None] = {}
    if not patch or not patch.strip():
        return out
    for fd in parse_patch(patch).files:
        if not fd.new_path:
            continue
        text = read(fd.new_path) if read is not None else None
        lines = text.splitlines() if text is not None else None
        ranges: list[list[int]] = []
        shift = 0
        for hunk in fd.hunks:
            start = hunk.new_start + shift
            if lines is not None:
                found = _locate([ln[1:] for ln in hunk.lines if ln[:1] in (" ", "+")], lines, start)
                if found is None:
                    ranges = None
                    break
                shift, start = found - hunk.new_start, found
            line = start
            for t in hunk.lines:
                if t.startswith("+"):
                    if ranges and ranges[-1][1] == line - 1:
                        ranges[-1][1] = line
                    else:
                        ranges.append([line, line])
                    line += 1
                elif t.startswith(" "):
                    line += 1
        out[fd.new_path] = ranges
    return out


def _locate(block: list[str], lines: list[str], near: int) -> int | None:
    """The 1-based line where `block` stands in `lines`, the occurrence nearest `near`; None if nowhere."""
    if not block:
        return near
    n = len(block)
    starts = [i + 1 for i in range(len(lines) - n + 1) if lines[i] == block[0] and lines[i:i + n] == block]
    return min(starts, key=lambda s: abs(s - near)) if starts else None


def candidate_facts(patch: str | None, test_patch: str | None = None,
                    read: Callable[[str], str | None] | None = None) -> dict[str, Any]:
    """What the reporter is told about the run: the files the source patch changes and the lines it adds (found
    in the applied files through `read`, see `added_lines`), and the test files (their content is read when the
    interpreter starts, before any code of the checkout runs: the reference the test functions are compared
    with cannot be rewritten on disk by the code under test)."""
    lines = {p: r for p, r in added_lines(patch, read).items() if r is not None}
    return {"changed": sorted(declared_paths(patch)), "changed_lines": lines,
            "test_files": sorted(p for p in declared_paths(test_patch) if p.endswith(".py"))}


def tree_problem(changed: Iterable[str], declared: set[str], *, backups: bool = False) -> str | None:
    """Why the changed tree is not what the patches declare, or None. Directories that appear or vanish
    with declared files are implied; `backups` allows GNU patch's `<file>.orig` beside a declared file."""
    changed = set(changed)
    extra = {c for c in changed if c not in declared
             and not any(d.startswith(c + "/") for d in declared)
             and not (backups and c.endswith(".orig") and c[:-5] in declared)}
    missing = {d for d in declared if d not in changed and not any(d.startswith(c + "/") for c in changed)}
    if not extra and not missing:
        return None
    parts = []
    if extra:
        parts.append("changed without being declared: " + ", ".join(sorted(extra)[:8]))
    if missing:
        parts.append("declared but unchanged: " + ", ".join(sorted(missing)[:8]))
    return "applying the patches left a tree that is not what they declare (" + "; ".join(parts) + ")"


def instrumented_command(runner: Runner, cmd: ParsedCommand, hashseed: int) -> str:
    """The shell text that runs `cmd` under the reporter: in one process, the reporter first on
    PYTHONPATH (after the environment's own activation, which may set PYTHONPATH), the recorded seed."""
    cmd = runner.in_process_command(cmd)
    parts = [f"cd {shlex.quote(cmd.cd)} &&"] if cmd.cd else []
    seed = next((v for k, v in cmd.env if k == "PYTHONHASHSEED"), str(int(hashseed)))
    # a launcher (tox) that makes the tests' environment itself gets the reporter's variables for that
    # interpreter only: the launcher's own interpreter must not start a second reporter on the channel
    launched = runner.launched_command(cmd, {"PYTHONPATH": HARNESS_MOUNT, "PYTHONHASHSEED": seed}, [ENV_SOCKET])
    if launched is not None:
        cmd = launched
    else:
        parts.append(f"PYTHONPATH={HARNESS_MOUNT}${{PYTHONPATH:+:$PYTHONPATH}}")
        if not any(k == "PYTHONHASHSEED" for k, _ in cmd.env):
            parts.append(f"PYTHONHASHSEED={int(hashseed)}")
    parts.extend(f"{k}={shlex.quote(v)}" for k, v in cmd.env)
    parts.extend(shlex.quote(a) for a in cmd.argv)
    return " ".join(parts)


def new_hashseed() -> int:
    return secrets.randbelow(2**32)


def run_reported(sandbox: Sandbox, command: str, *, timeout: float, facts: dict[str, Any], cwd: str | None = None,
                 script_writes_tests: bool = False, known: dict[str, bytes] | None = None,
                 prestarted: Prestarted | None = None,
                 then: Callable[[], None] | None = None) -> tuple[CommandResult, ReporterReport]:
    """Run `command` with the reporter's channel open; read the stream only after the sandbox ended the
    run and killed its process tree. The test files and the candidate's files must leave the run as they
    entered it: code that rewrites them on disk (and maybe back) is tampering, whatever it printed.
    `script_writes_tests`: the command is an eval script that itself checks the test files out, patches and
    restores them around its test command (swebench's; its final `git checkout` of several paths fails as a
    whole when the test patch adds a file, leaving them patched). Then only the candidate's files are
    compared here; the test files the test command ran are still the reporter's reference, read when its
    interpreter started, so code rewriting them on disk still fails the test-code check.
    `known`: contents of some watched files the caller has just read or written (not read again).
    `prestarted`: `command` was started ahead of time (harness/prestart.py): release it instead of starting.
    `then`: called once the run goes (the caller's work meanwhile: the next check's interpreter)."""
    if sandbox.channel_dir is None:
        raise RuntimeError(f"the {sandbox.backend} sandbox has no reporter channel directory")
    watched = sorted(set(() if script_writes_tests else facts.get("test_files", ())) | set(facts.get("changed", ())))
    before = {**_contents(sandbox, [p for p in watched if p not in (known or {})]),
              **{p: data for p, data in (known or {}).items() if p in watched}}
    if prestarted is not None:
        channel = prestarted.channel
        prestarted.spawned.foreground()          # started in the background while another run went
        channel.go({**sandbox_facts(sandbox), **facts})
    else:
        channel = ReporterChannel(sandbox.channel_dir, {**sandbox_facts(sandbox), **facts})
    try:
        if then is not None:
            then()
        result = (prestarted.spawned.wait(timeout) if prestarted is not None else
                  sandbox.run(command, timeout=timeout, env=channel.env, cwd=cwd, reporter=True))
    except BaseException:
        if prestarted is not None:
            prestarted.end()
        channel.close()
        raise
    report = channel.finish()
    after = _contents(sandbox, watched)
    for path in watched:
        if before.get(path) != after.get(path):
            report.tampers.append({"what": "tree_modified", "detail": f"{path} changed on disk during the run "
                                                                      "(a test or candidate file is input, not output)"})
    return result, report


def _contents(sandbox: Sandbox, paths: list[str]) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for path in paths:
        try:
            out[path] = sandbox.read_file(f"{sandbox.workdir.rstrip('/')}/{path}")
        except (FileNotFoundError, IsADirectoryError):
            out[path] = None
    return out
