"""The experiment suite without running anything: presets and their errors, the notebooks' parameter
check, the plan of each artifact (what runs, what is a stand-in, what is "not run here" and why), the
turning of pipeline records into artifact records with the paper's denominators, and the notebooks'
shape (one per artifact, a `parameters` cell, no stored outputs)."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from execcritic import experiments
from execcritic.errors import InputError
from execcritic.experiments import conditions, core, presets, reproduce
from execcritic.experiments.artifacts import SPECS
from execcritic.experiments.params import parameters
from execcritic.experiments.presets import expand, load_preset
from execcritic.pipeline.config import PipelineConfig
from execcritic.pipeline.records import RecordStore
from execcritic.results import stats
from execcritic.results.schemas import PAPER_ARTIFACTS, order_key, paper_part, schema, stand_in, stand_in_name
from execcritic.results.store import load_run, new_run
from execcritic.tasks.model import Task

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"


# ---- presets ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["paper", "paper-git", "smoke", "smoke-git", "ci"])
def test_the_shipped_presets_load(name):
    p = load_preset(name, env={"EXECCRITIC_CI_DATASET": "/x/demo.jsonl"})
    assert p.name == name and p.banner
    p.protocol()


def test_smoke_is_a_labeled_cpu_stand_in_run():
    p = load_preset("smoke")
    assert p.dataset == "verified-sdist" and p.build_envs and len(p.instances) == 2
    assert {b.spec for b in p.models.values()} == {"local"} and all(b.stand_in for b in p.models.values())
    assert "not a reproduction" in p.banner
    dev = p.protocol().deviations()
    assert dev["repair.runs_per_source"] == (3, 1) and dev["repair.round0_turns"][1] < 200


def test_paper_roles_without_endpoints_are_unbound_with_the_variable_to_set():
    p = load_preset("paper", env={})
    b = p.binding("repair_base")
    assert not b.bound and "EXECCRITIC_QWEN_URL" in b.reason and "GPU serving endpoint" in b.reason
    assert "OPENAI_API_KEY" in p.binding("test_gpt56").reason
    p2 = load_preset("paper", env={"EXECCRITIC_QWEN_URL": "http://gpu:8000/v1", "OPENAI_API_KEY": "k"})
    assert p2.binding("repair_base").spec == "openai:http://gpu:8000/v1#Qwen3.5-35B-A3B"
    assert not p2.binding("repair_base").stand_in
    assert p2.binding("test_gpt56").spec.startswith("openai:https://api.openai.com/v1#gpt-5.6-sol")


def test_paper_git_is_the_paper_preset_image_free_on_a_ray_cluster():
    """Every knob, run count, model binding and the training of `paper`; only where the tasks come from, how they
    are sandboxed and where the units run differ."""
    env = {"EXECCRITIC_QWEN_URL": "http://gpu:8000/v1", "OPENAI_API_KEY": "k"}
    paper, git = load_preset("paper", env=env), load_preset("paper-git", env=env)
    assert git.protocol() == paper.protocol() and git.protocol().deviations() == {}
    assert (git.runs, git.workers, git.seeds, git.training, git.train) == (paper.runs, paper.workers, paper.seeds,
                                                                          paper.training, paper.train)
    assert {r: (b.spec, b.name, b.stand_in) for r, b in git.models.items()} == \
        {r: (b.spec, b.name, b.stand_in) for r, b in paper.models.items()}
    assert (paper.dataset, paper.backend, paper.executor) == ("verified", "docker", "threads")
    assert (git.dataset, git.backend, git.build_envs, git.executor) == ("verified-git", None, True, "ray")
    assert git.benchmarks == {"verified": "verified-git", "multilingual": "multilingual-git", "pro": None}
    assert git.ray_address is None                                  # unset: a local cluster
    assert load_preset("paper-git", env={**env, "EXECCRITIC_RAY_ADDRESS": "head:6379"}).ray_address == "head:6379"


def test_a_preset_extends_another_key_by_key(tmp_path):
    (tmp_path / "base.yaml").write_text("name: base\nruns: 3\nworkers: 4\ntitle: Base\n")
    (tmp_path / "child.yaml").write_text(f"name: child\nextends: {tmp_path / 'base.yaml'}\nworkers: 2\n")
    p = load_preset(tmp_path / "child.yaml")
    assert (p.name, p.runs, p.workers, p.title) == ("child", 3, 2, "Base")
    (tmp_path / "loop.yaml").write_text(f"name: loop\nextends: {tmp_path / 'loop.yaml'}\n")
    with pytest.raises(InputError, match="cycle") as exc:
        load_preset(tmp_path / "loop.yaml")
    assert exc.value.field == "extends"


def test_env_expansion():
    assert expand("a${X}b", {"X": "1"}) == ("a1b", [])
    assert expand("${X:-dflt}", {}) == ("dflt", [])
    assert expand("${X}", {}) == (None, ["X"])


@pytest.mark.parametrize("body, field", [
    ("name: bad\nruns: 1\n", "name"),
    ("name: bad\nwhat: 1\n", "what"),
    ("name: bad\nruns: 0\n", "runs"),
    ("name: bad\nruns: two\n", "runs"),
    ("name: bad\nruns: 5000\n", "runs"),
    ("name: bad\nworkers: 100000\n", "workers"),
    ("name: bad\nlimit: 0\n", "limit"),
    ("name: bad\ntraining: tpu\n", "training"),
    ("name: bad\nmodels:\n  test_nobody: local\n", "models.test_nobody"),
    ("name: bad\nmodels:\n  repair_base: {spec: 'openai:http://h/v1'}\n", "models.repair_base.spec"),
    ("name: bad\nmodels:\n  repair_base: {spec: local, colour: red}\n", "models.repair_base.colour"),
    ("name: bad\nset:\n  repair.turns: 3\n", "set"),
    ("name: bad\ntrain_on_cpu: yes please\n", "train_on_cpu"),
    ("name: bad\ntraining: verl\ntrain_on_cpu: true\n", "train_on_cpu"),
    ("name: bad\ntrain_recipe:\n  colour: red\n", "train_recipe.colour"),
    ("name: bad\ntrain_recipe:\n  model: ''\n", "train_recipe.model"),
    ("name: bad\ntrain_recipe:\n  set: {sft.nothing: 1}\n", "train_recipe.set"),
    ("name: bad\nexecutor: slurm\n", "executor"),
    ("name: bad\nray_address: head:6379\n", "ray_address"),
    ("name: bad\nextends: nope\n", "extends"),
    ("name: bad\nextends: [paper]\n", "extends"),
])
def test_bad_presets_name_the_file_and_the_field(tmp_path, body, field):
    path = tmp_path / "bad.yaml"
    path.write_text(body.replace("name: bad", "name: bad" if field != "name" else "name: other"))
    with pytest.raises(InputError) as exc:
        load_preset(path)
    assert exc.value.file == str(path) and exc.value.field == field, str(exc.value)


# ---- parameters (the notebooks' validation call) ---------------------------------------------------------

def test_unknown_preset_fails_clearly():
    with pytest.raises(InputError, match=r"unknown preset 'nope'; known: ci, paper, paper-git, smoke, smoke-git") as exc:
        parameters("table2", preset="nope")
    assert exc.value.field == "preset"


def test_unparsable_model_spec_fails_clearly():
    with pytest.raises(InputError, match=r"needs '#<model name>'") as exc:
        parameters("table2", preset="smoke", models={"repair_base": "openai:http://h:8000/v1"})
    assert exc.value.field == "models.repair_base"
    with pytest.raises(InputError, match="unknown model spec 'gpt4'"):
        parameters("table2", preset="smoke", models={"repair_base": "gpt4"})
    with pytest.raises(InputError, match="unknown role 'fixer'"):
        parameters("table2", preset="smoke", models={"fixer": "local"})


def test_nonexistent_run_id_fails_clearly(tmp_path):
    with pytest.raises(InputError, match=r"reuse='nope': there is no run table2/nope") as exc:
        parameters("table2", preset="smoke", output_dir=tmp_path, reuse="nope")
    assert exc.value.field == "reuse"
    with pytest.raises(InputError, match="no complete table2 run"):
        parameters("table2", preset="smoke", output_dir=tmp_path, reuse="latest")


@pytest.mark.parametrize("kw, field", [({"runs": 0}, "runs"), ({"workers": "2"}, "workers"), ({"limit": -1}, "limit"),
                                       ({"seeds": "0"}, "seeds"), ({"run_id": "a/b"}, "run_id"),
                                       ({"test_sources": ["Nobody"]}, "test_sources"),
                                       ({"repair_agent": "expert"}, "repair_agent"), ({"train": "yes"}, "train"),
                                       ({"allow_gpu_hours": -1}, "allow_gpu_hours"),
                                       ({"allow_gpu_hours": "lots"}, "allow_gpu_hours"),
                                       ({"output_dir": 5}, "output_dir"), ({"work_dir": ""}, "work_dir"),
                                       ({"models": {"repair_base": 5}}, "models.repair_base"),
                                       ({"runs": 5000}, "runs"), ({"workers": 100_000}, "workers"),
                                       ({"skip_unrunnable": "yes"}, "skip_unrunnable")])
def test_bad_values_name_the_parameter(kw, field):
    with pytest.raises(InputError) as exc:
        parameters("table2", preset="smoke", **kw)
    assert exc.value.field == field


def test_a_condition_that_cannot_run_stops_the_run_or_is_set_aside_with_its_reason(tmp_path):
    """A notebook run's preflight (`core.check_runnable`): an endpoint that does not answer stops the run before its
    first unit, naming the role, the spec and the condition; with skip_unrunnable the condition is rendered `not run
    here` with that reason, and the conditions that do not use it stay runnable."""
    import socket

    with socket.socket() as s:                   # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"openai:http://127.0.0.1:{s.getsockname()[1]}/v1#m"
    groups = {"verified": core.Group("verified", "d", None, [], tmp_path / "verified")}
    p = parameters("table2", preset="smoke", models={"repair_trained": dead})
    planned = core.plan_artifact(SPECS["table2"], p)
    with pytest.raises(core.EnvironmentMissing) as exc:
        core.check_runnable(planned, groups, p)
    assert f"models.repair_trained ({dead}): no model server answers" in str(exc.value)
    assert "trained / Oracle F2P" in str(exc.value) and "Nothing was run" in str(exc.value)
    p = parameters("table2", preset="smoke", models={"repair_trained": dead}, skip_unrunnable=True)
    planned = core.plan_artifact(SPECS["table2"], p)
    assert core.check_runnable(planned, groups, p) is True
    plans = {x.paper_label: x for x in planned}
    assert plans["trained / Oracle F2P"].reason.startswith("could not run when this run started: models.repair_trained")
    assert plans["base / Oracle F2P"].runnable


def test_a_role_given_a_model_under_a_stand_in_preset_stays_a_stand_in():
    p = parameters("table2", preset="smoke", models={"repair_trained": "openai:http://h/v1#my-ckpt"})
    b = p.binding("repair_trained")
    assert b.spec == "openai:http://h/v1#my-ckpt" and b.name == "my-ckpt" and b.stand_in


def test_notebook_parameters_match_the_validation_call():
    """The parameters cell names exactly the keyword arguments of experiments.parameters (plus nothing)."""
    import inspect

    kwargs = set(inspect.signature(parameters).parameters) - {"artifact"}
    for nb_path in sorted(NOTEBOOKS.glob("*.ipynb")):
        nb = nbformat.read(nb_path, as_version=4)
        cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
        names = {line.split("=")[0].strip() for line in cell.source.splitlines() if "=" in line}
        assert names == kwargs, (nb_path.name, names ^ kwargs)
        nxt = nb.cells[nb.cells.index(cell) + 1]
        assert "experiments.parameters(" in nxt.source and all(f"{k}={k}" in nxt.source.replace("models or None", "models")
                                                              for k in kwargs)


# ---- notebooks -----------------------------------------------------------------------------------------

def test_one_notebook_per_artifact_named_after_it():
    names = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    assert len(names) == len(PAPER_ARTIFACTS)
    for a in PAPER_ARTIFACTS:
        assert reproduce.notebook_path(a).name.startswith(f"{a}_")
        assert f'"{a}"' in "".join(c.source for c in nbformat.read(reproduce.notebook_path(a), 4).cells)
    assert reproduce.notebook_path("table2").name == "table2_repair_feedback.ipynb"


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.name)
def test_notebooks_are_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and tagged[0].cell_type == "code"
    for c in nb.cells:
        if c.cell_type == "code":
            assert c.outputs == [] and c.execution_count is None, f"{path.name}: stored output in a cell"
    assert nb.metadata.kernelspec.name == "python3"
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "experiments.run(params)" in code and "pd.read_csv" in code and "render.table(run)" in code
    assert len(code.splitlines()) < 60, "notebooks stay thin: logic lives in execcritic/experiments"


# ---- plans ---------------------------------------------------------------------------------------------

def _plans(artifact, preset="smoke"):
    p = parameters(artifact, preset=preset)
    return {x.paper_label: x for x in core.plan_artifact(SPECS[artifact], p)}


def test_smoke_plan_of_table2():
    plans = _plans("table2")
    base = plans["base / Oracle F2P"]
    assert base.runnable and base.repair_spec == "local" and base.test_spec == "oracle"
    assert base.fields == {"repair_agent": "base [stand-in: SmolLM2-135M-Instruct]", "test_source": "Oracle F2P"}
    gen = plans["base / Base-35B"]
    assert gen.fields["test_source"] == "Base-35B [stand-in: SmolLM2-135M-Instruct]" and gen.test_spec == "local"
    assert "API endpoint" in plans["base / GPT-5.6-sol"].reason
    assert "execcritic train" in plans["trained / None (Round 0)"].reason
    assert "needs `execcritic train repair-rl" in plans["trained / None (Round 0)"].reason



def test_a_trained_role_bound_to_a_checkpoint_is_run_and_served_by_the_suite(tmp_path):
    """`models={"test_rl": "hf:<dir>"}` (the `final_checkpoint` of `execcritic train`) makes the trained condition
    runnable; the suite serves that checkpoint only while a unit that uses it is left; a directory without a
    checkpoint is refused at the parameters, naming it."""
    ckpt = tmp_path / "final"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    p = parameters("table1", preset="smoke", models={"test_rl": f"hf:{ckpt}"})
    plans = {x.paper_label: x for x in core.plan_artifact(SPECS["table1"], p)}
    trained = next(x for label, x in plans.items() if "SFT + RL" in label)
    assert trained.runnable and trained.test_spec == f"hf:{ckpt}", trained.reason
    assert core._model_entry(p.binding("test_rl"))["endpoint"].startswith(f"checkpoint {ckpt} behind a local")
    tasks = [Task(instance_id="o__r-1", repo="o/r", base_commit="c", patch="", test_patch="", problem_statement="",
                  fail_to_pass=["t"], pass_to_pass=[])]
    g = core.Group("verified", "d", None, tasks, tmp_path / "verified", b2g={f"hf:{ckpt}", "oracle"})
    assert core._served_needed([g], p) == [f"hf:{ckpt}"]
    RecordStore(g.dir / "generation.jsonl").append({"key": core.unit_key("o__r-1", core.source_label(f"hf:{ckpt}"))})
    assert core._served_needed([g], p) == []
    with pytest.raises(InputError, match="not a HF checkpoint directory") as exc:
        parameters("table1", preset="smoke", models={"test_rl": f"hf:{tmp_path / 'missing'}"})
    assert exc.value.field == "models.test_rl" and exc.value.file == str(tmp_path / "missing")

def test_every_paper_condition_is_planned_and_says_why_when_not_run():
    for artifact, spec in SPECS.items():
        plans = _plans(artifact)
        assert len(plans) == len(spec.conditions)
        for p in plans.values():
            assert p.runnable or p.reason.strip(), (artifact, p.paper_label)
    assert not any(p.runnable for a in ("table3", "table4", "table5", "table6") for p in _plans(a).values())
    assert "Multilingual official images" in _plans("table5")["Rust"].reason
    assert "SWE-bench Pro data not available" in _plans("figure5")["a / SWE-bench Pro / GPT-5.6-sol / Oracle"].reason


def test_the_same_missing_model_in_two_roles_is_said_once():
    why = _plans("figure5")["a / SWE-bench Verified / GPT-5.6-sol / GPT-5.6 generated"].reason
    assert why.count("closed model GPT-5.6-sol needs an API endpoint") == 1 and "roles test_gpt56, repair_gpt56" in why


def test_test_sources_parameter_selects_conditions():
    p = parameters("table2", preset="smoke", test_sources=["Oracle F2P"])
    plans = {x.paper_label: x for x in core.plan_artifact(SPECS["table2"], p)}
    assert plans["base / Oracle F2P"].runnable
    assert "not selected" in plans["base / None (Round 0)"].reason


def test_stand_in_labels():
    lab = stand_in("base", "SmolLM2")
    assert (paper_part(lab), stand_in_name(lab), stand_in_name("base")) == ("base", "SmolLM2", None)
    order = ("base", "trained")
    assert sorted([stand_in("trained", "x"), "trained", lab, "base", "zzz"], key=lambda v: order_key(order, v)) == [
        "base", lab, "trained", stand_in("trained", "x"), "zzz"]


# ---- records and denominators --------------------------------------------------------------------------

def _task(iid: str) -> Task:
    return Task(instance_id=iid, repo="o/r", base_commit="0" * 40, patch="", test_patch="", problem_statement="x",
                fail_to_pass=("t::a",), pass_to_pass=(), version="1", log_parser="parse_log_pytest")


def _write(path: Path, rows):
    store = RecordStore(path)
    for r in rows:
        store.append(r)


def test_resolve_records_keep_every_instance_in_the_denominator(tmp_path):
    """Missing score -> counted missing; invalid official -> unresolved and counted invalid; a Base-gate
    failure's Round 0 is its terminal patch; a revised patch gets its own Round-0 score."""
    tasks = [_task(f"i{k}") for k in range(4)]
    g = core.Group("verified", "d", None, tasks, tmp_path / "verified")
    cfg = PipelineConfig(out_dir=str(g.repair_dir("local")), test_sources=("oracle",), repair_model="local",
                         generation_dir=str(g.dir))

    def rep(i, final, p0, **kw):
        return {"key": f"i{i}/oracle/run0", "instance_id": f"i{i}", "source": "oracle", "run": 0, "final_patch": final,
                "round0": {"patch": p0}, "local_status": "pass", "final_reason": "check_pass", "qualified_bundle": True,
                "entered_repair": final != p0, "revision_rounds": 1, "revision_turns": 3, "total_turns": 7, **kw}

    _write(Path(cfg.paths["repair"]), [rep(0, "A", "A"), rep(1, "B", "b0"), rep(2, "C", "C"), rep(3, "D", "D")])
    _write(Path(cfg.paths["score"]), [{"key": "i0/oracle/run0", "instance_id": "i0", "valid": True, "resolved": True},
                                      {"key": "i1/oracle/run0", "instance_id": "i1", "valid": True, "resolved": True},
                                      {"key": "i2/oracle/run0", "instance_id": "i2", "valid": False, "resolved": False,
                                       "error": "timeout"}])
    _write(Path(cfg.out_dir) / "score_round0.jsonl",
           [{"key": "i1/oracle/run0", "instance_id": "i1", "valid": True, "resolved": False}])
    cond = SPECS["table2"].conditions[2]
    planned = conditions.Planned(cond, "base / Oracle F2P", dict(cond.fields), test_spec="oracle", repair_spec="local")
    recs = core.resolve_records(planned, g, 1, cfg, round0_required=False)
    by = {r["instance_id"]: r for r in recs}
    assert set(by) == {"i0", "i1", "i2"}                                   # i3 has no score: missing
    assert (by["i0"]["resolved"], by["i0"]["round0_resolved"]) == (True, True)
    assert (by["i1"]["resolved"], by["i1"]["round0_resolved"]) == (True, False)
    assert (by["i2"]["resolved"], by["i2"]["official_valid"], by["i2"]["official_error"]) == (False, False, "timeout")
    w = new_run("table2", "unit", root=tmp_path / "results", instances=[t.instance_id for t in tasks], runs=1,
                command="test")
    w.extend(recs)
    run = w.finalize()
    s = run.summary.iloc[0]
    assert (s["value"], s["n_instances"], s["n_invalid"], s["n_missing"]) == (50.0, 4, 1, 1)


