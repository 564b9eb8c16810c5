"""The bad-input corpus: what a new user gets wrong, run through the installed `execcritic` as a subprocess.

Every case must end with its documented exit code and one `error:` line that names the flag, file, field or
instance at fault (JSON under `--json`), no traceback, nothing on stdout but JSON, and nothing already computed
lost: the repository's committed `results/` and an existing run directory are byte-identical afterwards.
`python -m tests.integration.test_bad_input` prints the corpus as a Markdown table (input -> exit -> message).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.endpoints import models_handler, serve
from tests.paths import REPO, VERIFIED, rows_missing

pytestmark = pytest.mark.integration

EXECCRITIC = str(Path(sys.executable).parent / "execcritic")
SCRIPTED = "scripted:tests/scripted_policies.py:wrong_then_gold"
TASK = "psf__requests-2931"          # the cheapest verified-sdist environment (built in seconds)


@dataclass(frozen=True)
class Case:
    name: str
    argv: tuple[str, ...]
    code: int
    says: str                                   # a fragment the one error line must contain
    env: tuple[tuple[str, str], ...] = ()
    rows: bool = False                          # the command reads the Verified rows before it meets the bad input


def _files(root: Path) -> dict[str, str]:
    """Every file under `root` and its content digest (size and mtime for the sparse inputs of many MB)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            st = p.stat()
            out[str(p.relative_to(root))] = (f"{st.st_size}:{st.st_mtime_ns}" if st.st_size > (1 << 20) else
                                             hashlib.sha256(p.read_bytes()).hexdigest())
    return out


@contextlib.contextmanager
def bad_inputs(d: Path):
    """Bad files, a silent endpoint, an endpoint serving another model, and an existing run directory."""
    (d / "corrupt.parquet").write_bytes(os.urandom(2048))
    (d / "bad.jsonl").write_text("{not json\n")
    (d / "rows.csv").write_text("instance_id\nx\n")
    (d / "row-missing-fields.jsonl").write_text(json.dumps({"instance_id": "a__b-1", "repo": "a/b"}) + "\n")
    (d / "garbage-generation.jsonl").write_text("this is not a record\n")
    (d / "negative.yaml").write_text("repair:\n  round0_turns: -3\n")
    (d / "broken.yaml").write_text("repair:\n  round0_turns: [1,\n")
    (d / "binary.diff").write_bytes(b"\x7fELF\x00\x01\x02\xff\xfe")
    (d / "a-file").write_text("not a directory\n")
    (d / "empty-results").mkdir()
    (d / "bundle-missing").mkdir()
    # datasets that parse but are wrong (the rows of a run over nothing, or no rows at all)
    (d / "empty.jsonl").write_text("")
    (d / "obj.json").write_text("{}\n")
    (d / "numbers.json").write_text(json.dumps({"a": 1}) + "\n")
    (d / "strings.json").write_text(json.dumps(["a", "b"]) + "\n")
    (d / "list-row.jsonl").write_text("[1, 2]\n")
    (d / "null-row.jsonl").write_text("null\n")
    import pandas as pd

    pd.DataFrame({"instance_id": pd.Series([], dtype=str)}).to_parquet(d / "zero.parquet")
    (d / "big-row.jsonl").write_text(json.dumps({"instance_id": "a__b-1", "problem_statement": "x" * (9 << 20)}) + "\n")
    # inputs over the size limits (sparse: the size is what is refused, before anything reads them)
    with open(d / "big.diff", "wb") as fh:
        fh.truncate(50 << 20)
    (d / "big-bundle").mkdir()
    with open(d / "big-bundle" / "test.patch", "wb") as fh:
        fh.truncate(9 << 20)
    (d / "big-bundle" / "test_command").write_text("pytest tests/test_x.py\n")
    (d / "big-bundle" / "test_contract.json").write_text("{}\n")
    # run directories that cannot be used, or hold damaged state: refused before anything is written there
    os.symlink("loop", d / "loop")
    for name, files in {"corrupt-run": {"repair.jsonl": json.dumps({"key": "a/oracle/run0"}) + "\n{not json\n"
                                                                + json.dumps({"key": "b/oracle/run0"}) + "\n"},
                        "list-record-run": {"generation.jsonl": "[1]\n"},
                        "bad-fingerprint-run": {"fingerprint.json": "{not json\n"},
                        "list-fingerprint-run": {"fingerprint.json": "[1, 2]\n"}}.items():
        (d / name).mkdir()
        for fname, text in files.items():
            (d / name / fname).write_text(text)
    # a finished run with another Repair model: resuming it with a different one must be refused
    run = d / "existing-run"
    run.mkdir()
    (run / "fingerprint.json").write_text(json.dumps({"repair_model": SCRIPTED}) + "\n")
    (run / "repair.jsonl").write_text(json.dumps({"key": f"{TASK}/oracle/run0", "final_patch": ""}) + "\n")

    silent = socket.socket()             # accepts connections, never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)

    other = serve(models_handler("other-model"))   # an OpenAI-compatible /models listing another model
    try:
        yield {"dir": d, "silent": f"http://127.0.0.1:{silent.getsockname()[1]}/v1",
               "other": f"http://127.0.0.1:{other.server_address[1]}/v1"}
    finally:
        other.shutdown()
        silent.close()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    with bad_inputs(tmp_path_factory.mktemp("bad")) as found:
        yield found


