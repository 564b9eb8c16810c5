"""What stands between this machine and running each SWE-bench Multilingual JavaScript/TypeScript, Go, PHP and
Ruby row's tests at its exact base commit without the Docker images, measured per repository.

Why: a table that says these languages "cannot run here" should say what blocks each repository, by name and
version, or that the dependencies install and the test command starts. This machine reaches PyPI, the npm
registry and Debian's apt archive, but not GitHub, proxy.golang.org, packagist, rubygems.org or the browser
download servers (the `reachability` block probes each host), so the answer differs by language:

- JavaScript/TypeScript: one representative row per repository (the newest base commit) is checked out under
  /tmp, installed the way its lockfile implies (npm ci, yarn, pnpm; a missing yarn/pnpm is reached through
  `npx --yes <tool>@<packageManager version>` or the committed yarnPath), retried with `--ignore-scripts` only
  when a lifecycle script fails on a blocked host, and then the row's eval_script (test patch, build steps,
  test command) is run with /testbed replaced by the checkout; per-test results are counted with the row's
  log parser. The other rows of the repository are compared by lockfile blob only.
- Go: every row's go.mod (`go`/`toolchain` directives, require count, vendor/), the module cache here, and one
  `GOFLAGS=-mod=mod GOPROXY=off go list ./...` probe per repository for the first missing module.
- PHP and Ruby: the interpreters and package managers are absent, so the dependency counts (composer.lock /
  Gemfile.lock, or the manifests' direct requirements) per representative row, and how many of them Debian
  packages by name (apt is only read; nothing is installed).

Sources are the snapshots the session's fetch tool brought to `--mirror-root` (`<owner>+<name>/repo`);
FETCH_REFUSED records what it answered for those it would not bring. Every checkout, node_modules and cache
lives under one temporary directory, deleted per repository. With `--only-lang`, the other languages' rows are
carried over from an existing `--out` so partial runs accumulate.

  PYTHONPATH=. nice -n 19 .venv/bin/python experiments/multilingual_blockers_other.py \\
      --out results/multilingual_git/blockers_other.json --mirror-root /work/.mirror
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
from multilingual_blockers import Snapshot as RustJavaSnapshot  # this script's directory: run as a script
from multilingual_blockers import export_tree, first_line, run

from execcritic.results.manifest import build_manifest, note_start, write_result
from execcritic.swebench_compat import parser_registry

DATASET = "/work/shared/data/swebench/multilingual_test.parquet"
LANGS = {
    "js": [
        "axios/axios",
        "babel/babel",
        "facebook/docusaurus",
        "immutable-js/immutable-js",
        "mrdoob/three.js",
        "preactjs/preact",
        "vuejs/core",
    ],
    "go": [
        "caddyserver/caddy",
        "gin-gonic/gin",
        "gohugoio/hugo",
        "hashicorp/terraform",
        "prometheus/prometheus",
    ],
    "php": [
        "briannesbitt/carbon",
        "laravel/framework",
        "php-cs-fixer/php-cs-fixer",
        "phpoffice/phpspreadsheet",
    ],
    "ruby": [
        "faker-ruby/faker",
        "fastlane/fastlane",
        "fluent/fluentd",
        "jekyll/jekyll",
        "jordansissel/fpm",
        "rubocop/rubocop",
    ],
}
LANG_NAME = {"js": "JavaScript/TypeScript", "go": "Go", "php": "PHP", "ruby": "Ruby"}
# The dataset's lower-case names whose snapshot is stored under GitHub's spelling.
MIRROR_NAME = {
    "briannesbitt/carbon": "briannesbitt/Carbon",
    "php-cs-fixer/php-cs-fixer": "PHP-CS-Fixer/PHP-CS-Fixer",
    "phpoffice/phpspreadsheet": "PHPOffice/PhpSpreadsheet",
}
# What the fetch tool answered for the repositories it would not bring here.
FETCH_REFUSED = {
    "facebook/docusaurus": "snapshot refused: 1497518080 bytes, over the 524288000-byte limit",
    "mrdoob/three.js": "snapshot refused: 1806929920 bytes, over the 524288000-byte limit",
}
HOSTS = {
    "registry.npmjs.org": "https://registry.npmjs.org/",
    "registry.yarnpkg.com": "https://registry.yarnpkg.com/",
    "repo.yarnpkg.com": "https://repo.yarnpkg.com/",
    "proxy.golang.org": "https://proxy.golang.org/",
    "rubygems.org": "https://rubygems.org/",
    "repo.packagist.org": "https://repo.packagist.org/packages.json",
    "github.com": "https://github.com/",
    "storage.googleapis.com": "https://storage.googleapis.com/",
    "cdn.playwright.dev": "https://cdn.playwright.dev/",
    "nodejs.org": "https://nodejs.org/dist/",
    "deb.debian.org": "https://deb.debian.org/debian/",
}
TOOLS = [
    "node",
    "npm",
    "npx",
    "yarn",
    "pnpm",
    "corepack",
    "go",
    "php",
    "composer",
    "ruby",
    "bundle",
    "gem",
    "jq",
]
BROWSERS = ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome", "firefox"]
APT_CANDIDATES = ["nodejs", "golang-go", "php-cli", "composer", "ruby", "ruby-bundler", "chromium", "yarnpkg"]
INSTALL_TIMEOUT = 900
TEST_TIMEOUT = 600
GO_PROBE_TIMEOUT = 300
BLOCKED_HOST_RE = re.compile(
    r"(ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ECONNRESET|getaddrinfo|socket hang up|"
    r"Failed to download|download failed|Could not resolve host)",
    re.IGNORECASE,
)
ERROR_RE = re.compile(
    r"(\berror\b|ERR!|Cannot find|not found|No such file|command not found|ENOENT|ENOTFOUND|"
    r"failed to launch|No binary|cannot open|Missing)",
    re.IGNORECASE,
)


ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")


def tail(text: str, n: int = 15) -> list[str]:
    return [ANSI_RE.sub("", ln)[:300] for ln in text.splitlines() if ln.strip()][-n:]


def first_error(text: str) -> str | None:
    """The first line that reads as an error (xtrace lines skipped), else None."""
    for ln in text.splitlines():
        s = ANSI_RE.sub("", ln).strip()
        if s and not s.startswith("+") and ERROR_RE.search(s):
            return s[:400]
    return None


def run_logged(cmd: str, cwd: Path, env: dict, timeout: int) -> dict:
    """Run a shell command at lowest priority; its exit status, wall time and combined output."""
    t0 = time.monotonic()
    try:
        p = subprocess.run(
            ["nice", "-n", "19", "bash", "-c", cmd],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            timeout=timeout,
            check=False,
            start_new_session=True,
        )
        out, rc, timed_out = p.stdout, p.returncode, False
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        rc, timed_out = None, True
    return {"rc": rc, "timed_out": timed_out, "seconds": round(time.monotonic() - t0, 1), "output": out}


# ---------------------------------------------------------------- git snapshots


class Snapshot(RustJavaSnapshot):
    """One repository's snapshot (multilingual_blockers.py's), read leniently: a path whose blob the snapshot lacks
    reads as absent here, and a working tree can be checked out."""

    def read(self, sha: str, path: str) -> str | None:
        res = self.git("show", f"{sha}:{path}")
        return res.stdout if res.returncode == 0 else None

    def blob(self, sha: str, path: str) -> str | None:
        res = self.git("rev-parse", "--verify", "-q", f"{sha}:{path}")
        return res.stdout.strip() if res.returncode == 0 else None

    def date(self, sha: str) -> str:
        return self.git("log", "-1", "--format=%cI", sha).stdout.strip()

    def checkout(self, sha: str, dest: Path) -> list[str]:
        """A working tree of the commit with a one-commit .git, as the eval_script's `git` lines expect. Where
        the snapshot lacks some blobs (large files left out), `git fetch` refuses; the tree is then exported
        file by file without them and without .git, and the paths left out are returned."""
        dest.mkdir(parents=True)
        for args in (
            ["init", "-q"],
            ["fetch", "-q", "--depth", "1", f"file://{self.git_dir}", sha],
            ["-c", "advice.detachedHead=false", "checkout", "-q", "FETCH_HEAD"],
        ):
            res = run(["git", *args], cwd=dest)
            if res.returncode != 0:
                if args[0] != "fetch":
                    raise OSError(f"git {args[0]}: {first_line(res.stderr)}")
                shutil.rmtree(dest / ".git")
                return self.export(sha, dest)
        return []

    def export(self, sha: str, dest: Path) -> list[str]:
        return export_tree(self, sha, dest)


def find_snapshot(mirror_root: Path, repo: str) -> Snapshot | None:
    git_dir = mirror_root / MIRROR_NAME.get(repo, repo).replace("/", "+") / "repo"
    return Snapshot(git_dir) if git_dir.is_dir() else None


# ---------------------------------------------------------------- machine facts


def tool_version(name: str) -> str | None:
    path = shutil.which(name)
    if not path:
        return None
    flag = {"go": ["version"], "jq": ["--version"]}.get(name, ["--version"])
    res = run([path, *flag], timeout=60)
    return first_line(res.stdout or res.stderr) or f"{path} (no version output)"


def reachability() -> dict[str, str]:
    out = {}
    for host, url in HOSTS.items():
        res = run(["curl", "-s", "-o", "/dev/null", "-m", "8", "-w", "%{http_code}", url], timeout=30)
        code = res.stdout.strip()
        out[host] = f"HTTP {code}" if code and code != "000" else f"unreachable (curl exit {res.returncode})"
    return out


def apt_candidates(names: list[str]) -> dict[str, str | None]:
    res = run(["apt-cache", "policy", *names], timeout=120)
    out: dict[str, str | None] = dict.fromkeys(names)
    cur = None
    for ln in res.stdout.splitlines():
        if ln and not ln.startswith(" ") and ln.endswith(":"):
            cur = ln[:-1]
        elif cur and ln.strip().startswith("Candidate:"):
            v = ln.split(":", 1)[1].strip()
            out[cur] = None if v == "(none)" else v
    return out


def corepack_probe(tmp: Path) -> str:
    """Whether corepack here can fetch a package manager from the npm registry (one pnpm probe)."""
    if not shutil.which("corepack"):
        return "corepack absent"
    env = dict(os.environ, COREPACK_HOME=str(tmp / "corepack"), COREPACK_ENABLE_DOWNLOAD_PROMPT="0")
    res = run(["corepack", "pnpm@9.10.0", "--version"], cwd=tmp, env=env, timeout=120)
    if res.returncode == 0:
        return f"works (pnpm@9.10.0 --version -> {first_line(res.stdout)})"
    err = next((ln.strip() for ln in res.stderr.splitlines() if ln.strip().startswith("Error")), "")
    return f"fails: {err or first_line(res.stderr)}"


def toolchain_facts(tmp: Path) -> dict:
    gomod = run(["go", "env", "GOMODCACHE"]).stdout.strip() if shutil.which("go") else ""
    cache = Path(gomod, "cache", "download") if gomod else None
    return {
        "tools": {t: tool_version(t) for t in TOOLS},
        "browsers": {b: shutil.which(b) for b in BROWSERS},
        "corepack": corepack_probe(tmp),
        "go_env": {
            k: run(["go", "env", k]).stdout.strip()
            for k in ("GOPROXY", "GOFLAGS", "GOMODCACHE", "GOTOOLCHAIN")
        }
        if shutil.which("go")
        else {},
        "go_mod_cache": {
            "dir": str(cache) if cache else None,
            "exists": bool(cache and cache.is_dir()),
            "modules_cached": sum(1 for _ in cache.rglob("*.zip")) if cache and cache.is_dir() else 0,
        },
        "apt_candidates_not_installed": apt_candidates(APT_CANDIDATES),
        "reachability": reachability(),
        "nproc": os.cpu_count(),
    }


# ---------------------------------------------------------------- eval scripts


def test_command(eval_script: str) -> str:
    lines = eval_script.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith(": '>>>>> Start Test Output'"))
    j = next(j for j in range(i, len(lines)) if lines[j].startswith(": '>>>>> End Test Output'"))
    return "\n".join(lines[i + 1 : j])


def pre_test_steps(eval_script: str) -> list[str]:
    """The build steps the eval_script runs between the test patch and the test command (make build, ...)."""
    body = re.sub(r"<<'(EOF_\d+)'.*?\n\1\n", "<<HEREDOC\n", eval_script, flags=re.DOTALL)
    lines = body.split(": '>>>>> Start Test Output'")[0].splitlines()
    skip = ("#!", "set -", "cd /testbed", "git ", "rm -f ")
    return [ln for ln in lines if ln.strip() and not ln.startswith(skip)]


def local_eval_script(eval_script: str, workdir: Path) -> str:
    """The eval_script up to the end of its test output, run in `workdir`: no global git config written."""
    out = []
    for ln in eval_script.splitlines():
        if ln.strip() == "cd /testbed":
            ln = f"cd {workdir}"
        elif ln.startswith("git config --global"):
            continue
        out.append(ln.replace("/testbed", str(workdir)))
        if ln.startswith(": '>>>>> End Test Output'"):
            break
    return "\n".join(out) + "\n"


def test_output(log: str) -> str:
    parts = log.split(">>>>> Start Test Output", 1)
    return parts[1].split(">>>>> End Test Output", 1)[0] if len(parts) == 2 else ""


# ---------------------------------------------------------------- JavaScript / TypeScript


def js_plan(snap: Snapshot, sha: str) -> dict:
    """Which lockfile and package manager the commit implies, and the install command for it."""
    pkg = json.loads(snap.read(sha, "package.json") or "{}")
    pm_field = pkg.get("packageManager")
    yarnrc = snap.read(sha, ".yarnrc.yml") or ""
    yarn_path = next(
        (
            ln.split(":", 1)[1].strip().strip("'\"")
            for ln in yarnrc.splitlines()
            if ln.startswith("yarnPath:")
        ),
        None,
    )
    if snap.blob(sha, "pnpm-lock.yaml"):
        lock, tool = "pnpm-lock.yaml", "pnpm"
        install = "pnpm install --frozen-lockfile"
    elif snap.blob(sha, "yarn.lock"):
        lock, tool = "yarn.lock", "yarn"
        install = "yarn install --immutable" if yarnrc else "yarn install --frozen-lockfile"
    elif snap.blob(sha, "package-lock.json"):
        lock, tool, install = "package-lock.json", "npm", "npm ci"
    else:
        lock, tool, install = None, "npm", "npm install"
    version = None
    if pm_field and pm_field.split("@")[0] == tool:
        version = pm_field.split("@", 1)[1].split("+")[0]
    return {
        "lockfile": lock,
        "tool": tool,
        "package_manager_field": pm_field,
        "tool_version": version,
        "yarn_path": yarn_path,
        "install": install,
        "engines": pkg.get("engines"),
    }


def js_shims(plan: dict, work: Path, shim_dir: Path) -> str:
    """Put a `yarn`/`pnpm` on PATH when this machine has none: the committed yarnPath, else
    `npx <tool>@<ver>`."""
    tool = plan["tool"]
    if tool == "npm" or shutil.which(tool):
        return f"{tool} found on PATH" if tool != "npm" else "npm"
    shim_dir.mkdir(parents=True, exist_ok=True)
    if tool == "yarn" and plan["yarn_path"]:
        target = f'exec node "{work / plan["yarn_path"]}" "$@"'
        how = f"yarn absent; shim runs the committed yarnPath {plan['yarn_path']}"
    else:
        ver = plan["tool_version"] or ("1.22.22" if tool == "yarn" else "latest")
        target = f'exec npx --yes {tool}@{ver} "$@"'
        how = f"{tool} absent; shim runs `npx --yes {tool}@{ver}`"
    shim = shim_dir / tool
    shim.write_text(f"#!/bin/bash\n{target}\n")
    shim.chmod(0o755)
    return how


def js_env(tmp: Path, shim_dir: Path) -> dict:
    env = dict(os.environ)
    env.update(
        PATH=f"{shim_dir}:{env.get('PATH', '')}",
        npm_config_cache=str(tmp / "npm-cache"),
        npm_config_update_notifier="false",
        npm_config_fund="false",
        npm_config_audit="false",
        YARN_GLOBAL_FOLDER=str(tmp / "yarn-global"),
        YARN_CACHE_FOLDER=str(tmp / "yarn-cache"),
        YARN_ENABLE_TELEMETRY="0",
        PNPM_HOME=str(tmp / "pnpm-home"),
        COREPACK_HOME=str(tmp / "corepack"),
        COREPACK_ENABLE_DOWNLOAD_PROMPT="0",
        CI="true",
        HOME=str(tmp / "home"),
    )
    (tmp / "home").mkdir(exist_ok=True)
    gitconfig = tmp / "home" / ".gitconfig"
    gitconfig.write_text("[safe]\n\tdirectory = *\n[user]\n\tname = probe\n\temail = probe@localhost\n")
    return env


def ignore_scripts_flag(tool: str) -> str:
    return "--ignore-scripts" if tool != "yarn" else "--mode=skip-build"


def js_measure(snap: Snapshot, row, tmp: Path) -> dict:
    """Install and run one row's tests in a temporary checkout; the checkout is deleted by the caller."""
    work, shim_dir = tmp / "work", tmp / "shims"
    snap.checkout(row.base_commit, work)
    plan = js_plan(snap, row.base_commit)
    out: dict = {"plan": plan, "tool_route": js_shims(plan, work, shim_dir)}
    env = js_env(tmp, shim_dir)
    if plan["tool"] == "pnpm":
        env["npm_config_store_dir"] = str(tmp / "pnpm-store")
    print(f"  install: {plan['install']} ({out['tool_route']})", file=sys.stderr)
    inst = run_logged(plan["install"], work, env, INSTALL_TIMEOUT)
    out["install"] = {k: inst[k] for k in ("rc", "timed_out", "seconds")} | {"tail": tail(inst["output"])}
    out["install"]["command"] = plan["install"]
    if inst["rc"] != 0 and not inst["timed_out"]:
        blocked = [ln.strip()[:300] for ln in inst["output"].splitlines() if BLOCKED_HOST_RE.search(ln)]
        out["install"]["blocked_host_lines"] = blocked[:5]
        if blocked:
            cmd = f"{plan['install']} {ignore_scripts_flag(plan['tool'])}"
            print(f"  install failed on a blocked host; retry: {cmd}", file=sys.stderr)
            shutil.rmtree(work / "node_modules", ignore_errors=True)
            again = run_logged(cmd, work, env, INSTALL_TIMEOUT)
            out["install_retry"] = {k: again[k] for k in ("rc", "timed_out", "seconds")}
            out["install_retry"].update(command=cmd, tail=tail(again["output"]))
            inst = again
    out["installed"] = inst["rc"] == 0
    # npm 11 here does not run dependencies' install scripts unless approved; it names what it skipped.
    skipped = re.findall(r"npm warn install-scripts\s+(\S+@\S+) \(", inst["output"])
    out["install_scripts_not_run"] = skipped
    nm = work / "node_modules"
    out["node_modules_entries"] = len(list(nm.iterdir())) if nm.is_dir() else 0
    if not out["installed"]:
        out["install"]["first_error"] = first_error(inst["output"]) or first_line(inst["output"][-2000:])
        return out
    out["pre_test_steps"] = pre_test_steps(row.eval_script)
    out["test_command"] = test_command(row.eval_script)
    print(
        f"  eval_script (pre-test: {out['pre_test_steps']}; test: {out['test_command'][:120]})",
        file=sys.stderr,
    )
    script = tmp / "eval.sh"
    script.write_text(local_eval_script(row.eval_script, work))
    # CI=true (set for the install) makes vitest/picocolors print colour codes into a piped log, which the
    # log parsers do not read; the official images run the tests without it.
    test_env = {k: v for k, v in env.items() if k != "CI"}
    res = run_logged(f"bash {script}", work, test_env, TEST_TIMEOUT)
    log = res["output"]
    tests = test_output(log)
    try:
        # Some parsers read the instance (immutable-js keys on its PR number): pass the fields they use.
        spec = SimpleNamespace(instance_id=row.instance_id, repo=row.repo)
        parsed = parser_registry()[row.log_parser](tests, spec) if tests else {}
    except Exception as exc:  # noqa: BLE001 - a parser failure is a finding, not a crash
        parsed, out["parser_error"] = {}, repr(exc)[:300]
    f2p = list(row.FAIL_TO_PASS)
    out["test"] = {
        "rc": res["rc"],
        "timed_out": res["timed_out"],
        "seconds": res["seconds"],
        "reached_test_command": ">>>>> Start Test Output" in log,
        "per_test_results": len(parsed),
        "statuses": dict(Counter(parsed.values())),
        "fail_to_pass_seen": sum(1 for t in f2p if t in parsed),
        "fail_to_pass": len(f2p),
        "first_error": first_error(tests if tests else log),
        "tail": tail(tests if tests else log, 20),
    }
    return out