def test_b2g_records_count_a_missing_bundle_as_zero(tmp_path):
    tasks = [_task("i0"), _task("i1"), _task("i2")]
    g = core.Group("verified", "d", None, tasks, tmp_path / "verified")
    _write(g.dir / "generation.jsonl", [
        {"key": "i0/model:local", "instance_id": "i0", "source": "model:local", "qualified": True, "attempts_used": 1},
        {"key": "i1/model:local", "instance_id": "i1", "source": "model:local", "qualified": False, "attempts_used": 2}])
    brief = {"valid": True, "failure_kind": "behavioral_failure"}
    _write(g.audit_path("local"), [{"key": "i0/x", "instance_id": "i0", "B": 1, "G": 0, "Q": 0, "miss": "gold_failed",
                                    "base": brief, "gold": brief, "bundle_digest": "d"}])
    cond = SPECS["table1"].conditions[0]
    planned = conditions.Planned(cond, "Qwen3.5-35B-A3B", dict(cond.fields), test_spec="local")
    recs = {r["instance_id"]: r for r in core.b2g_records(planned, g)}
    assert set(recs) == {"i0", "i1"}                                       # i2 not generated: missing
    assert (recs["i0"]["B"], recs["i0"]["G"], recs["i0"]["Q"], recs["i0"]["miss"]) == (1, 0, 0, "gold_failed")
    assert (recs["i1"]["Q"], recs["i1"]["miss"], recs["i1"]["base_valid"]) == (0, "no_bundle", None)


