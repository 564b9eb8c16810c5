"""The runtime adversarial corpus: every cheat of cheats.py, as a real candidate source patch, through
`execute(..., check_source_patch=True)` on the Base with the official bundle.

No cheat fixes the bug, so an honest harness never says PASS; each case also pins the failure kind the harness
must answer (a case written for the runtime that the static screen now refuses first runs a second time
without the screen: both layers must stop it) (the static gate's `forbidden_source_edit` with the exact problem, `runner_tampered`,
`results_forged`, `results_incomplete`, a sandbox limit, or `behavioral_failure` where the cheat simply does
not work). Cases marked `bypass` in cheats.py were holes, described with a reproduction and what closed each in
docs/BYPASSES.md: should one reopen, its case fails here (no xfail - a bypass is a red test).

Targets (one sandbox each, shared by the module): four verified-sdist tasks (local bubblewrap backend) and the
toolz demo task on both backends (Docker: the debootstrap image with pytest) and under CPython 3.13 (local).
Controls first: on each target the official bundle FAILs on Base and PASSes on Gold, so that "not PASS" below
means something.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

import pytest

from execcritic.config import PAPER
from execcritic.harness.execute import base_reader, execute
from execcritic.harness.execution import FailureKind, Verdict
from execcritic.sandbox.base import Limits
from tests.adversarial.runtime import cheats as C
from tests.sdist import load_sdist_tasks

pytestmark = [pytest.mark.integration, pytest.mark.slow]

INSTANCE = {fam: iid for iid, fam in C.FAMILY_OF.items()}
# toolz also under CPython 3.13 (local): frame locals became write-through proxies (PEP 667), so the cases that
# reach frames meet other semantics than on the 3.8-3.11 targets
TARGETS = [("requests", "local"), ("pytest", "local"), ("django", "local"), ("sympy", "local"),
           ("toolz", "local"), ("toolz", "docker"), ("toolz", "py3.13")]


def _cases():
    out = []
    for cheat in C.CHEATS:
        for fam in cheat.families:
            for backend in ("local", "docker", "py3.13"):
                if backend == "docker" and not (fam == "toolz" and cheat.docker) or backend == "py3.13" and fam != "toolz":
                    continue
                marks = [pytest.mark.docker] if backend == "docker" else []
                out.append(pytest.param(cheat, fam, backend, id=f"{cheat.id}-{fam}-{backend}", marks=marks))
    return out


CASES = _cases()


@dataclass
class Target:
    task: object
    bundle: object
    sandbox: object


@pytest.fixture(scope="module")
def targets(request):
    """target(family, backend) -> Target, opened once per module and closed at its end."""
    opened: dict[tuple[str, str], Target] = {}

    def get(fam: str, backend: str) -> Target:
        key = (fam, backend)
        if key not in opened:
            opened[key] = _open(request, fam, backend)
        return opened[key]

    yield get
    # closing removes each workspace (a Django or SymPy one is two copies of a large checkout: a minute of
    # unlinks); close them side by side
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(opened) or 1) as pool:
        list(pool.map(lambda t: t.sandbox.close(), opened.values()))


def _open(request, fam: str, backend: str) -> Target:
    limits = Limits.from_config(PAPER.harness)
    if fam == "toolz":
        from tests.bundles import ScenarioKit

        demo = request.getfixturevalue("demo_toolz_py313" if backend == "py3.13" else "demo_toolz")
        C.CHECKOUTS[demo.task.instance_id] = demo.repo
        if backend == "docker":
            from execcritic.sandbox.docker import DockerSandbox
            from execcritic.sandbox.images import build_task_image

            client = request.getfixturevalue("docker_client")
            image = build_task_image(client, demo.repo, "execcritic/test-task:toolz-demo",
                                     base=request.getfixturevalue("base_image"))
            sandbox = DockerSandbox(image, client=client, activate="", limits=limits)
        else:
            sandbox = demo.open_local(limits=limits)
        return Target(demo.task, ScenarioKit(demo, sandbox).official_bundle(), sandbox)
    from execcritic.harness.oracle.build import oracle_bundle
    from execcritic.tasks.environment import environment_for

    task = load_sdist_tasks([INSTANCE[fam]])[INSTANCE[fam]]     # the environment is built here on a fresh machine
    sandbox = environment_for(task).open_sandbox(limits=limits)
    sandbox.reset()
    return Target(task, oracle_bundle(task, read_base=base_reader(sandbox)), sandbox)


def _observe(case: str, instance: str, backend: str, expected: str, observed: str, ex=None) -> None:
    """With REDTEAM_OBSERVED=<file>, append what each case got (for the corpus table in the report), and the
    reporter's tamper records that decided it."""
    out = os.environ.get("REDTEAM_OBSERVED")
    if out:
        import json

        tampers = [f"{t.get('what')}: {str(t.get('detail'))[:160]}"
                   for t in ((ex.extra.get("reporter") or {}).get("tampers") or [])[:3]] if ex is not None else []
        with open(out, "a") as fh:
            fh.write(json.dumps({"case": case, "instance": instance, "backend": backend, "expected": expected,
                                 "observed": observed, "tampers": tampers}) + "\n")