def js_summary(m: dict) -> str:
    if not m.get("installed"):
        inst = m.get("install_retry") or m.get("install", {})
        why = "timed out" if inst.get("timed_out") else f"exit {inst.get('rc')}"
        return (
            f"`{inst.get('command')}` fails here ({why}, {inst.get('seconds')}s): "
            f"{m.get('install', {}).get('first_error') or (inst.get('tail') or [''])[-1]}"
        )
    t = m["test"]
    how = f"`{(m.get('install_retry') or m['install'])['command']}` installs ({m['install']['seconds']}s"
    if m.get("install_retry"):
        how += f"; plain install failed on a blocked host: {m['install']['blocked_host_lines'][0][:160]}"
    how += f"; {m['tool_route']}"
    if m.get("install_scripts_not_run"):
        how += f"; npm left {len(m['install_scripts_not_run'])} install scripts unrun, e.g. "
        how += ", ".join(m["install_scripts_not_run"][:3])
    how += ")"
    if t["per_test_results"]:
        return (
            f"{how}; the test command runs: {t['per_test_results']} per-test results "
            f"({', '.join(f'{k} {v}' for k, v in t['statuses'].items())}; FAIL_TO_PASS seen "
            f"{t['fail_to_pass_seen']}/{t['fail_to_pass']}) in {t['seconds']}s"
        )
    stop = "timed out" if t["timed_out"] else f"exit {t['rc']}"
    where = "the test command" if t["reached_test_command"] else "the pre-test build steps"
    return f"{how}; {where} gives no per-test results ({stop}): {t['first_error'] or (t['tail'] or [''])[-1]}"


