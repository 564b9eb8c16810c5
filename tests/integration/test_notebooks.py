"""Every artifact notebook executes under papermill with the `ci` preset (scripted stand-ins on the demo
tasks), `execcritic reproduce` runs them as one resumable session, bad parameters stop the notebook in
its parameters-validation cell with a clear message, and the figures show what the results tables hold.

One `execcritic reproduce --preset ci` session runs the pipeline units once (~30 s); each notebook then
re-executes against it in seconds (finished units are skipped, as after a kill)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from execcritic.experiments import reproduce
from execcritic.figures.notebook import figure, shown_runs, view
from execcritic.results import paper
from execcritic.results.schemas import PAPER_ARTIFACTS, stand_in_name
from execcritic.results.store import FINISHED, load_run

# one worker: the module-scoped `session` (a whole reproduce run, ~40 s) is made once
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("notebooks")]

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "execcritic.cli", *args]


@pytest.fixture(scope="module")
def ci_env(tmp_path_factory, demo_toolz, demo_boltons):
    """The demo tasks as the ci preset's dataset, and the environment the notebooks' kernels inherit."""
    root = tmp_path_factory.mktemp("ci")
    ds = root / "demo.jsonl"
    ds.write_text("".join(json.dumps(d.task_row("demo-1")) + "\n" for d in (demo_toolz, demo_boltons)))
    env = {**os.environ, "EXECCRITIC_CI_DATASET": str(ds), "PYTHONPATH": str(REPO)}
    saved = {k: os.environ.get(k) for k in ("EXECCRITIC_CI_DATASET", "PYTHONPATH")}
    os.environ.update({k: env[k] for k in saved})
    yield root, env
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="module")
def session(ci_env):
    """One full `execcritic reproduce --preset ci` session (every artifact) and its figures."""
    root, env = ci_env
    results, figures = root / "results", root / "paper_figures"
    t0 = time.monotonic()
    proc = subprocess.run(cli("reproduce", "--preset", "ci", "--results", str(results), "--figures", str(figures)),
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return results, figures, proc.stdout, time.monotonic() - t0


@pytest.mark.slow
def test_reproduce_runs_every_notebook_and_says_what_it_did(session):
    results, figures, out, _ = session
    state = json.loads(next((results / "reproduce").glob("*.json")).read_text())
    assert state["status"] == "finished" and state["preset"] == "ci"
    sid = state["session"]
    for a in PAPER_ARTIFACTS:
        run = load_run(a, sid, root=results)
        assert run.manifest["status"] in FINISHED and run.notebook is not None
        assert run.complete == (len(run.records) > 0)           # a run that measured nothing is never "complete"
        nb = nbformat.read(run.notebook, as_version=4)
        assert nb.metadata.papermill.parameters["run_id"] == sid
        assert not any(o.get("output_type") == "error" for c in nb.cells for o in c.get("outputs", []))
        assert state["parts"][f"notebook {a}"]["status"] == "done"
    # the human summary: what ran, measured beside reported, where things are, how long
    for text in ("What ran, and how long it took", "pipeline units", "table2 notebook", "paper_figures",
                 "Measured (this run) beside reported (paper)", "stand-in", "figures:", "session log:"):
        assert text in out, text
    assert not out.lstrip().startswith("{")
    assert (figures / "README.md").is_file() and (figures / "figure5.png").is_file()


def test_artifacts_share_pipeline_units(session):
    """Table 2's base row and Figure 5b use the same Repair runs; Table 1 and Figure 6a the same episodes."""
    results, _, _, _ = session
    sid = json.loads(next((results / "reproduce").glob("*.json")).read_text())["session"]
    t2, f5 = load_run("table2", sid, root=results), load_run("figure5", sid, root=results)
    a = t2.records[t2.records["test_source"] == "Oracle F2P"].set_index("instance_id")["final_patch_sha"]
    b = f5.records[f5.records["feedback_source"] == "Oracle"].set_index("instance_id")["final_patch_sha"]
    assert len(a) == 2 and a.sort_index().equals(b.sort_index())
    pipe = results / "pipeline" / f"suite-{sid}" / "verified"
    repairs = [json.loads(line) for line in (next(pipe.glob("repair-*")) / "repair.jsonl").read_text().splitlines()]
    assert len(repairs) == 2 * 3                       # 2 instances x {none, oracle, Test-agent stand-in}, once