def corpus(i: dict) -> list[Case]:
    d, silent, other = i["dir"], i["silent"], i["other"]
    run = ("run", "-i", TASK, "--out", str(d / "runs" / "x"))
    offline = (("HF_ENDPOINT", "http://127.0.0.1:9"), ("EXECCRITIC_VERIFIED", ""))
    return [
        # model specs and endpoints
        Case("unknown model spec", (*run, "--repair-model", "bogus"), 2, "unknown model spec 'bogus'"),
        Case("spec without http", (*run, "--repair-model", "openai:nohttp#m"), 2, "must start with http"),
        Case("spec without model name", (*run, "--repair-model", "openai:http://x/v1"), 2, "'#<model name>'"),
        Case("spec with unknown option", (*run, "--repair-model", "openai:http://x/v1#m?temp=2"), 2,
             "unknown option(s) ['temp']"),
        Case("scripted file missing", (*run, "--repair-model", "scripted:tests/nope.py:f"), 2,
             "cannot load the scripted policy"),
        Case("Test source spec bad", (*run, "--test-source", "openai:http://x/v1"), 2, "--test-source"),
        Case("endpoint not listening", (*run, "--repair-model", "openai:http://127.0.0.1:9/v1#m"), 2,
             "no model server answers at http://127.0.0.1:9/v1", rows=True),
        Case("endpoint never answers", (*run, "--repair-model", f"openai:{silent}#m"), 2, "no model server answers", rows=True),
        Case("endpoint serves another model", (*run, "--repair-model", f"openai:{other}#m"), 2,
             "does not serve 'm' (it serves: other-model)", rows=True),
        # counts and names
        Case("--runs 0", (*run, "--runs", "0"), 2, "--runs (repair.runs_per_source) must be an int >= 1 and <= 1000, got 0"),
        Case("--limit 0", (*run, "--limit", "0"), 2, "'--limit': expected a whole number >= 1, or 'all'"),
        Case("--limit -1", (*run, "--limit", "-1"), 2, "'--limit'"),
        Case("--limit many", (*run, "--limit", "many"), 2, "'--limit'"),
        Case("--workers 0", (*run, "--workers", "0"), 2, "'--workers'"),
        Case("--workers -1", (*run, "--workers", "-1"), 2, "'--workers'"),
        Case("unknown backend", (*run, "--backend", "nope"), 2, "'--backend': expected one of local, docker"),
        Case("unknown executor", (*run, "--executor", "dask"), 2, "'--executor': expected one of threads, ray"),
        Case("positional dataset", ("run", "verified-sdist"), 2, "given with --dataset"),
        Case("unknown command", ("frobnicate",), 2, "No such command 'frobnicate'"),
        Case("unknown option", (*run, "--frobnicate"), 2, "No such option: --frobnicate"),
        # protocol knobs: range, type, profiles
        Case("negative turns", (*run, "--set", "repair.round0_turns=-3"), 2, "repair.round0_turns must be an int >= 1"),
        Case("zero timeout", (*run, "--set", "harness.test_timeout_s=0"), 2, "harness.test_timeout_s must be a float > 0"),
        Case("fractional turns", (*run, "--set", "repair.turns_per_round=2.5"), 2, "repair.turns_per_round must be an int"),
        Case("bool for a count", (*run, "--set", "repair.round0_turns=true"), 2, "repair.round0_turns must be an int"),
        Case("probability above 1", ("train", "test-rl", "--set", "grpo.rollout_top_p=1.5"), 2,
             "grpo.rollout_top_p must be a float > 0 and <= 1"),
        Case("unknown schedule", ("train", "repair-rl", "--set", "repair_rl.lr_schedule=linear"), 2,
             "must be one of constant, cosine"),
        Case("knob the command ignores", ("official", "--patch", "gold", "--set", "repair.turns_per_round=3"), 2,
             "reads only harness.* knobs"),
        Case("unknown knob", ("config", "show", "--set", "harness.nope=1"), 2, "unknown config key 'harness.nope'"),
        Case("profile with a negative value", (*run, "-c", str(d / "negative.yaml")), 2,
             f"repair.round0_turns must be an int >= 1 and <= 100000, got -3 [file={d / 'negative.yaml'}"),
        Case("profile YAML syntax error", (*run, "-c", str(d / "broken.yaml")), 2, "not valid YAML at line"),
        Case("profile file missing", (*run, "-c", str(d / "nope.yaml")), 2, "config file not found"),
        Case("unknown profile", (*run, "-c", "fastest"), 2, "unknown profile 'fastest'"),
        # datasets, instances, files
        Case("dataset file missing", ("tasks", "stats", "-d", "/nonexistent.parquet"), 2, "no such dataset file"),
        Case("corrupt parquet", ("tasks", "stats", "-d", str(d / "corrupt.parquet")), 2, "not a readable parquet"),
        Case("JSONL line not JSON", ("tasks", "stats", "-d", str(d / "bad.jsonl")), 2, "line 1 is not JSON"),
        Case("unsupported file type", ("tasks", "stats", "-d", str(d / "rows.csv")), 2, "unsupported dataset file type"),
        Case("row missing fields", ("tasks", "stats", "-d", str(d / "row-missing-fields.jsonl")), 2, "a__b-1"),
        Case("alias offline", ("tasks", "stats", "-d", "verified"), 2, "set $EXECCRITIC_VERIFIED to a local copy", offline),
        Case("unknown instance", ("official", "-i", "nope__nope-1", "--patch", "gold"), 2, "instance=nope__nope-1",
             rows=True),
        Case("unknown instance to build", ("tasks", "build-sdist", "--instance", "nope__nope-1"), 2,
             "--instance nope__nope-1: not in the verified-sdist recipe"),
        Case("unknown repo to build", ("tasks", "build-sdist", "--repo", "nope/nope"), 2, "--repo nope/nope"),
        Case("patch file missing", ("official", "-i", TASK, "--patch", str(d / "nope.diff")), 2, "patch file not found",
             rows=True),
        Case("binary patch file", ("official", "-i", TASK, "--patch", str(d / "binary.diff")), 2,
             "the patch file is not UTF-8 text", rows=True),
        Case("bundles file missing", ("audit", "--test-source", "bundles:/missing.jsonl"), 2,
             "no such generation file [file=/missing.jsonl"),
        Case("bundles file garbage", ("audit", "--test-source", f"bundles:{d / 'garbage-generation.jsonl'}"), 2,
             "not a generation record file"),
        Case("--out under a file", ("audit", "-i", TASK, "--out", str(d / "a-file" / "sub")), 2,
             f"Not a directory: {d / 'a-file'}", rows=True),
        Case("audit --repeat 0", ("audit", "--repeat", "0"), 2, "'--repeat'"),
        Case("--update-recipe without --repeat", ("audit", "--update-recipe"), 2, "only --repeat 2 or more"),
        Case("--repair-model without --impossible", ("audit", "--repair-model", SCRIPTED), 2,
             "read only with --impossible"),
        Case("--impossible without a model", ("audit", "--impossible"), 2, "needs at least one --repair-model"),
        Case("bundle directory missing", ("bundle", "check", str(d / "bundle-missing")), 2, "bundle-missing"),
        Case("--oracle without dataset", ("bundle", "check", "--oracle"), 2, "--oracle needs --dataset"),
        Case("--min-rate above 1", ("bundle", "check", "--oracle", "-d", str(VERIFIED), "--min-rate", "2"), 2,
             "'--min-rate'"),
        Case("repair run missing", ("candidates", "build", "--repair-run", str(d / "nope")), 2,
             "not a pipeline run directory"),
        Case("test-rl without candidates", ("train", "test-rl"), 2, "test-rl needs --candidates"),
        Case("SFT data missing", ("train", "sft", "--data", str(d / "nope.jsonl")), 2, "no such file"),
        Case("checkpoint missing", ("train", "evaluate", str(d / "nope")), 2, "not a HF checkpoint directory"),
        Case("--resume without --run-id", ("train", "repair-rl", "--resume"), 2, "give its --run-id"),
        Case("unknown figure pin", ("figures", "--run", "table1"), 2, "expected ARTIFACT=RUN_ID"),
        Case("unknown suite task set", ("tasks", "list", "-d", "nope"), 2, "not a suite task set"),
        Case("unknown artifact", ("reproduce", "--only", "table9"), 2, "table9"),
        Case("unknown preset", ("reproduce", "--preset", "fastest"), 2, "fastest"),
        Case("nothing to render", ("reproduce", "--from-results", "--results", str(d / "empty-results"),
                                   "--figures", str(d / "pf")), 2, "nothing to render"),
        Case("torch threads 0", ("serve", "local", "--torch-threads", "0", "--print"), 2, "'--torch-threads'"),
        # datasets that parse but are wrong: exit 2 naming file, line and field - never 70, never "0 tasks"
        Case("empty JSONL dataset", ("tasks", "stats", "-d", str(d / "empty.jsonl")), 2, "holds no rows"),
        Case("0-row parquet dataset", ("tasks", "stats", "-d", str(d / "zero.parquet")), 2, "holds no rows"),
        Case("{} as a dataset", ("tasks", "stats", "-d", str(d / "obj.json")), 2, "expected a JSON list of SWE-bench rows"),
        Case("JSON object of numbers", ("tasks", "stats", "-d", str(d / "numbers.json")), 2,
             "expected a JSON list of SWE-bench rows"),
        Case("JSON rows that are strings", ("tasks", "stats", "-d", str(d / "strings.json")), 2,
             "row 1 is not a SWE-bench row"),
        Case("JSONL row that is a list", ("tasks", "stats", "-d", str(d / "list-row.jsonl")), 2,
             "line 1 is not a SWE-bench row (a JSON object with instance_id, repo, ...): got [1, 2]"),
        Case("JSONL row that is null", ("tasks", "stats", "-d", str(d / "null-row.jsonl")), 2,
             "line 1 is not a SWE-bench row"),
        # upper bounds: a typo is refused where it is given
        Case("turns beyond any protocol", (*run, "--set", "repair.round0_turns=100000000000"), 2,
             "repair.round0_turns must be an int >= 1 and <= 100000"),
        Case("a timeout of a year", (*run, "--set", "harness.test_timeout_s=31536000"), 2,
             "harness.test_timeout_s must be a float > 0 and <= 86400"),
        Case("--runs 5000", (*run, "--runs", "5000"), 2, "--runs (repair.runs_per_source) must be an int >= 1 and <= 1000"),
        Case("--workers 100000", (*run, "--workers", "100000"), 2, "'--workers'"),
        Case("audit --repeat 10000", ("audit", "--repeat", "10000"), 2, "'--repeat'"),
        # run directories
        Case("--out ''", ("run", "-i", TASK, "--out", ""), 2, "is the current directory"),
        Case("--out .", ("audit", "--out", "."), 2, "is the current directory"),
        Case("--out a symlink to itself", ("run", "-i", TASK, "--out", str(d / "loop")), 2,
             "a symbolic link that does not resolve"),
        Case("a corrupt record mid-file", ("run", "-i", TASK, "--out", str(d / "corrupt-run"), "--repair-model",
                                           SCRIPTED), 2,
             "corrupt record at line 2 (Expecting property name enclosed in double quotes): not written by execcritic",
             rows=True),
        Case("a record that is a list", ("generate-tests", "-i", TASK, "--out", str(d / "list-record-run")), 2,
             "a record is a JSON object with a \"key\", got '[1]'", rows=True),
        Case("a damaged fingerprint.json", ("run", "-i", TASK, "--out", str(d / "bad-fingerprint-run")), 2,
             "fingerprint.json is damaged", rows=True),
        Case("fingerprint.json that is a list", ("run", "-i", TASK, "--out", str(d / "list-fingerprint-run")), 2,
             "fingerprint.json is not a JSON object", rows=True),
        # sizes
        Case("a 50 MB patch", ("official", "-i", TASK, "--patch", str(d / "big.diff")), 2,
             "the patch file is 50.0 MiB, over the limit of 4.0 MiB"),
        Case("a 9 MB bundle", ("bundle", "check", str(d / "big-bundle")), 2, "the bundle is 9.0 MiB, over the limit"),
        Case("a 9 MB dataset row", ("tasks", "stats", "-d", str(d / "big-row.jsonl")), 2,
             "line 1 is 9.0 MiB, over the limit of 8.0 MiB"),
        # presets: what is missing is named before anything is written
        Case("ci preset without its dataset variable", ("reproduce", "--preset", "ci", "--results",
                                                        str(d / "ci-results"), "--figures", str(d / "ci-pf")), 2,
             "takes its dataset from $EXECCRITIC_CI_DATASET, which is not set", (("EXECCRITIC_CI_DATASET", ""),)),
        # resume honesty
        Case("resume with another Repair model", ("run", "-i", TASK, "--out", str(d / "existing-run"),
                                                  "--repair-model", "scripted:tests/scripted_policies.py:gives_up"),
             2, "holds records made with other settings (repair_model:", rows=True),
    ]