# ---------------------------------------------------------------- Go


def go_mod_facts(text: str) -> dict:
    go = re.search(r"^go\s+(\S+)", text, re.MULTILINE)
    tc = re.search(r"^toolchain\s+(\S+)", text, re.MULTILINE)
    reqs, block = [], False
    for ln in text.splitlines():
        s = ln.split("//")[0].strip() if "// indirect" not in ln else ln.strip()
        if s.startswith("require ("):
            block = True
        elif block and s == ")":
            block = False
        elif block and s:
            reqs.append(s)
        elif s.startswith("require ") and "(" not in s:
            reqs.append(s[len("require ") :])
    mods = [r.split()[0] + "@" + r.split()[1] for r in reqs if len(r.split()) >= 2]
    return {
        "go_directive": go.group(1) if go else None,
        "toolchain_directive": tc.group(1) if tc else None,
        "require_count": len(mods),
        "indirect": sum(1 for r in reqs if "// indirect" in r),
        "requires": mods,
        "replace_count": len(re.findall(r"^\s*replace\s|=>", text, re.MULTILINE)),
    }


def vtuple(v: str | None) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v or "")[:3])


def go_cached(mods: list[str], cache: Path) -> list[str]:
    def esc(path: str) -> str:
        return re.sub(r"[A-Z]", lambda m: "!" + m.group(0).lower(), path)

    hit = []
    for m in mods:
        path, ver = m.split("@", 1)
        if (cache / esc(path) / "@v" / f"{esc(ver)}.zip").is_file():
            hit.append(m)
    return hit


