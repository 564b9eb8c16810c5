"""`execcritic reproduce`: the artifacts' notebooks under one preset, as one resumable session.

A session is one run id shared by every artifact (`results/<artifact>/<session>/`) and one pipeline
directory (`results/pipeline/suite-<session>/`), recorded in `results/reproduce/<session>.json`. Its
parts: the task environments, the pipeline units every selected artifact needs (run once, in this
process, with live progress; shared between artifacts), one papermill execution per notebook (which
finds its units done, writes its records through the store and renders; the executed notebook is
attached to the run), then the figures. Killed and restarted, a session continues: finished units and
complete artifacts are skipped. `from_results` re-renders only, the pinned runs (results/paper_runs.json).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from execcritic.errors import ExecCriticError, InputError
from execcritic.experiments.artifacts import SPECS
from execcritic.experiments.core import (PREPARED_ENV, UnitCounts, build_groups, check_runnable, merge_groups,
                                         nodes_build, plan_artifact, run_groups)
from execcritic.experiments.envs import SUITE_TASK_SETS, ensure_envs
from execcritic.experiments.params import new_run_id, parameters
from execcritic.experiments.presets import REPO
from execcritic.files import atomic_write
from execcritic.results.schemas import PAPER_ARTIFACTS
from execcritic.results.fingerprint import owned
from execcritic.results.pins import read_pins, write_pins
from execcritic.results.store import FINISHED, attach_notebook

NOTEBOOKS_DIR = REPO / "notebooks"


def notebook_path(artifact: str) -> Path:
    """The artifact's notebook: notebooks/<artifact>_*.ipynb (exactly one)."""
    hits = sorted(NOTEBOOKS_DIR.glob(f"{artifact}_*.ipynb"))
    if len(hits) != 1:
        raise InputError(f"expected one notebook {artifact}_*.ipynb, found {[h.name for h in hits]}",
                         file=str(NOTEBOOKS_DIR), field="artifact")
    return hits[0]


@dataclass
class Part:
    name: str
    status: str = "pending"             # pending | done | skipped | failed
    seconds: float = 0.0
    detail: str = ""


