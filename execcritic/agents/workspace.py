"""The agents' workspace: the Gold-free boundary and the Base-relative source candidate.

Gold-free boundary (paper §3.1, Listing 2): the Test agent's checkout has no route to the fix - no refs
beyond HEAD, no remotes, no reflog, no unreachable objects - and this is *verified* after sanitizing,
not assumed. Gold and the official tests are never in the workspace (it is opened from Base).

Source candidate (Appendix B.1): every Repair candidate is the complete, cumulative Base-relative
source patch - new files included (intent-to-add), test paths excluded - computed by the controller
from the workspace, so an agent's hand-made incremental diff can never change the comparison point.
HEAD is first made the prepared Base as built (commit_prepared_state).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from execcritic.bundle.gates import forbidden_for_source
from execcritic.errors import SandboxError
from execcritic.sandbox.base import Sandbox

GIT = "git -c safe.directory='*' -c core.fileMode=false -c gc.auto=0"

SANITIZE = f"""set -e
cd /testbed
head_ref=$({GIT} symbolic-ref -q HEAD || true)
for r in $({GIT} remote); do {GIT} remote remove "$r"; done
{GIT} for-each-ref --format='%(refname)' | while read -r ref; do
  [ "$ref" = "$head_ref" ] || {GIT} update-ref -d "$ref"