def go_probe(snap: Snapshot, row, tmp: Path) -> dict:
    """`go list ./...` alone exits 0 here without loading dependencies, so the probe runs the row's own test
    command with the proxy off and a private, empty module cache (the shared one is empty too: see
    toolchain.go_mod_cache), after a `go list` that records whether go.mod parses."""
    work, sha = tmp / "work", row.base_commit
    left_out = snap.checkout(sha, work)
    env = dict(os.environ, GOFLAGS="-mod=mod", GOPROXY="off", GOTOOLCHAIN="local", GOPATH=str(tmp / "gopath"))
    env.update(GOMODCACHE=str(tmp / "gopath" / "pkg" / "mod"), GOCACHE=str(tmp / "gocache"))
    cmd = f"go list ./... >/dev/null && ( {test_command(row.eval_script)} )"
    res = run_logged(cmd, work, env, GO_PROBE_TIMEOUT)
    lines = [ln.strip().replace(f"{work}/", "") for ln in res["output"].splitlines() if ln.strip()]
    missing = next(
        (ln for ln in lines if "GOPROXY=off" in ln or "missing go.sum" in ln or "cannot find module" in ln),
        None,
    )
    if missing is None and lines and lines[0].endswith(":"):
        missing = " ".join(lines[:3])
    m = re.match(r"^([\w./-]+\.go):(\d+):\d+: module lookup disabled", missing or "")
    if m and (work / m.group(1)).is_file():
        # go 1.19 names the importing line, not the import: read it, and name the module that provides it.
        src = (work / m.group(1)).read_text(errors="replace").splitlines()
        imp = re.search(r'"([^"]+)"', src[int(m.group(2)) - 1] if int(m.group(2)) <= len(src) else "")
        mods = go_mod_facts((work / "go.mod").read_text())["requires"]
        if imp:
            owner = max(
                (
                    x
                    for x in mods
                    if imp.group(1) == x.split("@")[0] or imp.group(1).startswith(x.split("@")[0] + "/")
                ),
                key=len,
                default=None,
            )
            missing += f" (import {imp.group(1)}, module {owner or '?'})"
    return {
        "commit": sha,
        "blobs_missing_from_snapshot": left_out,
        "command": f"GOFLAGS=-mod=mod GOPROXY=off go list ./... && {test_command(row.eval_script)}",
        "rc": res["rc"],
        "timed_out": res["timed_out"],
        "seconds": res["seconds"],
        "first_error": missing or (lines[0][:400] if lines else None),
        "tail": [ln.replace(f"{work}/", "") for ln in tail(res["output"], 8)],
    }