def test_per_condition_denominators(tmp_path):
    """Table 5: each language is a rate over its own subset, not over every instance of the run."""
    w = new_run("table5", "unit", root=tmp_path, instances=["p0", "p1", "r0", "r1", "r2", "r3"], runs=1,
                command="test")
    w.set_denominators({"Python": ["p0", "p1"], "Rust": ["r0", "r1", "r2", "r3"]})
    from tests.synthetic_results import b2g

    w.extend([b2g("p0", 1, language="Python", dataset="v"), b2g("p1", 0, language="Python", dataset="v"),
              b2g("r0", 1, language="Rust", dataset="m")])
    run = w.finalize()
    s = run.summary.set_index("language")
    assert s.loc["Python", "value"] == 50.0 and s.loc["Python", "n_instances"] == 2
    assert s.loc["Rust", "value"] == 25.0 and (s.loc["Rust", "n_instances"], s.loc["Rust", "n_missing"]) == (4, 3)
    again = load_run("table5", run.run_id, root=tmp_path)            # the schema check recomputes with them
    assert again.summary.equals(run.summary)
    with pytest.raises(InputError, match="outside manifest.instances"):
        w.set_denominators({"C": ["zz"]})


def test_contrasts_pair_only_conditions_on_the_same_instances():
    sch = schema("table2")
    import pandas as pd

    recs = pd.DataFrame([{"instance_id": i, "run": 0, "repair_agent": "base", "test_source": s, "resolved": v,
                          "official_valid": True} for i, s, v in
                         [("a", "None (Round 0)", False), ("b", "None (Round 0)", True), ("a", "Oracle F2P", True)]])
    same = stats.contrasts(sch, recs, ["a", "b"], 1)
    assert len(same) == 1 and same.iloc[0]["delta"] == 0.0
    differ = stats.contrasts(sch, recs, ["a", "b"], 1, denominators={"base / Oracle F2P": ["a"]})
    assert differ.empty