@pytest.mark.parametrize("artifact", PAPER_ARTIFACTS)
def test_each_notebook_executes_under_papermill_with_ci(session, ci_env, artifact, tmp_path):
    """Standalone papermill run of the notebook on the session's run id: it resumes (every unit is done)
    and renders; the table it shows is the run's summary."""
    import papermill

    results, _, _, _ = session
    sid = json.loads(next((results / "reproduce").glob("*.json")).read_text())["session"]
    out = tmp_path / f"{artifact}.ipynb"
    t0 = time.monotonic()
    papermill.execute_notebook(str(reproduce.notebook_path(artifact)), str(out), kernel_name="python3", cwd=str(REPO),
                               parameters={"preset": "ci", "output_dir": str(results), "run_id": sid},
                               progress_bar=False)
    assert time.monotonic() - t0 < 60
    nb = nbformat.read(out, as_version=4)
    text = "\n".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
                     for c in nb.cells for o in c.get("outputs", []))
    assert f"{artifact}/{sid}" in text and ("status complete" in text or "status empty" in text)
    if artifact.startswith("figure"):
        assert any("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))


@pytest.mark.parametrize("params, message", [
    ({"preset": "no-such-preset"}, "unknown preset 'no-such-preset'"),
    ({"preset": "ci", "reuse": "no-such-run"}, "reuse='no-such-run': there is no run table2/no-such-run"),
    ({"preset": "ci", "models": {"repair_base": "openai:http://host:8000/v1"}}, "needs '#<model name>'"),
    ({"preset": "ci", "models": {"repair_base": "not-a-spec"}}, "unknown model spec 'not-a-spec'"),
    ({"preset": "ci", "models": {"repair_base": 5}}, "models.repair_base must be a model spec"),
    ({"preset": "ci", "workers": 0}, "workers must be an integer >= 1"),
])
def test_bad_parameters_fail_in_the_parameters_cell(ci_env, tmp_path, params, message):
    import papermill
    from papermill.exceptions import PapermillExecutionError

    out = tmp_path / "bad.ipynb"
    with pytest.raises(PapermillExecutionError) as exc:
        papermill.execute_notebook(str(reproduce.notebook_path("table2")), str(out), kernel_name="python3",
                                   cwd=str(REPO), parameters={"output_dir": str(tmp_path / "r"), **params},
                                   progress_bar=False)
    assert exc.value.ename == "InputError" and message in exc.value.evalue
    nb = nbformat.read(out, as_version=4)
    failed = [c for c in nb.cells if c.cell_type == "code" and any(o.get("output_type") == "error" for o in c.outputs)]
    assert len(failed) == 1 and "experiments.parameters(" in failed[0].source
    assert not (tmp_path / "r" / "table2").exists()        # nothing ran, nothing was written


def test_a_notebook_run_whose_units_raise_fails_at_its_end_naming_them(ci_env, tmp_path):
    """A unit that raises leaves no record; the notebook then fails (papermill exits non-zero) with the table of
    errored units, and the run stays incomplete so that the same run_id retries them."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    store = tmp_path / "r"
    with pytest.raises(PapermillExecutionError) as exc:
        papermill.execute_notebook(str(reproduce.notebook_path("table1")), str(tmp_path / "units.ipynb"),
                                   kernel_name="python3", cwd=str(REPO), progress_bar=False,
                                   parameters={"preset": "ci", "output_dir": str(store), "run_id": "units-fail",
                                               "test_sources": ["Qwen3.5-35B-A3B"],
                                               "models": {"test_base": "scripted:tests/scripted_policies.py:"
                                                                       "public_test_teacher"}})
    assert exc.value.ename == "UnitsFailed", exc.value.evalue
    assert "pipeline unit(s) raised" in exc.value.evalue and "public_test_teacher only knows" in exc.value.evalue
    assert "run_id='units-fail'" in exc.value.evalue and "generation.errors.jsonl" in exc.value.evalue
    assert json.loads((store / "table1" / "units-fail" / "manifest.json").read_text())["status"] == "incomplete"


@pytest.mark.slow
def test_a_killed_session_resumes_skipping_finished_work(session, ci_env):
    """A session that did not finish is continued: complete artifacts and finished units are skipped and
    only what is missing runs."""
    results, figures, _, _ = session
    _, env = ci_env
    state_path = next((results / "reproduce").glob("*.json"))
    state = json.loads(state_path.read_text())
    sid = state["session"]
    pipe = results / "pipeline" / f"suite-{sid}" / "verified"
    before = {p: p.read_text() for p in pipe.rglob("*.jsonl")}
    import shutil

    shutil.rmtree(results / "table1" / sid)                       # table1's notebook "was killed" before it ended
    state["status"] = "running"
    state["parts"].pop("notebook table1")
    state_path.write_text(json.dumps(state))
    proc = subprocess.run(cli("reproduce", "--preset", "ci", "--results", str(results), "--figures", str(figures),
                              "--only", "table1", "--only", "table2"),
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "continued" in proc.stdout and "already complete (skipped)" in proc.stdout
    assert "nothing left to run" in proc.stdout
    assert {p: p.read_text() for p in pipe.rglob("*.jsonl") if p in before} == before   # no unit ran again
    assert load_run("table1", sid, root=results).complete
    assert json.loads(state_path.read_text())["status"] == "finished"


@pytest.mark.slow
def test_from_results_only_rerenders(session, ci_env, tmp_path):
    results, _, _, _ = session
    _, env = ci_env
    index_before = (results / "index.csv").read_text()
    t0 = time.monotonic()
    proc = subprocess.run(cli("reproduce", "--preset", "ci", "--results", str(results), "--figures", str(tmp_path / "pf"),
                              "--from-results", "--rendered", str(tmp_path / "rendered")),
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert time.monotonic() - t0 < 120
    assert (results / "index.csv").read_text() == index_before             # nothing new was run or written
    assert sorted(p.name for p in (tmp_path / "rendered").iterdir()) == sorted(f"{a}.ipynb" for a in PAPER_ARTIFACTS)
    assert (tmp_path / "pf" / "figure5.png").is_file()
    for a in PAPER_ARTIFACTS:        # one shared kernel: each notebook as from a kernel of its own
        cells = [c for c in nbformat.read(tmp_path / "rendered" / f"{a}.ipynb", 4).cells if c.cell_type == "code"]
        assert [c.execution_count for c in cells] == list(range(1, len(cells) + 1)), a
        assert not any(o.get("output_type") == "error" for c in cells for o in c.get("outputs", [])), a


def test_figure5_bars_are_the_results_tables(session):
    results, _, _, _ = session
    run = shown_runs(results, ["figure5"])["figure5"]
    fig = figure(run)
    bars = {p.get_gid(): p.get_height() for ax in fig.axes for p in ax.patches if p.get_gid()}
    summary = pd.read_csv(run.path / "summary.csv")
    measured = {k: v for k, v in bars.items() if k.startswith("measured|")}
    assert len(measured) == len(summary) == 3
    for s in summary.to_dict("records"):
        assert stand_in_name(s["repair_agent"])
        assert measured[f"measured|{s['panel']}|{s['benchmark']}|{s['repair_agent']}|{s['feedback_source']}"] == \
            pytest.approx(s["value"])
    rep = paper.reported().query("artifact == 'figure5'")
    for r in rep.to_dict("records"):
        assert bars[f"reported|{r['panel']}|{r['benchmark']}|{r['repair_agent']}|{r['feedback_source']}"] == \
            pytest.approx(r["value"])
    legend = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    stand_in = [x for x in legend if x.startswith("measured with the stand-in")]
    assert legend[0] == "reported (paper)" and stand_in and all("preset ci" in x for x in stand_in)
    assert legend[-1] == "95% interval (method in the notes)"
    notes = "\n".join(t.get_text() for t in fig.texts)
    assert "Measured values: preset ci" in notes and "n/r: not run here" in notes
    assert "SWE-bench Pro data not available" in notes


def test_figure6_stand_in_point_is_the_results_table(session):
    results, _, _, _ = session
    run = shown_runs(results, ["figure6"])["figure6"]
    fig = figure(run)
    lines = {ln.get_gid(): ln for ax in fig.axes for ln in ax.get_lines() if ln.get_gid()}
    s = run.summary[run.summary["metric"] == "b2g_pct"].iloc[0]
    # panel (a) in fractions, as the paper draws it
    assert lines[f"measured|a|{s['checkpoint']}"].get_ydata()[0] == pytest.approx(s["value"] / 100)
    assert list(lines["reported|a|sft"].get_ydata()) == pytest.approx([0.22, 0.27, 0.35, 0.39, 0.39])
    notes = "\n".join(t.get_text() for t in fig.texts)
    # panels (b)/(c) without a training run of the session's preset say where the curves would come from
    assert "no complete run with role test, init base under results/training/" in notes, notes


def test_tables_label_every_value(session):
    results, figures, _, _ = session
    for a in PAPER_ARTIFACTS:
        md = (figures / f"{a}.md").read_text()
        assert "Reported (paper)" in md and "**This run, preset `ci`**" in md
        v = view(shown_runs(results, [a])[a])
        for r in v.rows.to_dict("records"):
            assert pd.notna(r["measured"]) or r["measured_note"].startswith("not run here: ")
            if stand_in_name(str(r[v.schema.condition[0]])) or any(stand_in_name(str(r[c])) for c in v.schema.condition):
                assert pd.isna(r["reported"])                           # a stand-in never takes the paper's value


@pytest.mark.slow
def test_the_readme_papermill_line_runs_and_keeps_its_notebook(session, ci_env, tmp_path):
    """`papermill NOTEBOOK OUT -p preset ... -p models '{JSON}'` as README writes it: the JSON string arrives
    as a mapping, the run is made, and once papermill has exited its executed notebook is stored with the run."""
    import shutil

    results, _, _, _ = session
    _, env = ci_env
    sid = json.loads(next((results / "reproduce").glob("*.json")).read_text())["session"]
    store = tmp_path / "store"
    shutil.copytree(results, store)                         # finished units: the run is re-made in seconds
    (store / "table2" / sid / "notebook.ipynb").unlink()
    models = json.dumps({"repair_base": "scripted:tests/scripted_policies.py:wrong_then_gold"})
    proc = subprocess.run([str(Path(sys.executable).parent / "papermill"), str(reproduce.notebook_path("table2")),
                           str(tmp_path / "out.ipynb"), "-p", "preset", "ci", "-p", "models", models,
                           "-p", "output_dir", str(store), "-p", "run_id", sid, "--cwd", str(REPO)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    nb = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert nb.metadata.papermill.parameters["models"] == models
    kept = store / "table2" / sid / "notebook.ipynb"
    deadline = time.monotonic() + 30
    while not kept.is_file() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert kept.is_file() and nbformat.read(kept, 4).metadata.papermill.parameters["run_id"] == sid
    assert json.loads((store / "table2" / sid / "manifest.json").read_text())["notebook"] == "notebook.ipynb"


def test_jupyterlab_opens_a_notebook(tmp_path):
    """JupyterLab is installed by `make` and serves the notebooks (headless: the server, its lab page and the
    notebook's contents through the server API)."""
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"), "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg")}
    proc = subprocess.Popen([str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", "--allow-root",
                             f"--port={port}", "--ServerApp.token=t", f"--ServerApp.root_dir={REPO}"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        base, nb = f"http://127.0.0.1:{port}", "notebooks/table1_test_agent_base_to_gold.ipynb"
        deadline = time.monotonic() + 120
        while True:
            try:
                page = urllib.request.urlopen(f"{base}/lab?token=t", timeout=5).read().decode()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "jupyter lab did not start"
                time.sleep(1)
        assert "JupyterLab" in page
        contents = json.loads(urllib.request.urlopen(f"{base}/api/contents/{nb}?token=t", timeout=30).read())
        assert contents["type"] == "notebook" and contents["content"]["cells"]
        assert "python3" in json.loads(urllib.request.urlopen(f"{base}/api/kernelspecs?token=t").read())["kernelspecs"]
    finally:
        proc.terminate()
        proc.wait(30)


def test_the_shared_kernel_keeps_its_stderr_to_itself_unless_it_dies(capfd):
    """`reproduce` runs its notebooks in one kernel (`one_kernel`); its stderr (ipykernel's transport warning) went
    to the user's terminal. It goes to a log now, shown when the kernel died."""
    import signal

    with reproduce.one_kernel() as km:
        reproduce._fresh_namespace(km)         # waits until the kernel is ready: it has said what it says at start
    assert "Kernel is running" not in capfd.readouterr().err
    with reproduce.one_kernel() as km:
        reproduce._fresh_namespace(km)
        os.kill(km.provisioner.pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while km.is_alive() and time.monotonic() < deadline:
            time.sleep(0.1)
    err = capfd.readouterr().err
    assert "the shared notebook kernel died; its log ends:" in err and "Kernel is running" in err, err[-2000:]
