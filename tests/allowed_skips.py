"""The skips a CI run may show: what no command on this kind of machine can provide. Everything else a test
needs (a task environment, Go from Debian, a Docker image built with debootstrap, the embedded model) is
built or installed by the suite, so under CI=true any other skip fails the run (tests/conftest.py): a test
that silently does not run on a fresh machine is a test a new contributor does not have.

A test that may skip for one of these reasons says so with `allowed(key, detail)`.
"""

from __future__ import annotations

ALLOWED = {
    "official-image": "an official `sweb.eval.*` SWE-bench image: it comes from a container registry, and this "
                      "machine reaches none (swebench's Docker path is tested against a locally built image)",
    "maven-central": "Maven plugins and JUnit: they come from Maven Central, which is not among this machine's "
                     "registries (PyPI, Debian, npm); the Maven test runs where ~/.m2 already holds them",
    "gpu": "a CUDA GPU: this machine has none (GPU checks run on a lent device machine)",
    "git-mirror": "a git source for a real SWE-bench repository at its rows' base commits: GitHub is not among this "
                  "machine's registries, so the real-row tests run where $EXECCRITIC_GIT_SOURCES names a mirror "
                  "(the fixtures' local repositories test the same paths everywhere)",
}


def allowed(key: str, detail: str) -> str:
    """The reason text of an allowed skip: `pytest.skip(allowed("official-image", "..."))`."""
    if key not in ALLOWED:
        raise KeyError(f"{key!r} is not on tests/allowed_skips.py's list")
    return f"[allowed: {key}] {detail}"


def is_allowed(reason: str) -> bool:
    return any(f"[allowed: {key}]" in reason for key in ALLOWED)