# ---- the package API -----------------------------------------------------------------------------------

def test_the_api_names_every_artifact():
    assert set(experiments.SPECS) == set(PAPER_ARTIFACTS) == set(experiments.MODULES)
    for a, spec in SPECS.items():
        assert spec.artifact == a and spec.kind in ("b2g", "resolve")
        assert schema(a).kind == "instance"
        for c in spec.conditions:
            assert set(c.fields) == set(schema(a).condition), (a, c.fields)
            for role in c.roles():
                assert role in presets.ROLES


def test_sessions_continue_until_finished(tmp_path):
    s, resumed = reproduce.open_session("smoke", tmp_path, ["table1"], command="x")
    assert not resumed and json.loads(s.path.read_text())["status"] == "running"
    again, resumed = reproduce.open_session("smoke", tmp_path, ["table2"], command="y")
    assert resumed and again.session == s.session and again.artifacts == ["table1", "table2"]
    reproduce.finish(again)
    third, resumed = reproduce.open_session("smoke", tmp_path, ["table1"], command="z")
    assert not resumed and third.session != s.session
    _, resumed = reproduce.open_session("smoke", tmp_path, ["table1"], command="z", fresh=True)
    assert not resumed
    with pytest.raises(InputError, match="unknown artifact"):
        reproduce.check_artifacts(["table9"])