done
{GIT} reflog expire --expire=now --all
{GIT} stash clear 2>/dev/null || true
rm -f .git/ORIG_HEAD .git/FETCH_HEAD .git/MERGE_HEAD .git/packed-refs.lock
# --force: this checkout is the sandbox's own copy, so a gc.pid in it is stale (a cache built while a background gc
# ran; from another hostname git would refuse for 12 hours)
{GIT} gc --force --prune=now --quiet
"""

VERIFY = f"""cd /testbed
echo "remotes=$({GIT} remote | wc -l)"
head_ref=$({GIT} symbolic-ref -q HEAD || true)
echo "extra_refs=$({GIT} for-each-ref --format='%(refname)' | grep -vxF "${{head_ref:-/nonexistent}}" | wc -l)"
echo "reflog=$({GIT} reflog 2>/dev/null | wc -l)"
echo "all_commits=$({GIT} rev-list --all | wc -l)"
echo "head_commits=$({GIT} rev-list HEAD | wc -l)"
echo "unreachable=$({GIT} fsck --unreachable --no-reflogs 2>/dev/null | wc -l)"
"""


@dataclass
class SanitizeReport:
    sanitized: bool
    facts: dict[str, int] = field(default_factory=dict)
    error: str = ""

    def to_dict(self) -> dict:
        return {"sanitized": self.sanitized, "facts": self.facts, "error": self.error}


def verify_history(sandbox: Sandbox, *, allow_new_objects: bool = False) -> SanitizeReport:
    """Prove the boundary: no remotes, no refs but HEAD's, empty reflog, every commit an ancestor of
    HEAD, and (right after sanitizing) no unreachable objects. After an episode, objects the agent
    created itself (e.g. the empty blob behind `git add -N`) are allowed: they lead nowhere."""
    res = sandbox.run(VERIFY, timeout=120)
    facts: dict[str, int] = {}
    for line in res.output.splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            if v.strip().isdigit():
                facts[k.strip()] = int(v)
    expected = {"remotes", "extra_refs", "reflog", "all_commits", "head_commits", "unreachable"}
    if res.exit_code != 0 or set(facts) != expected:
        return SanitizeReport(False, facts, f"verification did not run cleanly: {res.output[-500:]}")
    ok = (facts["remotes"] == 0 and facts["extra_refs"] == 0 and facts["reflog"] == 0
          and (allow_new_objects or facts["unreachable"] == 0) and facts["all_commits"] == facts["head_commits"])
    return SanitizeReport(ok, facts, "" if ok else "history still reaches beyond HEAD")


def sanitize_history(sandbox: Sandbox) -> SanitizeReport:
    """Remove every route from the workspace's git to anything but HEAD's ancestry, then verify."""
    res = sandbox.run(SANITIZE, timeout=600)
    if res.exit_code != 0:
        return SanitizeReport(False, {}, f"sanitizing failed (exit {res.exit_code}): {res.output[-500:]}")
    return verify_history(sandbox)


@dataclass
class Candidate:
    patch: str                                  # complete Base-relative source patch ('' = no change)
    excluded_paths: list[str] = field(default_factory=list)   # test / runner-config edits left out

    @property
    def empty(self) -> bool:
        return not self.patch.strip()


def _split_diff(diff: str) -> list[tuple[str, str]]:
    """[(path, file_diff)] for a `git diff` text (path is the b/ side)."""
    chunks: list[str] = []
    for line in diff.splitlines(keepends=True):
        if line.startswith("diff --git ") or not chunks:
            chunks.append(line)
        else:
            chunks[-1] += line
    out = []
    for chunk in chunks:
        first = chunk.split("\n", 1)[0]
        try:
            parts = shlex.split(first[len("diff --git "):])
        except ValueError:
            parts = first[len("diff --git "):].split()
        path = parts[-1][2:] if parts and parts[-1].startswith("b/") else (parts[-1] if parts else "")
        out.append((path, chunk))
    return out


def export_candidate(sandbox: Sandbox, *, is_excluded=None) -> Candidate:
    """The workspace's complete Base-relative source patch.

    `git add -A -N` registers new files (intent-to-add) so `git diff HEAD` includes them;
    `is_excluded(path)` drops test and runner-config paths (recorded in `excluded_paths`). The
    prepared Base's own build outputs were committed when the workspace opened
    (`commit_prepared_state`), so HEAD is the prepared Base the verifier resets to.
    """
    is_excluded = is_excluded or forbidden_for_source
    res = sandbox.run(f"cd /testbed && {GIT} add -A -N && {GIT} diff --no-color --binary --no-ext-diff "
                      "--ignore-submodules=dirty HEAD", timeout=300)
    if res.exit_code != 0:
        raise SandboxError(f"could not export the workspace diff: {res.output[-500:]}")
    kept, excluded = [], []
    for path, chunk in _split_diff(res.output):
        if is_excluded(path):
            excluded.append(path)
            continue
        kept.append(chunk)
    patch = "".join(kept)
    if patch and not patch.endswith("\n"):
        patch += "\n"
    return Candidate(patch, excluded)


def commit_prepared_state(sandbox: Sandbox) -> list[str]:
    """Make the workspace's HEAD the prepared Base *as built*, not as released.

    An environment build leaves the checkout different from its commit: untracked build outputs
    (an sdist's `*.egg-info`) and regenerated tracked files (setuptools_scm rewrites pytest's
    `src/_pytest/_version.py`). Both are part of the prepared Base the verifier resets to, so a diff
    against the release commit would carry them and fail to apply there, and an agent's own
    `git add -AN && git diff` would put them into a test.patch. Committing them once, in the workspace
    only, makes every later `git diff HEAD` Base-relative in the verifier's sense. Returns the paths."""
    # a submodule's build outputs (jq's oniguruma) make it "dirty": not a change to the superproject
    res = sandbox.run(f"cd /testbed && {GIT} status --porcelain -z --untracked-files=all --ignore-submodules=dirty",
                      timeout=300)
    if res.exit_code != 0:
        raise SandboxError(f"could not read the workspace status: {res.output[-500:]}")
    paths = [entry[3:] for entry in res.output.split("\0") if len(entry) > 3]
    if paths:
        done = sandbox.run(f"cd /testbed && {GIT} add -A && {GIT} -c user.name=execcritic "
                           "-c user.email=harness@execcritic.invalid commit -q --no-verify "
                           "-m 'prepared environment (build outputs of the task environment)'", timeout=300)
        if done.exit_code != 0:
            raise SandboxError(f"could not record the prepared environment: {done.output[-500:]}")
    return paths