def go_row(snap: Snapshot, row, go_version: str | None, cache: Path | None) -> dict:
    text = snap.read(row.base_commit, "go.mod")
    if text is None:
        return {"blockers": ["no go.mod at the base commit"]}
    f = go_mod_facts(text)
    vendored = bool(snap.blob(row.base_commit, "vendor/modules.txt"))
    cached = go_cached(f["requires"], cache) if cache and cache.is_dir() else []
    here = vtuple(go_version)
    out = {
        **{k: v for k, v in f.items() if k != "requires"},
        "go_here": go_version,
        "go_directive_newer_than_here": bool(f["go_directive"]) and vtuple(f["go_directive"]) > here,
        "vendored": vendored,
        "go_sum": bool(snap.blob(row.base_commit, "go.sum")),
        "modules_cached_here": len(cached),
        "test_command": test_command(row.eval_script),
    }
    blockers = []
    if out["go_directive_newer_than_here"]:
        blockers.append(f"go.mod says go {f['go_directive']}, this machine has {go_version}")
    if f["toolchain_directive"]:
        blockers.append(f"go.mod pins toolchain {f['toolchain_directive']} (not downloadable here)")
    if not vendored:
        blockers.append(
            f"{f['require_count'] - len(cached)} of {f['require_count']} required modules neither vendored "
            "nor cached; they come from proxy.golang.org (unreachable)"
        )
    out["blockers"] = blockers
    return out


