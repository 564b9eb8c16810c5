"""The bad-input corpus: what a new user gets wrong, run through the installed `execcritic` as a subprocess.

Every case must end with its documented exit code and one `error:` line that names the flag, file, field or
instance at fault (JSON under `--json`), no traceback, nothing on stdout but JSON, and nothing already computed
lost: the repository's committed `results/` and an existing run directory are byte-identical afterwards.
`python -m tests.integration.test_bad_input` prints the corpus as a Markdown table (input -> exit -> message).
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

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
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


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
    # a finished run with another Repair model: resuming it with a different one must be refused
    run = d / "existing-run"
    run.mkdir()
    (run / "fingerprint.json").write_text(json.dumps({"repair_model": SCRIPTED}) + "\n")
    (run / "repair.jsonl").write_text(json.dumps({"key": f"{TASK}/oracle/run0", "final_patch": ""}) + "\n")

    silent = socket.socket()             # accepts connections, never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)

    class Models(http.server.BaseHTTPRequestHandler):   # an OpenAI-compatible /models listing another model
        def do_GET(self):                               # noqa: N802
            body = json.dumps({"object": "list", "data": [{"id": "other-model", "object": "model"}]}).encode()
            self.send_response(200 if self.path.endswith("/models") else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=other.serve_forever, daemon=True).start()
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
        Case("--runs 0", (*run, "--runs", "0"), 2, "--runs (repair.runs_per_source) must be an int >= 1, got 0"),
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
             f"repair.round0_turns must be an int >= 1, got -3 [file={d / 'negative.yaml'}"),
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


def test_the_corpus_has_at_least_forty_cases():
    assert len(NAMES) >= 40 and len(set(NAMES)) == len(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_bad_input_fails_with_one_line_naming_what_is_wrong(name, inputs, committed_results):
    case = next(c for c in corpus(inputs) if c.name == name)
    if case.rows and (why := rows_missing()):
        pytest.skip(why)
    existing = inputs["dir"] / "existing-run"
    before = _files(existing)
    proc = _run(case)
    assert proc.returncode == case.code, f"{case.name}: exit {proc.returncode}\n{proc.stderr[-2000:]}"
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert "Traceback" not in proc.stderr, f"{case.name}: a traceback\n{proc.stderr[-2000:]}"
    assert len(lines) == 1 and lines[0].startswith("error: "), f"{case.name}: not one error line:\n{proc.stderr}"
    assert case.says in lines[0], f"{case.name}: {lines[0]!r} does not say {case.says!r}"
    assert proc.stdout == "", f"{case.name}: wrote to stdout: {proc.stdout[:500]}"
    assert _files(existing) == before, f"{case.name}: changed an existing run's records"


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