def test_a_session_trains_from_start_to_end_and_pins_the_grpo_runs_its_figure6_drew(tmp_path):
    """`reproduce --train`: the session records it, a killed one continues only the same way (a mix would pin
    tables with and without trained rows), its notebooks get train=True, and its Figure 6 curves become the pinned
    training runs; a session without it leaves the pinned training runs alone."""
    from execcritic.results.pins import read_pins, write_pins

    write_pins(tmp_path, training=["older-run"])
    s, _ = reproduce.open_session("smoke", tmp_path, ["table1", "figure6"], command="x", train=True)
    assert json.loads(s.path.read_text())["train"] is True
    with pytest.raises(InputError, match="started with --train"):
        reproduce.open_session("smoke", tmp_path, ["table1"], command="y")
    assert reproduce.open_session("smoke", tmp_path, ["table1"], command="y", train=True)[0].session == s.session
    for a, extra in (("table1", {}), ("figure6", {"training_curves": {"test RL from sft": "run-b",
                                                                      "repair RL from base": "run-a"}})):
        (tmp_path / a / s.session).mkdir(parents=True)
        (tmp_path / a / s.session / "manifest.json").write_text(json.dumps({"status": "complete", **extra}))
    reproduce.pin(s)
    assert read_pins(tmp_path) == {"runs": {"table1": s.session, "figure6": s.session}, "training": ["run-a", "run-b"]}
    s.train = False                                     # the same finished runs, from a session that trained nothing
    write_pins(tmp_path, training=["older-run"])
    reproduce.pin(s)
    assert read_pins(tmp_path)["training"] == ["older-run"]
    with pytest.raises(InputError, match="train=True trains on CPU"):
        reproduce.check_parameters("paper", ["table1"], tmp_path, None, train=True)


def test_a_ray_preset_sends_its_units_to_the_cluster_and_builds_nothing_here():
    """paper-git's units go to Ray with a preparer that makes each unit's environment on its node; the driver
    builds nothing and checks only that the cluster answers (an unreachable one fails before any unit, naming
    the variable to set)."""
    from execcritic.errors import EnvironmentMissing
    from execcritic.pipeline import preflight

    ray = core._executor(parameters("table1", preset="paper-git"))
    assert ray["backend"] == "ray" and ray["ray_address"] is None
    assert ray["prepare"] == preflight.NodeEnvironments(None)
    assert core.nodes_build(parameters("table1", preset="paper-git"))
    smoke = parameters("table1", preset="smoke")
    assert core._executor(smoke) == {} and not core.nodes_build(smoke)
    preflight.ray_cluster(None)                                   # a local cluster: started by the run
    with pytest.raises(EnvironmentMissing, match="EXECCRITIC_RAY_ADDRESS"):
        preflight.ray_cluster("127.0.0.1:1")