# ---------------------------------------------------------------- PHP and Ruby


def debian_names(prefix: str) -> set[str]:
    return set(run(["apt-cache", "pkgnames", prefix], timeout=120).stdout.split())


def apt_versions(names: list[str]) -> dict[str, str]:
    if not names:
        return {}
    res = run(["apt-cache", "show", "--no-all-versions", *names], timeout=300)
    out, cur = {}, None
    for ln in res.stdout.splitlines():
        if ln.startswith("Package: "):
            cur = ln.split(": ", 1)[1]
        elif ln.startswith("Version: ") and cur:
            out[cur] = ln.split(": ", 1)[1]
    return out


def php_row(snap: Snapshot, sha: str, deb: set[str]) -> dict:
    lock = snap.read(sha, "composer.lock")
    cj = json.loads(snap.read(sha, "composer.json") or "{}")
    platform = re.compile(r"^(php|ext-|lib-|composer-)")
    if lock:
        data = json.loads(lock)
        pkgs = [(p["name"], p["version"]) for p in data.get("packages", []) + data.get("packages-dev", [])]
        source = "composer.lock"
    else:
        reqs = {**cj.get("require", {}), **cj.get("require-dev", {})}
        pkgs = [(n, v) for n, v in reqs.items() if not platform.match(n)]
        source = (
            "composer.json require + require-dev (no composer.lock committed: `composer install` resolves)"
        )
    matched = {}
    for name, _ in pkgs:
        vendor, _, short = name.partition("/")
        for cand in (f"php-{short}", f"php-{vendor}-{short}", short):
            if cand.lower() in deb:
                matched[name] = cand.lower()
                break
    php_req = cj.get("require", {}).get("php")
    return {
        "dependency_source": source,
        "packages": len(pkgs),
        "php_requirement": php_req,
        "debian_by_name": len(matched),
        "debian_examples": dict(list(matched.items())[:8]),
        "blockers": [
            "php and composer absent here",
            (
                f"{len(pkgs)} packages ({source.split(' ')[0]}) come from packagist/GitHub dist URLs "
                f"(unreachable); {len(matched)} have a Debian package by name (version not matched)"
            ),
        ],
    }


GEM_RE = re.compile(r"^\s*gem\s+['\"]([^'\"]+)['\"]", re.MULTILINE)
DEP_RE = re.compile(r"add_(?:runtime_|development_)?dependency\s*\(?\s*['\"]([^'\"]+)['\"]")


def gemfile_lock(text: str) -> dict[str, str]:
    """Name -> version of every gem in a Gemfile.lock's GEM/specs sections (4-space indent)."""
    out = {}
    for m in re.finditer(r"^    ([A-Za-z0-9_.\-]+) \(([^)]+)\)$", text, re.MULTILINE):
        out[m.group(1)] = m.group(2).split("-")[0]
    return out


def ruby_row(snap: Snapshot, sha: str, deb: set[str], sample: int = 20) -> dict:
    lock = snap.read(sha, "Gemfile.lock")
    if lock:
        gems = gemfile_lock(lock)
        source = "Gemfile.lock"
        bundled = re.search(r"BUNDLED WITH\n\s+(\S+)", lock)
        ruby_v = re.search(r"RUBY VERSION\n\s+ruby (\S+)", lock)
    else:
        names: list[str] = GEM_RE.findall(snap.read(sha, "Gemfile") or "")
        for path in snap.git("ls-tree", "--name-only", sha).stdout.split():
            if path.endswith(".gemspec"):
                names += DEP_RE.findall(snap.read(sha, path) or "")
        gems = dict.fromkeys(dict.fromkeys(names), None)
        source = "Gemfile + gemspec direct dependencies (no Gemfile.lock committed: bundler resolves)"
        bundled = ruby_v = None
    first = list(gems)[:sample]
    deb_names = {g: "ruby-" + g.lower().replace("_", "-") for g in first}
    have = [g for g in first if deb_names[g] in deb]
    versions = apt_versions([deb_names[g] for g in have])
    same = [
        g
        for g in have
        if gems[g]
        and re.sub(r"^\d+:", "", versions.get(deb_names[g], "")).split("-")[0].split("+")[0] == gems[g]
    ]
    all_have = sum(1 for g in gems if "ruby-" + g.lower().replace("_", "-") in deb)
    return {
        "dependency_source": source,
        "gems": len(gems),
        "bundled_with": bundled.group(1) if bundled else None,
        "ruby_version_locked": ruby_v.group(1) if ruby_v else None,
        "debian_sample": len(first),
        "debian_sample_packaged": len(have),
        "debian_sample_same_version": len(same) if lock else None,
        "debian_packaged_all_by_name": all_have,
        "blockers": [
            "ruby and bundler absent here",
            f"{len(gems)} gems ({source.split(' ')[0]}) come from rubygems.org (unreachable); of the first "
            f"{len(first)}, {len(have)} have a Debian ruby-* package"
            + (f", {len(same)} at the locked version" if lock else ""),
        ],
    }