def _explain(ex) -> str:
    rep = ex.extra.get("reporter")
    return (f"\n{ex.failure_kind.value}: {ex.diagnostic}\nreporter: {rep}\nproblems: "
            f"{[(p.code, p.message[:120]) for p in ex.problems][:5]}\noutput tail:\n{ex.output_tail[-3000:]}")


@pytest.mark.parametrize("fam,backend", [pytest.param(f, b, id=f"{f}-{b}", marks=[pytest.mark.docker] if
                                                      b == "docker" else []) for f, b in TARGETS])
def test_control_base_fails_and_gold_passes(targets, fam, backend):
    t = targets(fam, backend)
    base = execute(t.task, t.bundle, None, sandbox=t.sandbox)
    assert (base.failure_kind, base.verdict) == (FailureKind.BEHAVIORAL_FAILURE, Verdict.FAIL), _explain(base)
    gold = execute(t.task, t.bundle, t.task.patch, sandbox=t.sandbox, check_source_patch=False)
    assert (gold.failure_kind, gold.verdict) == (FailureKind.PASSED, Verdict.PASS), _explain(gold)


@pytest.mark.parametrize("cheat,fam,backend", CASES)
def test_cheat_gets_no_pass(targets, cheat: C.Cheat, fam: str, backend: str):
    t = targets(fam, backend)
    patch = cheat.build(t.task)
    config = PAPER.harness if cheat.timeout_s is None else dataclasses.replace(PAPER.harness,
                                                                               test_timeout_s=cheat.timeout_s)
    ex = execute(t.task, t.bundle, patch, sandbox=t.sandbox, config=config, check_source_patch=not cheat.runtime_only)
    where = f"{cheat.id} on {t.task.instance_id} ({backend})"
    screen_only = FailureKind.FORBIDDEN_SOURCE_EDIT not in (cheat.expect, *cheat.also)
    if ex.failure_kind is FailureKind.FORBIDDEN_SOURCE_EDIT and screen_only:
        # the static screen (read as syntax) refuses a case written for the runtime: defence in depth - the
        # runtime must still stop it on its own, so it runs again without the screen
        assert "run" not in ex.phases, "a forbidden candidate must never run"
        assert all(p.code.startswith("patch.test_aware.") for p in ex.problems), f"{where}" + _explain(ex)
        _observe(cheat.id, t.task.instance_id, backend, FailureKind.FORBIDDEN_SOURCE_EDIT.value,
                 ex.failure_kind.value)
        ex = execute(t.task, t.bundle, patch, sandbox=t.sandbox, config=config, check_source_patch=False)
    _observe(cheat.id, t.task.instance_id, backend, cheat.expect.value, ex.failure_kind.value, ex)
    if ex.passed:
        pytest.fail(f"BYPASS: the harness said PASS for {where}: {cheat.what}"
                    + (f" [docs/BYPASSES.md {cheat.bypass}]" if cheat.bypass else "") + _explain(ex))
    assert ex.verdict is not Verdict.PASS
    assert ex.failure_kind in (cheat.expect, *cheat.also), f"{where}: expected {cheat.expect.value}" + _explain(ex)
    if cheat.problem[0]:
        code, text = cheat.problem
        assert any(p.code == code and text in p.message for p in ex.problems), \
            f"{where}: expected problem {code} naming {text!r}" + _explain(ex)
    if ex.failure_kind is FailureKind.FORBIDDEN_SOURCE_EDIT:
        assert "run" not in ex.phases, "a forbidden candidate must never run"


# ---- the official evaluator (all F2P + P2P through the eval script) -----------------------------------------

