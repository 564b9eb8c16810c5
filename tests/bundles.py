"""Build real bundles and source patches against a demo task's Base (patches made by git, not by hand)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Callable

from execcritic.bundle.model import TestBundle
from tests.demo_tasks import GIT_ENV, DemoTask

SCENARIO_FILE = "test_execcritic_scenario.py"


def diff_after(repo: Path, edit) -> str:
    """Copy `repo`, apply `edit(copy_path)`, return `git diff` (new files via intent-to-add)."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "w"
        shutil.copytree(repo, work, symlinks=True)
        edit(work)
        env = {**os.environ, **GIT_ENV}
        subprocess.run(["git", "add", "-A", "-N"], cwd=work, env=env, check=True)
        return subprocess.run(["git", "diff", "--no-color"], cwd=work, env=env, check=True, capture_output=True,
                              text=True).stdout


def checkout_diff(checkout: Path, edits: dict[str, Callable[[str | None], str | None]], *,
                  after: str = "") -> str:
    """`git diff` of a (large) Base checkout after the patch `after` (say, a task's test patch) and then
    `edits` (path -> function of the old text, None for a new file; returning None deletes). Works in a shared clone with only the edited paths checked out:
    git diffs per path against the same blobs, so the diff equals one made in a full copy, without copying
    the checkout or picking up its untracked build files."""
    def git(cwd: Path, *args: str) -> str:
        return subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, check=True,
                              capture_output=True, text=True).stdout

    with tempfile.TemporaryDirectory(prefix="execcritic-diff-") as tmp:
        work = Path(tmp) / "w"
        git(Path(tmp), "clone", "-q", "--shared", "--no-checkout", str(checkout), str(work))
        git(work, "read-tree", "HEAD")
        paths = sorted(set(edits) | set(re.findall(r"^(?:\+\+\+ b|--- a)/(\S+)", after, re.M)))
        tracked = sorted(set(git(work, "ls-files", "-z", "--", *paths).split("\0")) - {""})
        if tracked:
            git(work, "checkout-index", "-f", "--", *tracked)
        if after:
            subprocess.run(["git", "apply", "-"], cwd=work, input=after, text=True, check=True)
        for rel, fn in edits.items():
            path = work / rel
            new = fn(path.read_text() if path.exists() else None)
            if new is None:
                path.unlink()
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(new)
        git(work, "add", "-N", "--", *paths)
        return git(work, "diff", "--no-color", "--", *paths)


def contract(nodes: list[str]) -> dict:
    return {"entrypoint": "the library function named in the issue", "trigger": "the issue's example input",
            "expected_output": "the corrected result the issue describes",
            "issue_evidence": ["the issue text"], "alternative_hypotheses": ["the documented behavior is wrong"],
            "non_assertions": ["exact error messages"], "test_nodes": nodes}


class ScenarioKit:
    """Bundles for one demo task and one sandbox."""

    def __init__(self, demo: DemoTask, sandbox):
        self.demo = demo
        self.task = demo.task
        self.sandbox = sandbox
        self.test_dir = str(Path(demo.spec.test_file).parent)

    def command(self, file: str, names: list[str]) -> str:
        return "python3 -m pytest -p no:cacheprovider " + " ".join(f"{file}::{n}" for n in names)

    def official_bundle(self, extra_files: dict[str, str] | None = None) -> TestBundle:
        def edit(w: Path) -> None:
            subprocess.run(["git", "apply", "-"], cwd=w, input=self.task.test_patch, text=True, check=True)
            for rel, text in (extra_files or {}).items():
                (w / rel).write_text(text)

        patch = diff_after(self.demo.repo, edit)
        names = [n.split("::")[-1] for n in self.task.fail_to_pass]
        return TestBundle.from_contract(patch, self.command(self.demo.spec.test_file, names), contract(names))

    def bundle(self, code: str, nodes: list[str], *, new_file: bool = False) -> TestBundle:
        file = f"{self.test_dir}/{SCENARIO_FILE}" if new_file else self.demo.spec.test_file

        def edit(w: Path) -> None:
            p = w / file
            p.write_text(code if new_file else p.read_text() + "\n\n" + code)

        return TestBundle.from_contract(diff_after(self.demo.repo, edit), self.command(file, nodes), contract(nodes))

    def source_patch(self, replace_line: str) -> str:
        spec = self.demo.spec

        def edit(w: Path) -> None:
            p = w / spec.source_file
            p.write_text(p.read_text().replace(spec.buggy, replace_line))

        return diff_after(self.demo.repo, edit)

    def recursing_patch(self) -> str:
        return self.source_patch(self.demo.spec.recursing)

    def conftest_patch(self, code: str) -> str:
        return diff_after(self.demo.repo, lambda w: (w / "conftest.py").write_text(code))

    def comment_patch(self) -> str:
        """A wrong candidate: changes the source file without fixing anything."""
        spec = self.demo.spec
        return self.source_patch(spec.buggy.rstrip("\n") + "  # candidate\n")


__all__ = ["ScenarioKit", "checkout_diff", "contract", "diff_after"]