# ---------------------------------------------------------------- per repository


def per_repo_summary(lang: str, rows: list[dict], measured: dict | None) -> dict:
    n = len(rows)
    base = {"language": LANG_NAME[lang], "rows": n}
    if rows[0].get("source") == "none":
        return base | {"blocker": rows[0]["blockers"][0], "kind": "no source"}
    if lang == "js":
        m = measured or {}
        same = sum(1 for r in rows if r.get("lockfile_same_as_representative"))
        cover = f"lockfile identical for {same} of {n} rows"
        if "error" in m:
            return base | {"blocker": f"measurement failed: {m['error']}", "kind": "not measured"}
        text = f"{js_summary(m)} [{cover}; representative {m.get('instance_id')}]"
        runs = m.get("installed") and m["test"]["per_test_results"] > 0
        return base | (
            {"runs": text, "kind": "runs"} if runs else {"blocker": text, "kind": "test or install"}
        )
    if lang == "go":
        go_dirs = Counter(r.get("go_directive") for r in rows)
        reqs = [r.get("require_count", 0) for r in rows]
        newer = sum(1 for r in rows if r.get("go_directive_newer_than_here"))
        tcs = Counter(r["toolchain_directive"] for r in rows if r.get("toolchain_directive"))
        vend = sum(1 for r in rows if r.get("vendored"))
        dirs = ", ".join(f"{k} x{v}" for k, v in sorted(go_dirs.items()))
        parts = [f"go directive {dirs} vs {rows[0].get('go_here')} here ({newer} of {n} rows newer)"]
        if tcs:
            parts.append(f"toolchain pinned: {', '.join(f'{k} x{v}' for k, v in tcs.items())}")
        parts.append(
            f"{vend} of {n} rows vendored; {min(reqs)}-{max(reqs)} required modules per row, "
            f"{max(r.get('modules_cached_here', 0) for r in rows)} in the module cache here, the rest need "
            "proxy.golang.org (unreachable)"
        )
        for p in (measured or {}).get("probes", []):
            if p.get("first_error"):
                parts.append(f"offline probe on {p['instance_id']} stops at: {p['first_error'][:320]}")
        return base | {"blocker": "; ".join(parts), "kind": "toolchain + module proxy"}
    r0 = measured or rows[0]
    if lang == "php":
        return base | {
            "blocker": (
                f"php/composer absent; {r0['packages']} packages ({r0['dependency_source'].split(' ')[0]}, "
                f"representative row) from packagist (unreachable), {r0['debian_by_name']} with a Debian "
                f"php-* package by name; php {r0['php_requirement']} required"
            ),
            "kind": "interpreter + registry",
        }
    return base | {
        "blocker": (
            f"ruby/bundler absent; {r0['gems']} gems ({r0['dependency_source'].split(' ')[0]}, "
            f"representative row) from rubygems.org (unreachable); Debian packages "
            f"{r0['debian_sample_packaged']} of the first {r0['debian_sample']} as ruby-*"
            + (
                f" ({r0['debian_sample_same_version']} at the locked version)"
                if r0["debian_sample_same_version"] is not None
                else ""
            )
            + f", {r0['debian_packaged_all_by_name']} of all {r0['gems']} by name"
        ),
        "kind": "interpreter + registry",
    }