@dataclass
class Session:
    session: str
    preset: str
    results: str
    artifacts: list[str]
    command: str
    train: bool = False                 # CPU presets: the trained roles are trained (the notebooks' train=True)
    status: str = "running"             # running | finished | failed
    started_at: str = ""
    ended_at: str | None = None
    parts: dict[str, Part] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return Path(self.results) / "reproduce" / f"{self.session}.json"

    def save(self) -> None:
        atomic_write(self.path, json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> Session:
        d = json.loads(path.read_text())
        d["parts"] = {k: Part(**v) for k, v in d.get("parts", {}).items()}
        return cls(**d)

    def part(self, name: str) -> Part:
        return self.parts.setdefault(name, Part(name))


def find_unfinished(results: Path, preset: str) -> Session | None:
    """The latest session of `preset` that did not finish (killed or failed): the one to continue."""
    found = []
    for p in sorted((results / "reproduce").glob("*.json")):
        try:
            s = Session.load(p)
        except (ValueError, TypeError, KeyError):
            continue
        if s.preset == preset and s.status != "finished":
            found.append(s)
    return found[-1] if found else None


def check_artifacts(only: Sequence[str] | None) -> list[str]:
    wanted = list(only) if only else list(PAPER_ARTIFACTS)
    bad = [a for a in wanted if a not in PAPER_ARTIFACTS]
    if bad:
        raise InputError(f"--only {bad[0]!r}: unknown artifact; known: {', '.join(PAPER_ARTIFACTS)}", field="only")
    return list(dict.fromkeys(wanted))


def open_session(preset: str, results: Path, artifacts: Sequence[str], *, command: str, fresh: bool = False,
                 train: bool = False) -> tuple[Session, bool]:
    """Continue the unfinished session of `preset` (unless `fresh`), else start a new one. Returns
    (session, resumed). A session trains (`train`) or does not, from its start to its end."""
    prev = None if fresh else find_unfinished(results, preset)
    if prev is not None:
        if prev.train != train:
            raise InputError(f"the unfinished session {prev.session} of preset {preset} was started "
                             f"{'with' if prev.train else 'without'} --train: continue it the same way, or pass "
                             "--fresh to start a new one", file=str(prev.path), field="--train")
        prev.artifacts = list(dict.fromkeys([*prev.artifacts, *artifacts]))
        prev.status = "running"
        prev.command = command
        prev.save()
        return prev, True
    sid, n = new_run_id(preset), 1
    while (results / "reproduce" / f"{sid}.json").exists() or any((results / a / sid).exists() for a in artifacts):
        n += 1
        sid = f"{new_run_id(preset)}-{n}"
    s = Session(sid, preset, str(results), list(artifacts), command, train=train,
                started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    s.save()
    return s, False


def is_complete(artifact: str, run_id: str, results: Path) -> bool:
    m = results / artifact / run_id / "manifest.json"
    if not m.is_file():
        return False
    try:
        return json.loads(m.read_text()).get("status") in FINISHED
    except ValueError:
        return False


def check_parameters(preset: str, artifacts: Sequence[str], results: Path, workers: int | None,
                     train: bool = False) -> None:
    """Every artifact's parameters under `preset`, checked as its notebook will check them - before the session
    writes anything (a preset whose dataset variable is unset fails here, naming the variable; --train on a preset
    that does not train on CPU, naming the preset)."""
    for a in artifacts:
        parameters(a, preset=preset, output_dir=results, workers=workers, train=train or None)


def prepare(session: Session, artifacts: Sequence[str], *, workers: int | None = None,
            show_progress: bool = True, counts: UnitCounts | None = None) -> dict[str, float]:
    """Build the environments and run every pipeline unit the artifacts still need, once."""
    results = Path(session.results)
    todo = [a for a in artifacts if not is_complete(a, session.session, results)]
    timings: dict[str, float] = {}
    all_groups, all_planned, params = [], [], None
    for a in todo:
        params = parameters(a, preset=session.preset, run_id=session.session, output_dir=results, workers=workers,
                            train=session.train or None)
        planned = plan_artifact(SPECS[a], params)
        all_planned += planned
        all_groups.append(build_groups(SPECS[a], params, planned, build_envs=False))
    if params is None:
        return timings
    if params.preset.build_envs and params.dataset in SUITE_TASK_SETS and params.instances and not nodes_build(params):
        t0 = time.monotonic()
        ensure_envs(params.instances, dataset=params.dataset)
        timings["environments"] = round(time.monotonic() - t0, 1)
    groups = merge_groups(all_groups)
    # the notebooks' preflight, once for every artifact: a condition that cannot run stops the session here
    check_runnable(all_planned, {g.benchmark: g for g in groups}, params, label=f"preset {session.preset}")
    counts = counts if counts is not None else UnitCounts()
    with owned(params.pipeline_dir, option="session (--fresh)"):
        for _ in range(2):                      # a unit that raised is retried once (it left no record)
            counts.errors, counts.failures, counts.stopped = 0, [], []
            for k, v in run_groups(groups, params, show_progress=show_progress, counts=counts).items():
                timings[k] = round(timings.get(k, 0.0) + v, 1)
            if not counts.errors:
                break
    return timings


@contextlib.contextmanager
def one_kernel() -> Iterator[Any]:
    """One Python kernel for several executions (`execute_notebook(km=...)`): a kernel's start and its imports
    cost seconds each, which is most of a re-render. Each notebook still starts from an empty namespace."""
    from jupyter_client.manager import KernelManager  # lazy: the notebooks extra (jupyter_client, ipykernel)

    km = KernelManager(kernel_name="python3")
    with tempfile.TemporaryFile(mode="w+b") as log:
        # its stderr (ipykernel's transport warning, shutdown noise) to a log, as a notebook's own kernel's is
        # (execute_notebook); shown only if the kernel died
        km.start_kernel(cwd=str(REPO), stderr=log)
        try:
            yield km
        finally:
            died = not km.is_alive()
            km.shutdown_kernel(now=True)
            if died:
                log.seek(0)
                sys.stderr.write("the shared notebook kernel died; its log ends:\n" +
                                 log.read()[-3000:].decode(errors="replace") + "\n")


def _fresh_namespace(km: Any) -> None:
    """`%reset -f` in a shared kernel: nothing of the previous notebook is left to be read by mistake."""
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        kc.execute_interactive("%reset -f", timeout=60, output_hook=lambda msg: None)
    finally:
        kc.stop_channels()


def _renumber(out: Path) -> None:
    """Execution counts from 1, as in a kernel of its own (a shared kernel keeps counting across notebooks)."""
    import nbformat  # lazy: with papermill

    nb = nbformat.read(out, 4)
    n = 0
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.get("execution_count") is not None:
            n += 1
            cell.execution_count = n
            for o in cell.get("outputs", ()):
                if "execution_count" in o:
                    o["execution_count"] = n
    nbformat.write(nb, out)


def execute_notebook(artifact: str, out: Path, parameters_: dict[str, Any], *, km: Any = None) -> None:
    """One papermill execution of the artifact's notebook (from the repository root), in a kernel of its own or
    in `km` (`one_kernel`). The kernel's own stderr (ipykernel's transport warnings, shutdown noise) goes to a
    log, shown only if the notebook fails."""
    import papermill  # lazy: the notebooks extra (papermill, ipykernel) is only needed to execute notebooks

    out.parent.mkdir(parents=True, exist_ok=True)
    if km is not None:
        _fresh_namespace(km)
    with tempfile.TemporaryFile(mode="w+b") as log:
        saved = os.dup(2)
        sys.stderr.flush()
        os.dup2(log.fileno(), 2)
        try:
            papermill.execute_notebook(str(notebook_path(artifact)), str(out), parameters=parameters_,
                                       cwd=str(REPO), kernel_name="python3", progress_bar=False, log_output=False,
                                       **({"km": km} if km is not None else {}))
            if km is not None:
                _renumber(out)
        except Exception as exc:
            log.seek(0)
            tail = log.read()[-3000:].decode(errors="replace")
            raise NotebookFailed(artifact, out, exc, tail) from exc
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


class NotebookFailed(ExecCriticError):
    """A notebook stopped with an error; the executed copy (with the traceback) is kept at `out`."""

    def __init__(self, artifact: str, out: Path, exc: BaseException, kernel_log: str):
        self.artifact, self.out, self.kernel_log = artifact, out, kernel_log
        ename, evalue = getattr(exc, "ename", type(exc).__name__), getattr(exc, "evalue", str(exc))
        cell = getattr(exc, "exec_count", None)
        where = f" in cell [{cell}]" if cell is not None else ""
        super().__init__(f"notebook {notebook_path(artifact).name} failed{where}: {ename}: {str(evalue)[-1500:]} "
                         f"(executed copy with the traceback: {out})")


def _for_kernel(results: Path) -> str:
    """The results dir as the notebook's kernel (run from the repository root) finds it: relative when
    it lies inside the repository, so the run's recorded command and paths stay portable."""
    r = results.resolve()
    try:
        return str(r.relative_to(REPO))
    except ValueError:
        return str(r)


def run_notebook(session: Session, artifact: str, *, workers: int | None = None) -> Path:
    """Execute the artifact's notebook for this session and attach it to the run; returns the run dir."""
    results = Path(session.results)
    out = results / artifact / session.session / ".notebook.executing.ipynb"
    params: dict[str, Any] = {"preset": session.preset, "run_id": session.session, "output_dir": _for_kernel(results)}
    if workers is not None:
        params["workers"] = workers
    if session.train:
        params["train"] = True
    os.environ[PREPARED_ENV] = "1"
    try:
        execute_notebook(artifact, out, params)
    finally:
        os.environ.pop(PREPARED_ENV, None)
    attach_notebook(artifact, session.session, out, root=results)
    out.unlink(missing_ok=True)
    return results / artifact / session.session


def render_notebook(artifact: str, results: Path, out_dir: Path, *, km: Any = None) -> Path | None:
    """Re-render the pinned run of `artifact` (results.pins; nothing runs); None when none is pinned. `km`: a
    kernel shared by the re-renders (`one_kernel`)."""
    run_id = read_pins(results)["runs"].get(artifact)
    if run_id is None:
        return None
    manifest = json.loads((results / artifact / run_id / "manifest.json").read_text())
    out = out_dir / f"{artifact}.ipynb"
    execute_notebook(artifact, out, {"preset": manifest["preset"], "reuse": run_id, "output_dir": _for_kernel(results)},
                     km=km)
    return out


def timed_part(session: Session, name: str, fn: Callable[[], Any], *, detail: str = "") -> Any:
    """Run one part of the session, recording its status and seconds (also when it fails)."""
    part = session.part(name)
    t0 = time.monotonic()
    try:
        out = fn()
    except BaseException:
        part.status, part.seconds = "failed", round(part.seconds + time.monotonic() - t0, 1)
        session.status = "failed"
        session.save()
        raise
    part.status, part.seconds = "done", round(part.seconds + time.monotonic() - t0, 1)
    part.detail = detail or part.detail
    session.save()
    return out


def pin(session: Session) -> Path:
    """The session's finished runs become the pinned ones (`results/paper_runs.json`): paper_figures/ shows
    what this reproduction made, and nothing else that happens to be newer. A session that trained pins the GRPO
    runs its Figure 6 drew, so the figure's curves come from the same code as its points."""
    results = Path(session.results)
    done = [a for a in session.artifacts if is_complete(a, session.session, results)]
    curves = None
    if session.train and "figure6" in done:
        manifest = json.loads((results / "figure6" / session.session / "manifest.json").read_text())
        curves = list((manifest.get("training_curves") or {}).values()) or None
    return write_pins(results, runs={a: session.session for a in done}, training=curves)


def finish(session: Session, *, complete: bool = True) -> None:
    """Close the session; an incomplete one (units that kept failing) is continued by the next run."""
    session.status = "finished" if complete else "incomplete"
    session.ended_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    session.save()


__all__ = ["NOTEBOOKS_DIR", "NotebookFailed", "Part", "Session", "check_artifacts", "check_parameters", "execute_notebook",
           "find_unfinished", "finish", "is_complete", "notebook_path", "one_kernel", "open_session", "pin", "prepare",
           "render_notebook", "run_notebook", "timed_part"]