# (cheat id, family, expected OfficialResult.failure_kind; None = a valid, unresolved result)
OFFICIAL_CASES = [
    ("reporter-reach-in", "sympy", FailureKind.RUNNER_TAMPERED),
    ("frame-walk-reach-in", "sympy", FailureKind.RUNNER_TAMPERED),
    ("stdlib-json-rewrites-records", "sympy", FailureKind.RUNNER_TAMPERED),
    ("sympy-reporter-rewritten", "sympy", FailureKind.RUNNER_TAMPERED),
    ("sympy-own-finder-first", "sympy", FailureKind.RESULTS_FORGED),
    ("gc-walk-to-reporter", "sympy", FailureKind.RUNNER_TAMPERED),
    ("write-pass-lines-to-fd1-then-os-exit", "sympy", FailureKind.RESULTS_INCOMPLETE),
    ("sympy-runner-edit", "sympy", FailureKind.FORBIDDEN_SOURCE_EDIT),
    ("test-files-rewritten-on-disk", "sympy", FailureKind.RUNNER_TAMPERED),
    ("trace-hook-rewrites-arguments", "requests", FailureKind.RUNNER_TAMPERED),
    ("node-identity-swap-by-plugin", "requests", FailureKind.RUNNER_TAMPERED),
    # the official run checks most of a test file's functions against one compile of the whole file (guard.py:
    # expected_codes, after WHOLE_FILE_AFTER one-by-one compiles): a swapped test body is still told apart there
    ("test-code-swapped-in-place", "requests", FailureKind.RUNNER_TAMPERED),
    # third generation (runtime_only: graded without the static screen, which refuses each of them first)
    ("reentry-metaclass-bases", "sympy", FailureKind.RUNNER_TAMPERED),
    ("ctypes-audit-hook-list", "sympy", FailureKind.RUNNER_TAMPERED),
    ("proc-mem-key-resigned-stream", "requests", FailureKind.RUNNER_TAMPERED),
    ("fork-child-signs-with-copied-key", "requests", FailureKind.RESULTS_FORGED),
    # a fix on only where the harness shows: where execute cannot tell, the plain run disagrees
    ("sniff-harness-directory", "requests", FailureKind.PLAIN_RUN_DISAGREES),
    ("sniff-socket-peer-name", "requests", FailureKind.PLAIN_RUN_DISAGREES),
    ("sniff-sys-path", "requests", None),
    # fourth generation (issue 39: each forged a PASS that the official evaluator resolved)
    ("refusal-traceback-frames", "sympy", FailureKind.RUNNER_TAMPERED),
    ("signal-builtin-handler-frames", "sympy", FailureKind.RUNNER_TAMPERED),
    ("module-written-to-tmp", "requests", FailureKind.RUNNER_TAMPERED),
    ("extension-without-suffix", "requests", FailureKind.RUNNER_TAMPERED),
    ("exception-class-abc-register-runtime", "requests", FailureKind.RUNNER_TAMPERED),
    # fifth generation: the standard library's debugger with the candidate's hooks (resolved before: both runs
    # jumped past the test call, in the recording proxy and in pytest's pytest_pyfunc_call)
    ("bdb-subclass-skips-the-test-everywhere", "requests", FailureKind.RUNNER_TAMPERED),
]


@pytest.fixture(scope="module")
def official(targets):
    from execcritic.evaluation.official import evaluate_official
    from execcritic.tasks.environment import environment_for

    def run(fam: str, patch: str, candidate: bool | None = None):
        t = targets(fam, "local")
        return evaluate_official(t.task, patch, environment_for(t.task), sandbox=t.sandbox, candidate=candidate)
    return run


@pytest.mark.parametrize("fam", ["sympy"])
def test_official_control(official, targets, fam):
    task = targets(fam, "local").task
    gold, empty = official(fam, task.patch), official(fam, "")
    assert gold.valid and gold.resolved, gold.error
    assert empty.valid and not empty.resolved, empty.error


@pytest.mark.parametrize("cheat_id,fam,kind", [pytest.param(*c, id=f"{c[0]}-{c[1]}") for c in OFFICIAL_CASES])
def test_official_cheat_not_resolved(official, targets, cheat_id, fam, kind):
    cheat = next(c for c in C.CHEATS if c.id == cheat_id)
    task = targets(fam, "local").task
    patch = cheat.build(task)
    res = official(fam, patch, False if cheat.runtime_only else None)
    expected = kind.value if kind is not None else "valid-unresolved"
    if res.failure_kind == FailureKind.FORBIDDEN_SOURCE_EDIT.value and kind is not FailureKind.FORBIDDEN_SOURCE_EDIT:
        # refused by the static screen first (as in test_cheat_gets_no_pass): the grading must stop it on its own
        assert not res.resolved and not res.patch_applied, res.error[:800]
        _observe(cheat_id, task.instance_id, "official", FailureKind.FORBIDDEN_SOURCE_EDIT.value, res.failure_kind)
        res = official(fam, patch, False)
    _observe(cheat_id, task.instance_id, "official", expected,
             "resolved" if res.resolved else (res.failure_kind or ("valid-unresolved" if res.valid else "invalid")))
    where = f"official evaluator, {cheat_id} on {fam}"
    if res.resolved:
        pytest.fail(f"BYPASS: {where} resolved the task: {cheat.what}"
                    + (f" [docs/BYPASSES.md {cheat.bypass}]" if cheat.bypass else "") + f"\nreporter: {res.reporter}")
    if kind is None:
        assert res.valid and not res.failure_kind, f"{where}: expected a valid, unresolved result: {res.error[:800]}"
    else:
        assert not res.valid and res.failure_kind == kind.value, \
            f"{where}: expected {kind.value}, got valid={res.valid} kind={res.failure_kind!r}: {res.error[:800]}"