def measure_repo(lang: str, repo: str, df: pd.DataFrame, snap: Snapshot | None, ctx: dict) -> tuple:
    rows: list[dict] = []
    sub = df[df["repo"] == repo].sort_values("instance_id")
    for r in sub.itertuples():
        row = {
            "instance_id": r.instance_id,
            "repo": repo,
            "language": LANG_NAME[lang],
            "base_commit": r.base_commit,
            "log_parser": r.log_parser,
        }
        if snap is None:
            why = FETCH_REFUSED.get(repo, "no snapshot under the mirror root")
            row.update(source="none", blockers=[f"no source here for {r.base_commit[:12]}: {why}"])
        elif not snap.has_commit(r.base_commit):
            row.update(source="no commit", blockers=[f"snapshot lacks commit {r.base_commit}"])
        else:
            row.update(source="ok", commit_date=snap.date(r.base_commit))
        rows.append(row)
    ok = [(r, x) for r, x in zip(sub.itertuples(), rows, strict=True) if x["source"] == "ok"]
    if not ok:
        return rows, None
    rep_r, rep = max(ok, key=lambda p: p[1]["commit_date"])
    for _, x in ok:
        x["representative"] = x is rep
    measured: dict | None = None
    if lang == "js":
        plan = js_plan(snap, rep_r.base_commit)
        rep_blob = snap.blob(rep_r.base_commit, plan["lockfile"]) if plan["lockfile"] else None
        for r, x in ok:
            blob = snap.blob(r.base_commit, plan["lockfile"]) if plan["lockfile"] else None
            x["lockfile"] = plan["lockfile"]
            x["lockfile_same_as_representative"] = blob is not None and blob == rep_blob
            x["package_manager_field"] = js_plan(snap, r.base_commit)["package_manager_field"]
        tmp = Path(tempfile.mkdtemp(prefix="mlblock-js-"))
        try:
            measured = {"instance_id": rep_r.instance_id} | js_measure(snap, rep_r, tmp)
        except (OSError, ValueError) as exc:
            measured = {"instance_id": rep_r.instance_id, "error": str(exc)[:400]}
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        rep["measurement"] = measured
        runs = bool(measured.get("installed") and measured["test"]["per_test_results"])
        text = js_summary(measured) if "error" not in measured else f"measurement failed: {measured['error']}"
        for _, x in ok:
            covered = x is rep or x["lockfile_same_as_representative"]
            x["blockers"] = (
                [] if runs and covered else [text if covered else "lockfile differs; not measured: " + text]
            )
    elif lang == "go":
        for r, x in ok:
            x.update(go_row(snap, r, ctx["go_version"], ctx["go_cache"]))
        # The newest row whose go.mod this go can parse (two-part go directive <= here, no toolchain line):
        # probing it says which module is missing first where the newest row stops at go.mod parsing.
        here = vtuple(ctx["go_version"])[:2]
        parseable = [
            (r, x)
            for r, x in ok
            if re.fullmatch(r"\d+\.\d+", x.get("go_directive") or "")
            and vtuple(x["go_directive"]) <= here
            and not x.get("toolchain_directive")
        ]
        targets = [(rep_r, rep)]
        if parseable:
            targets.append(max(parseable, key=lambda p: p[1]["commit_date"]))
        for r, x in targets if shutil.which("go") else []:
            if "offline_probe" in x:
                continue
            tmp = Path(tempfile.mkdtemp(prefix="mlblock-go-"))
            try:
                x["offline_probe"] = go_probe(snap, r, tmp)
            except (OSError, subprocess.CalledProcessError) as exc:
                x["offline_probe"] = {"command": "go list ./...", "first_error": f"checkout failed: {exc}"}
            finally:
                subprocess.run(["chmod", "-R", "u+w", str(tmp)], check=False)
                shutil.rmtree(tmp, ignore_errors=True)
            x["offline_probe"]["instance_id"] = r.instance_id
        measured = {"probes": [x["offline_probe"] for _, x in targets if "offline_probe" in x]}
    elif lang == "php":
        measured = php_row(snap, rep_r.base_commit, ctx["deb_php"])
        rep.update(measured)
        for r, x in ok:
            if x is not rep:
                x["dependency_source"] = (
                    "composer.lock" if snap.blob(r.base_commit, "composer.lock") else "none"
                )
                x["blockers"] = ["php and composer absent here"]
    else:
        measured = ruby_row(snap, rep_r.base_commit, ctx["deb_ruby"])
        rep.update(measured)
        rep_lock = snap.blob(rep_r.base_commit, "Gemfile.lock")
        for r, x in ok:
            if x is not rep:
                x["gemfile_lock_same_as_representative"] = (
                    rep_lock is not None and snap.blob(r.base_commit, "Gemfile.lock") == rep_lock
                )
                x["blockers"] = ["ruby and bundler absent here"]
    return rows, measured


def main(argv: list[str] | None = None) -> int:
    note_start()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="results/multilingual_git/blockers_other.json")
    ap.add_argument("--mirror-root", default="/work/.mirror")
    ap.add_argument("--dataset", default=DATASET, help="SWE-bench Multilingual's test parquet")
    ap.add_argument("--only-lang", action="append", choices=sorted(LANGS), help="repeatable; default all")
    ap.add_argument("--only-repo", action="append", help="repeatable; limit to these repositories")
    args = ap.parse_args(argv)
    langs = args.only_lang or list(LANGS)
    t_start = time.monotonic()
    df = pd.read_parquet(args.dataset)
    scratch = Path(tempfile.mkdtemp(prefix="mlblock-facts-"))
    try:
        tools = toolchain_facts(scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"tools: {json.dumps(tools['tools'])}", file=sys.stderr)
    print(f"reachability: {json.dumps(tools['reachability'])}", file=sys.stderr)
    go_cache = Path(tools["go_mod_cache"]["dir"]) if tools["go_mod_cache"]["dir"] else None
    ctx = {
        "go_version": (tools["tools"].get("go") or "").replace("go version ", "").split(" ")[0] or None,
        "go_cache": go_cache,
        "deb_php": debian_names("php") if "php" in langs else set(),
        "deb_ruby": debian_names("ruby-") if "ruby" in langs else set(),
    }
    prev = {}
    if args.only_lang and Path(args.out).is_file():
        prev = json.loads(Path(args.out).read_text())
    rows: list[dict] = []
    per_repo: dict = {}
    timings: dict = {}
    for lang, repos in LANGS.items():
        for repo in repos:
            if lang not in langs or (args.only_repo and repo not in args.only_repo):
                if repo in prev.get("per_repo", {}):
                    rows += [r for r in prev["rows"] if r["repo"] == repo]
                    per_repo[repo] = prev["per_repo"][repo] | {"carried_over": True}
                continue
            t0 = time.monotonic()
            print(f"== {repo} ({LANG_NAME[lang]})", file=sys.stderr)
            snap = find_snapshot(Path(args.mirror_root), repo)
            rr, measured = measure_repo(lang, repo, df, snap, ctx)
            rows += rr
            per_repo[repo] = per_repo_summary(lang, rr, measured)
            timings[repo] = round(time.monotonic() - t0, 1)
            per_repo[repo]["seconds"] = timings[repo]
            print(f"{repo}: {per_repo[repo].get('runs') or per_repo[repo].get('blocker')}", file=sys.stderr)
    elapsed = round(time.monotonic() - t_start, 1)
    write_result(
        Path(args.out),
        {"rows": rows, "per_repo": per_repo, "toolchain": tools, "languages_measured_this_run": langs},
        build_manifest(
            command=sys.argv,
            datasets=[{"source": args.dataset, "rows": len(rows)}],
            timings={"total_s": elapsed, "per_repo_s": timings},
            extra={"artifact": "multilingual-blockers-other", "mirror_root": args.mirror_root},
        ),
    )
    print(f"wrote {args.out} in {elapsed}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