def _run(case: Case, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "EXECCRITIC_VERIFIED": str(VERIFIED), **dict(case.env)}
    env = {k: v for k, v in env.items() if v != ""}
    return subprocess.run([EXECCRITIC, *case.argv, *extra], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def committed_results():
    before = _files(REPO / "results")
    yield
    assert _files(REPO / "results") == before, "a bad input changed the committed results/"


NAMES = [c.name for c in corpus({"dir": Path("/d"), "silent": "http://s/v1", "other": "http://o/v1"})]


def test_the_corpus_has_at_least_ninety_cases():
    """The one-line cases here, the papermill runs, and the cases that need a process of their own (two runs on
    one directory, a full disk, a read-only cache, SIGTERM and SIGINT: tests/integration/test_signals.py)."""
    total = len(NAMES) + len(NOTEBOOK_CASES) + len(PROCESS_CASES)
    assert total >= 90 and len(set(NAMES)) == len(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_bad_input_fails_with_one_line_naming_what_is_wrong(name, inputs, committed_results):
    case = next(c for c in corpus(inputs) if c.name == name)
    if case.rows and (why := rows_missing()):
        pytest.skip(why)
    before = _files(inputs["dir"])
    proc = _run(case)
    assert proc.returncode == case.code, f"{case.name}: exit {proc.returncode}\n{proc.stderr[-2000:]}"
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert "Traceback" not in proc.stderr, f"{case.name}: a traceback\n{proc.stderr[-2000:]}"
    assert len(lines) == 1 and lines[0].startswith("error: "), f"{case.name}: not one error line:\n{proc.stderr}"
    assert case.says in lines[0], f"{case.name}: {lines[0]!r} does not say {case.says!r}"
    assert proc.stdout == "", f"{case.name}: wrote to stdout: {proc.stdout[:500]}"
    after = _files(inputs["dir"])
    assert after == before, f"{case.name}: wrote or changed files before refusing: " \
        f"{sorted(set(after.items()) ^ set(before.items()))[:5]}"


def test_json_errors_are_json_on_stdout_only(inputs):
    case = next(c for c in corpus(inputs) if c.name == "--runs 0")
    proc = _run(case, "--json")
    assert proc.returncode == 2 and proc.stderr == ""
    data = json.loads(proc.stdout)
    assert data["error"] == "InputError" and "--runs" in data["message"]


def test_debug_shows_the_traceback(inputs):
    proc = subprocess.run([EXECCRITIC, "--debug", "tasks", "stats", "-d", str(inputs["dir"] / "rows.csv")],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" in proc.stderr and proc.stderr.strip().endswith(
        "[file=" + str(inputs["dir"] / "rows.csv") + "]")


# ---- notebook runs, as README runs them (papermill): the parameters are checked by type and range, the endpoints
# probed and the backend checked before the first unit; papermill exits 1 with the one error in the notebook

NOTEBOOK = REPO / "notebooks" / "table2_repair_feedback.ipynb"
PAPER_MODELS = json.dumps({"repair_base": "openai:http://127.0.0.1:9/v1#Qwen3.5-35B-A3B"})
NOTEBOOK_CASES = {       # name -> (papermill -p arguments, what the error says, extra environment)
    "notebook: output_dir that is a number": (("-p", "output_dir", "5"), "output_dir must be a directory path", ()),
    "notebook: a model spec that is a number": (("-p", "models", json.dumps({"repair_base": 5})),
                                                "models.repair_base must be a model spec", ()),
    "notebook: workers 0": (("-p", "workers", "0"), "workers must be an integer >= 1", ()),
    "notebook: runs 100000": (("-p", "runs", "100000"), "runs must be an integer >= 1 and <= 1000", ()),
    "notebook: train that is a string": (("-p", "train", "yes"), "train must be True or False", ()),
    # the README's paper-preset line with no model server and no Docker engine: it stops before its first unit
    "notebook: paper preset, no endpoint, no Docker engine": (
        ("-p", "preset", "paper", "-p", "models", PAPER_MODELS),
        "no model server answers at http://127.0.0.1:9/v1", (("DOCKER_HOST", "unix:///nonexistent/docker.sock"),)),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(NOTEBOOK_CASES))
def test_a_notebook_run_with_bad_input_stops_before_its_first_unit(name, tmp_path, committed_results):
    import nbformat

    args, says, extra = NOTEBOOK_CASES[name]
    if "paper" in args and (why := rows_missing()):
        pytest.skip(why)
    store, out = tmp_path / "store", tmp_path / "runs" / "table2.ipynb"
    out.parent.mkdir()
    where = () if "output_dir" in args else ("-p", "output_dir", str(store))
    env = {**os.environ, "EXECCRITIC_VERIFIED": str(VERIFIED), **dict(extra)}
    t0 = time.monotonic()
    proc = subprocess.run([str(Path(sys.executable).parent / "papermill"), str(NOTEBOOK), str(out), *args, *where,
                           "--cwd", str(REPO)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    took = time.monotonic() - t0
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert says in proc.stderr, proc.stderr[-2000:]
    errors = [o for c in nbformat.read(out, 4).cells if c.cell_type == "code" for o in c.get("outputs", ())
              if o.get("output_type") == "error"]
    assert len(errors) == 1 and errors[0]["ename"] in ("InputError", "EnvironmentMissing") and says in errors[0]["evalue"]
    assert not store.exists(), f"{name}: wrote {sorted(p.name for p in store.rglob('*'))[:5]} before refusing"
    if "paper" in args:          # both missing parts are named, and no unit ran
        assert "no Docker engine answers" in errors[0]["evalue"] and "Nothing was run" in errors[0]["evalue"]
        assert took < 120, f"{name}: took {took:.0f} s to stop"


# ---- cases that need a process of their own -------------------------------------------------------------

PROCESS_CASES = ("two runs on one run directory", "a full disk", "a read-only cache", "SIGTERM during run",
                 "SIGINT during run")        # (the two signals: tests/integration/test_signals.py)


def _in_mount_namespace(mount: str, argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """`argv` in a mount namespace of its own where `mount` (a shell command) has run: a small or read-only
    filesystem that only this process sees (unshare maps the caller to root, so no privilege is needed)."""
    return subprocess.run(["unshare", "--mount", "--map-root-user", "sh", "-c", f'{mount} && exec "$@"', "sh", *argv],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)


def _one_error_line(proc: subprocess.CompletedProcess, says: str) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert "Traceback" not in proc.stderr and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-2000:]
    assert says in lines[0], lines[0]
    return lines[0]


def test_a_full_disk_is_named_with_its_path(tmp_path, committed_results):
    full = tmp_path / "full"
    full.mkdir()
    proc = _in_mount_namespace(f"mount -t tmpfs -o size=64k tmpfs {full}",
                               [EXECCRITIC, "figures", "--out", str(full / "pf")], dict(os.environ))
    assert proc.returncode == 2
    _one_error_line(proc, f"No space left on device: {full / 'pf'}")
    assert "(free some disk space; finished records are kept)" in proc.stderr


def test_a_read_only_cache_names_the_cache_variable(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("EXECCRITIC_CACHE", "XDG_CACHE_HOME")}
    proc = _in_mount_namespace(f"mount -t tmpfs -o ro,size=64k tmpfs {home}",
                               [EXECCRITIC, "tasks", "build-sdist", "-i", TASK], {**env, "HOME": str(home)})
    assert proc.returncode == 2
    _one_error_line(proc, f"Read-only file system: {home}")
    assert "set $EXECCRITIC_CACHE" in proc.stderr


@pytest.mark.slow
def test_two_runs_on_one_run_directory(tmp_path):
    """The second gets one line naming the first (pid, host, start); the first finishes, every record once."""
    if why := rows_missing():
        pytest.skip(why)
    out = tmp_path / "shared-run"
    argv = [EXECCRITIC, "run", "-i", TASK, "--out", str(out), "--repair-model", SCRIPTED, "--runs", "1"]
    env = {**os.environ, "EXECCRITIC_VERIFIED": str(VERIFIED)}
    first = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 600
        while first.poll() is None and time.monotonic() < deadline:
            owner = out / ".owner"
            if owner.is_file() and f'"pid": {first.pid}' in owner.read_text():
                break
            time.sleep(0.2)
        assert first.poll() is None, "the first run ended before the second could meet it"
        second = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert second.returncode == 2
        line = _one_error_line(second, f"{out} is in use by pid {first.pid} on ")
        assert "one run directory has one writer" in line
        _, err = first.communicate(timeout=900)
        assert first.returncode == 0, err[-2000:]
    finally:
        if first.poll() is None:
            first.kill()
    for name in ("generation.jsonl", "repair.jsonl", "score.jsonl"):
        keys = [json.loads(ln)["key"] for ln in (out / name).read_text().splitlines()]
        assert keys and len(keys) == len(set(keys)), f"{name}: {keys}"


def table(inputs: dict) -> str:
    """The corpus as Markdown, each case run now: input -> exit code -> message (`python -m
    tests.integration.test_bad_input`)."""
    rows = ["| input | exit | message |", "|---|---|---|"]
    for case in corpus(inputs):
        proc = _run(case)
        msg = " ".join(proc.stderr.split())[:220].replace("|", "\\|")
        rows.append(f"| `execcritic {' '.join(case.argv)[:90]}` | {proc.returncode} | {msg} |")
    return "\n".join(rows)


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp, bad_inputs(Path(tmp)) as found:
        print(table(found))
