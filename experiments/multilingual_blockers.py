"""What stands between this offline machine and building each SWE-bench Multilingual Rust and Java row's tests
at its exact base commit, measured per row: the crates, artifacts, build tools and toolchains missing, by name
and version.

Why: a table that says a language "cannot run offline" should say what is missing, per repository, rather
than assume it. This machine reaches PyPI, npm and Debian's apt archive, but not crates.io, Maven Central, the
Gradle distribution server or GitHub, so the question per row is which of its locked crates Debian (bookworm)
packages as `librust-<crate>-dev` (and at which version), which Maven/Gradle/Ivy artifacts are already on disk
(/usr/share/maven-repo, ~/.m2/repository), and whether the pinned toolchain or build tool is here.

Sources are the repository snapshots brought to `--mirror-root` (`<owner>+<name>/repo`) by the session's fetch
tool before this runs; a repository without a snapshot there is reported as "no source here" (FETCH_REFUSED
records why, as the fetch tool answered). Nothing is installed and nothing is written outside a temporary
directory and `--out`; apt is only read (`apt-cache pkgnames/show`). Maven rows additionally get one offline
build probe (`mvn -o`, the row's first test command, in a temporary checkout and a hard-linked copy of ~/.m2)
whose first error is recorded, unless `--no-build-probe`.

Approximations, stated in the output: Rust rows without a Cargo.lock are judged from the workspace manifests'
direct requirements only; Maven rows from the direct dependencies and plugins of the tested module and its
in-repository parents (no transitive closure, no profiles); Gradle rows from a regex over build scripts.

  PYTHONPATH=. .venv/bin/python experiments/multilingual_blockers.py \\
      --out results/multilingual_git/blockers.json --mirror-root /work/.mirror
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pandas as pd
import tomllib

from execcritic.results.manifest import build_manifest, note_start, write_result

DATASET = "/work/shared/data/swebench/multilingual_test.parquet"
RUST = [
    "astral-sh/ruff",
    "burntsushi/ripgrep",
    "nushell/nushell",
    "sharkdp/bat",
    "tokio-rs/axum",
    "tokio-rs/tokio",
    "uutils/coreutils",
]
JAVA = [
    "apache/druid",
    "apache/lucene",
    "google/gson",
    "javaparser/javaparser",
    "projectlombok/lombok",
    "reactivex/rxjava",
]
# What the fetch tool answered for the repositories it would not bring here.
FETCH_REFUSED = {
    "apache/druid": "snapshot refused: 707092480 bytes, over the 524288000-byte limit",
    "apache/lucene": "snapshot refused: 541511680 bytes, over the 524288000-byte limit",
}
CRATES_IO = "registry+https://github.com/rust-lang/crates.io-index"
MAVEN_REPOS = [Path("/usr/share/maven-repo"), Path.home() / ".m2" / "repository"]
# Plugins `mvn test` runs on a jar module when the pom names no version (Maven 3.8.x default lifecycle
# bindings).
MAVEN_DEFAULT_PLUGINS = {
    "maven-resources-plugin": "2.6",
    "maven-compiler-plugin": "3.1",
    "maven-surefire-plugin": "2.12.4",
}
GRADLE_CONFS = (
    "implementation",
    "api",
    "compileOnly",
    "runtimeOnly",
    "testImplementation",
    "testCompileOnly",
    "testRuntimeOnly",
    "compile",
    "testCompile",
    "annotationProcessor",
    "jmh",
    "signature",
    "classpath",
)


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)


def first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


# ---------------------------------------------------------------- git snapshots


class Snapshot:
    """One repository's snapshot (read-only git directory) under the mirror root."""

    def __init__(self, git_dir: Path):
        self.git_dir = str(git_dir)

    def git(self, *args: str) -> subprocess.CompletedProcess:
        return run(["git", f"--git-dir={self.git_dir}", *args])

    def has_commit(self, sha: str) -> bool:
        return self.git("cat-file", "-e", f"{sha}^{{commit}}").returncode == 0

    def read(self, sha: str, path: str) -> str | None:
        """The file's text, or None when the commit has no such path; raises OSError when the path exists but
        its blob cannot be read from the snapshot (a large blob left out)."""
        if self.git("cat-file", "-e", f"{sha}:{path}").returncode != 0:
            if self.git("ls-tree", sha, "--", path).stdout.strip():
                raise OSError(f"{path} at {sha[:12]}: listed in the tree but its blob is not in the snapshot")
            return None
        res = self.git("show", f"{sha}:{path}")
        if res.returncode != 0:
            raise OSError(f"{path} at {sha[:12]}: {first_line(res.stderr)}")
        return res.stdout

    def ls(self, sha: str, path: str = "", dirs_only: bool = False) -> list[str]:
        args = ["ls-tree", "--name-only"] + (["-d"] if dirs_only else []) + [sha]
        if path:
            args += ["--", path.rstrip("/") + "/"]
        return self.git(*args).stdout.split()

    def ls_recursive(self, sha: str) -> list[str]:
        return self.git("ls-tree", "-r", "--name-only", sha).stdout.splitlines()


def export_tree(snap: Snapshot, sha: str, dest: Path) -> list[str]:
    """Write the commit's files under `dest` (a checkout without .git); returns the paths whose blobs the
    snapshot lacks (left out), where `git archive` would stop at the first."""
    listing = subprocess.run(
        ["git", f"--git-dir={snap.git_dir}", "ls-tree", "-r", "-z", sha], capture_output=True, check=True
    ).stdout.split(b"\0")
    entries = []
    for ent in filter(None, listing):
        meta, path = ent.split(b"\t", 1)
        mode, kind, obj = meta.split()
        if kind == b"blob":
            entries.append((mode.decode(), obj.decode(), path.decode(errors="surrogateescape")))
    batch = subprocess.run(
        ["git", f"--git-dir={snap.git_dir}", "cat-file", "--batch"],
        input="".join(f"{o}\n" for _, o, _ in entries).encode(),
        capture_output=True,
        check=False,
    ).stdout
    missing, pos = [], 0
    for mode, obj, path in entries:
        nl = batch.index(b"\n", pos)
        header = batch[pos:nl].split()
        pos = nl + 1
        if len(header) < 3 or header[1] == b"missing":
            missing.append(path)
            continue
        size = int(header[2])
        data = batch[pos : pos + size]
        pos += size + 1
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if mode == "120000":
            target.symlink_to(data.decode(errors="surrogateescape"))
        else:
            target.write_bytes(data)
            if mode == "100755":
                target.chmod(0o755)
    return missing


def find_snapshot(mirror_root: Path, repo: str) -> Snapshot | None:
    want = repo.replace("/", "+").lower()
    for d in sorted(mirror_root.iterdir()) if mirror_root.is_dir() else []:
        if d.name.lower() == want and (d / "repo").is_dir():
            return Snapshot(d / "repo")
    return None


# ---------------------------------------------------------------- versions


def semver(v: str) -> tuple[int, int, int, str] | None:
    m = re.match(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?(.*)$", v.strip())
    if not m:
        return None
    return int(m[1]), int(m[2] or 0), int(m[3] or 0), m[4]


def _key(v: tuple[int, int, int, str]) -> tuple:
    # A pre-release ("-rc1") sorts before its release.
    return (v[0], v[1], v[2], 0 if v[3].startswith("-") else 1, v[3])


def req_matches(req: str, version: str) -> bool:
    """Whether `version` meets the Cargo requirement `req` (caret by default; ~, =, >=, <, *, x.* handled)."""
    v = semver(version)
    if v is None:
        return False
    for part in [p.strip() for p in req.split(",") if p.strip()]:
        m = re.match(r"^(\^|~|=|>=|<=|>|<)?\s*([\d*xX]+(?:\.[\d*xX]+)?(?:\.[\d*xX]+)?)(.*)$", part)
        if not m:
            return False
        op, nums, pre = m[1] or "^", m[2], m[3]
        fields = [f for f in nums.split(".")]
        known = [int(f) for f in fields if f.isdigit()]
        if len(known) < len(fields):  # a wildcard: 1.* == ^1 restricted to that prefix
            op, fields = "~" if known else "*", [str(k) for k in known]
        if op == "*":
            continue
        lo = tuple(known + [0] * (3 - len(known))) + (1, "")
        vk = _key(v)
        if op in ("^", "~"):
            n = len(known)
            if op == "~":
                bump = 0 if n == 1 else 1
            else:
                bump = next((i for i, k in enumerate(known) if k != 0), n - 1)
            hi_nums = known[: bump + 1]
            hi_nums[-1] += 1
            hi = tuple(hi_nums + [0] * (3 - len(hi_nums))) + (0, "")
            lo = tuple(known + [0] * (3 - len(known))) + ((0, pre) if pre else (1, ""))
            if not (lo <= vk < hi):
                return False
        elif op == "=":
            if len(known) == 3:
                if vk[:3] != lo[:3] or (pre and v[3] != pre):
                    return False
            elif vk[: len(known)] != tuple(known):
                return False
        else:
            below = {">=": vk < lo, ">": vk <= lo, "<": vk >= lo[:3] + (0, ""), "<=": vk[:3] > lo[:3]}
            if below[op]:
                return False
    return True


# ---------------------------------------------------------------- Debian's Rust crates


def debian_upstream(version: str) -> str:
    v = re.sub(r"^\d+:", "", version)
    v = v.rsplit("-", 1)[0] if "-" in v else v
    v = re.sub(r"\+(dfsg|ds|repack|really).*$", "", v)
    return v.replace("~", "-")


def debian_crates() -> dict[str, set[str]]:
    """crate name (Debian spelling: lower case, '_' as '-') -> upstream versions Debian's archive offers, from
    the local apt lists (`apt-cache pkgnames librust-` then `apt-cache show`). A versioned package such as
    librust-clap-2-dev counts for crate clap."""
    names = [
        n
        for n in run(["apt-cache", "pkgnames", "librust-"]).stdout.split()
        if "+" not in n and n.endswith("-dev")
    ]
    out: dict[str, set[str]] = {}
    for i in range(0, len(names), 400):
        text = run(["apt-cache", "show", *names[i : i + 400]]).stdout
        for stanza in text.split("\n\n"):
            pkg = re.search(r"^Package: (\S+)", stanza, re.MULTILINE)
            ver = re.search(r"^Version: (\S+)", stanza, re.MULTILINE)
            if not (pkg and ver):
                continue
            up = debian_upstream(ver[1])
            crate = pkg[1][len("librust-") : -len("-dev")]
            m = re.match(r"^(.*)-(\d+(?:\.\d+){0,2})$", crate)
            if m and (up == m[2] or up.startswith(m[2] + ".")):
                crate = m[1]
            out.setdefault(crate, set()).add(up)
    return out


# Crates only other platforms compile (cargo still resolves them, so a directory registry must hold them, or
# the manifests be patched as Debian does); a name heuristic.
NON_LINUX = re.compile(
    r"^(windows|winapi|android|wasm|web-sys|js-sys|wasi|redox|hermit|ntapi|fuchsia|core-foundation|"
    r"security-framework|objc|cocoa|mach|kernel32|winreg|schannel|ole32|widestring|wincolor|"
    r"winapi-util|known-folders|windows_)"
)


def classify_crate(version: str, offered: set[str] | None) -> str:
    """exact | same_minor (same major.minor: semver-compatible for 0.x, would need the lock changed) |
    same_major (>=1.0, same major only) | other_version | not_packaged."""
    if not offered:
        return "not_packaged"
    if version in offered:
        return "exact"
    v = semver(version)
    vs = [semver(o) for o in offered]
    if v and any(o and o[:2] == v[:2] for o in vs):
        return "same_minor"
    if v and v[0] >= 1 and any(o and o[0] == v[0] for o in vs):
        return "same_major"
    return "other_version"


# ---------------------------------------------------------------- Rust rows


class RustToolchain:
    """What cargo here does with a commit's toolchain file: a probe in an empty directory holding just that
    file."""

    def __init__(self):
        self.cache: dict[tuple[str, str], dict] = {}
        self.installed = (
            run(["rustup", "toolchain", "list"]).stdout.split("\n") if shutil.which("rustup") else []
        )
        self.rustc = first_line(run(["rustc", "--version"]).stdout)

    def probe(self, name: str, text: str) -> dict:
        if (name, text) not in self.cache:
            with tempfile.TemporaryDirectory(prefix="tcprobe-") as tmp:
                Path(tmp, name).write_text(text)
                env = {k: v for k, v in os.environ.items() if k != "RUSTUP_TOOLCHAIN"}
                res = run(["cargo", "--version"], cwd=tmp, env=env, timeout=120)
            self.cache[(name, text)] = {
                "usable": res.returncode == 0,
                "cargo_says": first_line(res.stdout if res.returncode == 0 else res.stderr),
            }
        return self.cache[(name, text)]


def toolchain_pin(text: str, name: str) -> str | None:
    if name == "rust-toolchain" and "[toolchain]" not in text:
        return first_line(text) or None
    try:
        return tomllib.loads(text).get("toolchain", {}).get("channel")
    except tomllib.TOMLDecodeError:
        return None


def manifest_deps(snap: Snapshot, sha: str, root: dict) -> tuple[dict[tuple[str, str], set[str]], list[str]]:
    """(crate, requirement) -> the workspace members requiring it, over the workspace's manifests; and git
    dependencies."""
    ws = root.get("workspace", {})
    members = list(ws.get("members", []))
    if "package" in root:
        members.insert(0, ".")
    exclude = set(ws.get("exclude", []))
    paths: list[str] = []
    for pat in members:
        if any(c in pat for c in "*?["):
            parent = pat.rsplit("/", 1)[0] if "/" in pat else ""
            paths += [d for d in snap.ls(sha, parent, dirs_only=True) if fnmatch.fnmatch(d, pat)]
        else:
            paths.append(pat)
    wsdeps = ws.get("dependencies", {})
    found: dict[tuple[str, str], set[str]] = {}
    git_deps: list[str] = []
    for p in dict.fromkeys(paths):
        if p in exclude:
            continue
        try:
            text = snap.read(sha, "Cargo.toml" if p == "." else f"{p.rstrip('/')}/Cargo.toml")
        except OSError:
            text = None
        if text is None:
            continue
        try:
            man = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            continue
        tables = [man.get(k, {}) for k in ("dependencies", "dev-dependencies", "build-dependencies")]
        for tgt in man.get("target", {}).values():
            tables += [tgt.get(k, {}) for k in ("dependencies", "dev-dependencies", "build-dependencies")]
        for table in tables:
            for key, spec in table.items():
                if isinstance(spec, dict) and spec.get("workspace"):
                    base = wsdeps.get(key, {})
                    spec = base if isinstance(base, dict) else {"version": base}
                if isinstance(spec, str):
                    spec = {"version": spec}
                if "path" in spec:
                    continue
                crate = spec.get("package", key)
                if "git" in spec:
                    git_deps.append(f"{crate} ({spec['git']})")
                    continue
                req = spec.get("version", "*")
                found.setdefault((crate, req), set()).add(p)
    return found, sorted(set(git_deps))


def rust_row(snap: Snapshot, sha: str, deb: dict[str, set[str]], tc: RustToolchain) -> dict:
    out: dict = {"build_tool": "cargo"}
    blockers: list[str] = []
    # Toolchain: a pin rustup must honour, and the declared minimum.
    for name in ("rust-toolchain.toml", "rust-toolchain"):
        try:
            text = snap.read(sha, name)
        except OSError as exc:
            blockers.append(f"cannot read {name}: {exc}")
            text = None
        if text is not None:
            pin = toolchain_pin(text, name)
            probe = tc.probe(name, text)
            out["toolchain_file"] = {"file": name, "channel": pin, **probe}
            if not probe["usable"]:
                blockers.append(
                    f"toolchain {pin} pinned by {name} is not installed here (rustup: "
                    f"{probe['cargo_says']}); the toolchain server is unreachable"
                )
            break
    else:
        out["toolchain_file"] = None
    root_text = snap.read(sha, "Cargo.toml")
    root = tomllib.loads(root_text) if root_text else {}
    rv = root.get("package", {}).get("rust-version") or root.get("workspace", {}).get("package", {}).get(
        "rust-version"
    )
    out["rust_version"] = rv if isinstance(rv, str) else None
    if out["rust_version"] and semver(tc.rustc.split()[1]) < semver(out["rust_version"]):
        blockers.append(f"rust-version {out['rust_version']} is newer than {tc.rustc}")
    try:
        lock_text = snap.read(sha, "Cargo.lock")
    except OSError as exc:
        out["cargo_lock"] = False
        out["blockers"] = blockers + [f"cannot read Cargo.lock: {exc}"]
        return out
    out["cargo_lock"] = lock_text is not None
    if lock_text is not None:
        lock = tomllib.loads(lock_text)
        pkgs = lock.get("package", [])
        reg = sorted({(p["name"], p["version"]) for p in pkgs if p.get("source", "").startswith("registry+")})
        other_reg = sorted(
            {
                p["source"]
                for p in pkgs
                if p.get("source", "").startswith("registry+") and p["source"] != CRATES_IO
            }
        )
        git = sorted(
            {
                f"{p['name']} {p['version']} ({p['source'].split('#')[0]})"
                for p in pkgs
                if p.get("source", "").startswith("git+")
            }
        )
        cls = {f"{n} {v}": classify_crate(v, deb.get(n.lower().replace("_", "-"))) for n, v in reg}
        counts = Counter(cls.values())
        out["locked"] = {
            "registry_crates": len(reg),
            "exact": counts["exact"],
            "same_minor": counts["same_minor"],
            "same_major": counts["same_major"],
            "other_version": counts["other_version"],
            "not_packaged": counts["not_packaged"],
            "git_crates": len(git),
            "other_registries": other_reg,
        }
        out["missing"] = sorted(k for k, c in cls.items() if c == "not_packaged")
        out["locked"]["not_packaged_non_linux_heuristic"] = sum(
            1 for k in out["missing"] if NON_LINUX.match(k)
        )
        out["other_version"] = sorted(
            f"{k} (Debian: {', '.join(sorted(deb[k.split()[0].lower().replace('_', '-')]))})"
            for k, c in cls.items()
            if c == "other_version"
        )
        out["same_minor"] = sorted(k for k, c in cls.items() if c == "same_minor")
        out["git_crates"] = git
        not_exact = len(reg) - counts["exact"]
        blockers.append(
            f"{not_exact} of {len(reg)} locked crates.io crates have no exact version in Debian "
            f"bookworm ({counts['not_packaged']} not packaged, {counts['same_minor']} same major.minor "
            f"only, {counts['same_major'] + counts['other_version']} other versions only)"
        )
        if git:
            blockers.append(
                f"{len(git)} locked crates come from git (GitHub unreachable): {', '.join(git[:3])}"
            )
        # time < 0.3.35 fails to compile on rustc >= 1.80 (type inference change, rust-lang/rust#127343).
        old_time = [v for n, v in reg if n == "time" and semver(v)[:2] == (0, 3) and semver(v)[2] < 35]
        rustc_v = semver(tc.rustc.split()[1])
        if old_time and rustc_v and rustc_v[:2] >= (1, 80):
            out["known_incompatible"] = [
                f"time {v} does not build with rustc >= 1.80 (needs >= 0.3.35)" for v in old_time
            ]
            blockers.append(f"locked time {old_time[0]} is known not to compile with {tc.rustc} (if built)")
    else:
        found, git_deps = manifest_deps(snap, sha, root)
        cls = {}
        for (crate, req), _ in sorted(found.items()):
            offered = deb.get(crate.lower().replace("_", "-"))
            cls[f"{crate} {req}"] = (
                "not_packaged"
                if not offered
                else "satisfiable"
                if any(req_matches(req, o) for o in offered)
                else "not_satisfiable"
            )
        counts = Counter(cls.values())
        out["manifest_requirements"] = {
            "direct_requirements": len(cls),
            "satisfiable": counts["satisfiable"],
            "not_satisfiable": counts["not_satisfiable"],
            "not_packaged": counts["not_packaged"],
            "git_deps": len(git_deps),
            "approximate": "no Cargo.lock at this commit: direct requirements of the "
            "workspace manifests only, no transitive resolution",
        }
        out["missing"] = sorted(k for k, c in cls.items() if c == "not_packaged")
        out["not_satisfiable"] = sorted(
            f"{k} (Debian: {', '.join(sorted(deb[k.split()[0].lower().replace('_', '-')]))})"
            for k, c in cls.items()
            if c == "not_satisfiable"
        )
        out["git_crates"] = git_deps
        blockers.append(
            f"no Cargo.lock at this commit: resolution needs the crates.io index; of {len(cls)} direct "
            f"requirements, {counts['not_packaged']} name crates Debian does not package and "
            f"{counts['not_satisfiable']} need versions Debian lacks"
        )
    out["blockers"] = blockers
    return out


# ---------------------------------------------------------------- Java: artifacts on disk


def local_artifact(g: str, a: str, v: str, ext: str) -> dict:
    """Whether g:a:v (.jar or .pom) is in a local Maven repository here, and which other versions are."""
    hits, others = [], set()
    for repo in MAVEN_REPOS:
        d = repo / g.replace(".", "/") / a
        if (d / v / f"{a}-{v}.{ext}").is_file():
            hits.append(str(repo))
        if d.is_dir():
            others |= {x.name for x in d.iterdir() if x.is_dir() and x.name != v}
    return {"present_in": hits, "other_versions_here": sorted(others)}


def debian_java_packages(artifacts: list[str]) -> dict[str, str]:
    """artifactId -> 'package version' for artifacts a Debian package plausibly named lib<artifactId>-java
    offers (a name guess, no apt-file here: approximate)."""
    guesses = {}
    for a in artifacts:
        base = re.sub(r"[-_.]?(java|jdk\d*|jre)$", "", a.lower())
        for name in (f"lib{a.lower()}-java", f"lib{base}-java"):
            guesses.setdefault(name, a)
    found = {}
    names = sorted(guesses)
    for i in range(0, len(names), 300):
        text = run(["apt-cache", "show", *names[i : i + 300]]).stdout
        for stanza in text.split("\n\n"):
            pkg = re.search(r"^Package: (\S+)", stanza, re.MULTILINE)
            ver = re.search(r"^Version: (\S+)", stanza, re.MULTILINE)
            if pkg and ver and pkg[1] in guesses:
                found.setdefault(guesses[pkg[1]], f"{pkg[1]} {ver[1]}")
    return found


def check_artifacts(items: list[dict]) -> dict:
    """Fills presence per g:a:v item; returns counts and the missing list."""
    for it in items:
        if it.get("reactor"):
            it["status"] = "reactor_module"
            continue
        if not it["version"] or "${" in it["version"]:
            it["status"] = "version_unresolved"
            continue
        loc = local_artifact(it["group"], it["artifact"], it["version"], it.get("ext", "jar"))
        it.update(loc)
        it["status"] = (
            "present"
            if loc["present_in"]
            else "other_version_here"
            if loc["other_versions_here"]
            else "missing"
        )
    deb = debian_java_packages(
        sorted({it["artifact"] for it in items if it["status"] in ("missing", "other_version_here")})
    )
    for it in items:
        if it["status"] in ("missing", "other_version_here") and it["artifact"] in deb:
            it["debian_package_guess"] = deb[it["artifact"]]
    counts = Counter(it["status"] for it in items)
    return {
        "artifacts": len(items),
        **{
            k: counts[k]
            for k in ("present", "other_version_here", "missing", "version_unresolved", "reactor_module")
        },
    }


def gav(it: dict) -> str:
    return f"{it['group']}:{it['artifact']}:{it['version'] or '?'}"


# ---------------------------------------------------------------- Java: Maven


def local_pom(g: str | None, a: str | None, v: str | None) -> ET.Element | None:
    for repo in MAVEN_REPOS if g and a and v else []:
        f = repo / g.replace(".", "/") / a / v / f"{a}-{v}.pom"
        if f.is_file():
            try:
                return _strip_ns(ET.fromstring(f.read_bytes()))
            except ET.ParseError:
                return None
    return None


def _strip_ns(root: ET.Element) -> ET.Element:
    for el in root.iter():
        if isinstance(el.tag, str) and "}" in el.tag:
            el.tag = el.tag.split("}", 1)[1]
    return root


def _txt(el: ET.Element | None, path: str) -> str | None:
    x = el.find(path) if el is not None else None
    return x.text.strip() if x is not None and x.text else None


def resolve_props(value: str | None, props: dict[str, str]) -> str | None:
    if value is None:
        return None
    for _ in range(6):
        new = re.sub(r"\$\{([^}]+)\}", lambda m: props.get(m[1], m[0]), value)
        if new == value:
            break
        value = new
    return value


def maven_module(snap: Snapshot, sha: str, module: str) -> dict:
    """The tested module's pom and its in-repository parents: merged properties, dependencies (direct),
    plugins, the external parent, imported BOMs, compiler level and the reactor's artifactIds."""
    chain: list[ET.Element] = []
    outside: list[ET.Element] = []
    path = f"{module.rstrip('/')}/pom.xml" if module else "pom.xml"
    external_parent = None
    while path:
        text = snap.read(sha, path)
        if text is None:
            break
        pom = _strip_ns(ET.fromstring(text.encode()))
        chain.append(pom)
        parent = pom.find("parent")
        if parent is None:
            break
        rel = _txt(parent, "relativePath")
        rel = "../pom.xml" if rel is None else rel
        rel = rel if rel.endswith(".xml") else (rel.rstrip("/") + "/pom.xml" if rel else "")
        nxt = os.path.normpath(os.path.join(os.path.dirname(path), rel)) if rel else ""
        ptext = snap.read(sha, nxt) if nxt and not nxt.startswith("..") else None
        if ptext is None or (
            _strip_ns(ET.fromstring(ptext.encode())).findtext("artifactId") or ""
        ).strip() != (_txt(parent, "artifactId") or ""):
            external_parent = {
                "group": _txt(parent, "groupId"),
                "artifact": _txt(parent, "artifactId"),
                "version": _txt(parent, "version"),
                "ext": "pom",
                "kind": "parent",
            }
            break
        path = nxt
    # An external parent already on disk contributes its plugins too, followed up its own parents.
    up = external_parent
    while up is not None and len(outside) < 10:
        local = local_pom(up["group"], up["artifact"], up["version"])
        if local is None:
            break
        outside.append(local)
        nxt_parent = local.find("parent")
        up = (
            None
            if nxt_parent is None
            else {
                "group": _txt(nxt_parent, "groupId"),
                "artifact": _txt(nxt_parent, "artifactId"),
                "version": _txt(nxt_parent, "version"),
            }
        )
    in_repo = list(chain)
    chain = list(reversed(outside)) + list(reversed(chain))  # outermost parent first, module last
    props: dict[str, str] = {}
    for pom in chain:
        ver = _txt(pom, "version") or _txt(pom, "parent/version")
        grp = _txt(pom, "groupId") or _txt(pom, "parent/groupId")
        props.update(
            {
                "project.version": ver or "",
                "project.groupId": grp or "",
                "project.parent.version": _txt(pom, "parent/version") or "",
                "pom.version": ver or "",
                "version": ver or "",
            }
        )
        for p in pom.findall("properties/*"):
            props[p.tag] = (p.text or "").strip()
    dm: dict[tuple[str, str], str] = {}
    pm: dict[tuple[str, str], str] = {}
    deps: dict[tuple[str, str], dict] = {}
    plugins: dict[tuple[str, str], dict] = {}
    imports: list[dict] = []
    for pom in chain:
        for d in pom.findall("dependencyManagement/dependencies/dependency"):
            key = (resolve_props(_txt(d, "groupId"), props), resolve_props(_txt(d, "artifactId"), props))
            dm[key] = resolve_props(_txt(d, "version"), props)
            if _txt(d, "scope") == "import":
                imports.append(
                    {"group": key[0], "artifact": key[1], "version": dm[key], "ext": "pom", "kind": "bom"}
                )
        for p in pom.findall("build/pluginManagement/plugins/plugin"):
            key = (
                resolve_props(_txt(p, "groupId"), props) or "org.apache.maven.plugins",
                resolve_props(_txt(p, "artifactId"), props),
            )
            if _txt(p, "version"):
                pm[key] = resolve_props(_txt(p, "version"), props)
        for d in pom.findall("dependencies/dependency"):
            key = (resolve_props(_txt(d, "groupId"), props), resolve_props(_txt(d, "artifactId"), props))
            deps[key] = {
                "group": key[0],
                "artifact": key[1],
                "version": resolve_props(_txt(d, "version"), props),
                "scope": _txt(d, "scope") or "compile",
                "kind": "dependency",
                "ext": "pom" if _txt(d, "type") == "pom" else "jar",
            }
        for p in pom.findall("build/plugins/plugin") + pom.findall("build/extensions/extension"):
            key = (
                resolve_props(_txt(p, "groupId"), props) or "org.apache.maven.plugins",
                resolve_props(_txt(p, "artifactId"), props),
            )
            ver = resolve_props(_txt(p, "version"), props)
            plugins[key] = {
                "group": key[0],
                "artifact": key[1],
                "version": ver or plugins.get(key, {}).get("version"),
                "kind": "extension" if p.tag == "extension" else "plugin",
                "ext": "jar",
            }
    for key, d in deps.items():
        d["version"] = d["version"] or dm.get(key)
    for a in MAVEN_DEFAULT_PLUGINS:
        plugins.setdefault(
            ("org.apache.maven.plugins", a),
            {
                "group": "org.apache.maven.plugins",
                "artifact": a,
                "version": None,
                "kind": "plugin (default lifecycle)",
                "ext": "jar",
            },
        )
    for key, p in plugins.items():
        p["version"] = p["version"] or pm.get(key) or MAVEN_DEFAULT_PLUGINS.get(key[1])
    comp = plugins.get(("org.apache.maven.plugins", "maven-compiler-plugin"), {})
    level = None
    for pom in chain:
        for p in pom.findall("build/plugins/plugin") + pom.findall("build/pluginManagement/plugins/plugin"):
            if _txt(p, "artifactId") == "maven-compiler-plugin":
                level = (
                    resolve_props(_txt(p, "configuration/release"), props)
                    or resolve_props(_txt(p, "configuration/source"), props)
                    or level
                )
    level = level or props.get("maven.compiler.release") or props.get("maven.compiler.source")
    root_pom = in_repo[-1] if in_repo else None
    reactor = set()
    for m in root_pom.findall("modules/module") if root_pom is not None else []:
        try:
            mt = snap.read(sha, f"{(m.text or '').strip()}/pom.xml")
        except OSError:
            mt = None
        if mt:
            mpom = _strip_ns(ET.fromstring(mt.encode()))
            reactor.add((mpom.findtext("artifactId") or "").strip())
            # Maven loads every reactor module's build extensions, even under `-pl` of another module.
            for e in mpom.findall("build/extensions/extension"):
                key = (resolve_props(_txt(e, "groupId"), props), resolve_props(_txt(e, "artifactId"), props))
                plugins.setdefault(
                    key,
                    {
                        "group": key[0],
                        "artifact": key[1],
                        "version": resolve_props(_txt(e, "version"), props),
                        "kind": f"extension (module {(m.text or '').strip()})",
                        "ext": "jar",
                    },
                )
    if root_pom is not None:
        reactor.add((root_pom.findtext("artifactId") or "").strip())
    items = (
        ([external_parent] if external_parent else [])
        + imports
        + list(plugins.values())
        + list(deps.values())
    )
    for it in items:
        if it["artifact"] in reactor and it["group"] in (props.get("project.groupId"), None):
            it["reactor"] = True
    return {
        "poms_read": len(in_repo),
        "external_parent_poms_on_disk": len(outside),
        "compiler_level": resolve_props(level, props),
        "items": items,
        "maven_compiler_plugin": comp.get("version"),
    }


def maven_probe(snap: Snapshot, sha: str, command: str, m2_copy: Path, timeout: int = 300) -> dict:
    """Run the row's first Maven test command offline (`mvn -o`) in a temporary checkout; its first ERROR
    line."""
    first = re.split(r"\s*&&\s*", command.strip().strip("()"))[0]
    argv = first.split()
    argv = ["mvn", "-o", f"-Dmaven.repo.local={m2_copy}"] + [a for a in argv[1:] if a not in ("-T", "1C")]
    with tempfile.TemporaryDirectory(prefix="mvnprobe-") as tmp:
        left_out = export_tree(snap, sha, Path(tmp))
        t0 = time.monotonic()
        try:
            res = run(argv, cwd=tmp, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"ran": True, "command": " ".join(argv), "rc": None, "why": f"timed out after {timeout}s"}
    generic = (
        "Some problems were encountered",
        "The build could not read",
        "-> [Help",
        "To see the full",
        "Re-run Maven",
        "For more information",
        "[Help",
        "The project ",
    )
    errors = [
        ln.replace("[ERROR]", "").strip()
        for ln in (res.stdout + res.stderr).splitlines()
        if ln.startswith("[ERROR]")
    ]
    errors = [e for e in errors if e and not e.startswith(generic)] or [e for e in errors if e]
    return {
        "ran": True,
        "command": " ".join(argv).replace(str(m2_copy), "<copy of ~/.m2>"),
        "rc": res.returncode,
        "seconds": round(time.monotonic() - t0, 1),
        "blobs_left_out_of_checkout": left_out,
        "first_error": re.sub(r"\s*@ line \d+, column \d+.*$|\s*-> \[Help 1\]$", "", errors[0])[:600]
        if errors
        else None,
    }


# ---------------------------------------------------------------- Java: Gradle and Ivy


def gradle_items(snap: Snapshot, sha: str) -> tuple[list[dict], list[dict]]:
    """Declared dependencies (g:a:v string literals, $var substituted from ext blocks and gradle.properties)
    and plugins with versions; a regex, approximate."""
    files = [
        f
        for f in snap.ls_recursive(sha)
        if re.search(r"(^|/)build\.gradle(\.kts)?$", f)
        or f.endswith(("gradle.properties", ".gradle", "libs.versions.toml"))
    ]
    texts = {}
    for f in files[:300]:
        try:
            texts[f] = snap.read(sha, f) or ""
        except OSError:
            texts[f] = ""
    props: dict[str, str] = {}
    for f, t in texts.items():
        if f.endswith(".properties"):
            props.update(dict(re.findall(r"^\s*([\w.]+)\s*=\s*(\S+)\s*$", t, re.MULTILINE)))
        else:
            props.update(dict(re.findall(r"^\s*(\w+)\s*=\s*[\"']([^\"'$]+)[\"']\s*$", t, re.MULTILINE)))
    deps: dict[str, dict] = {}
    plugins: dict[str, dict] = {}
    conf = "|".join(GRADLE_CONFS)
    for f, t in texts.items():
        if f.endswith((".properties", ".toml")):
            continue
        for m in re.finditer(rf"\b(?:{conf})\s*\(?\s*[\"']([\w.\-]+):([\w.\-]+):([^\"'@]+)(?:@\w+)?[\"']", t):
            v = re.sub(r"\$\{?(\w+)\}?", lambda x: props.get(x[1], x[0]), m[3])
            deps[f"{m[1]}:{m[2]}"] = {
                "group": m[1],
                "artifact": m[2],
                "version": v,
                "kind": "dependency",
                "ext": "jar",
                "declared_in": f,
            }
        for m in re.finditer(
            r"id\s*\(?\s*[\"']([\w.\-]+)[\"']\s*\)?\s*version\s*\(?\s*[\"']([^\"']+)[\"']", t
        ):
            plugins[m[1]] = {
                "group": m[1],
                "artifact": f"{m[1]}.gradle.plugin",
                "version": m[2],
                "kind": "gradle plugin (plugin portal marker)",
                "ext": "pom",
                "declared_in": f,
            }
    return list(plugins.values()), list(deps.values())


def wrapper_url(snap: Snapshot, sha: str, path: str) -> str | None:
    text = snap.read(sha, path)
    m = re.search(r"^distributionUrl=(\S+)", text or "", re.MULTILINE)
    return m[1].replace("\\:", ":") if m else None


def ivy_items(snap: Snapshot, sha: str) -> tuple[list[dict], dict]:
    text = snap.read(sha, "buildScripts/ivy.xml")
    if text is None:
        return [], {"ivy_xml": None}
    root = _strip_ns(ET.fromstring(text.encode()))
    local = {Path(f).stem for f in snap.ls(sha, "buildScripts/ivy-repo")}
    items = []
    for d in root.findall("dependencies/dependency"):
        org, name, rev = d.get("org"), d.get("name"), d.get("rev")
        it = {
            "group": org,
            "artifact": name,
            "version": rev,
            "conf": d.get("conf"),
            "kind": "ivy dependency",
            "ext": "jar",
        }
        if f"{org}-{name}-{rev}" in local:
            it["kind"] = "ivy dependency (descriptor in buildScripts/ivy-repo, jar downloaded from its URL)"
        items.append(it)
    setup = snap.read(sha, "buildScripts/setup.ant.xml") or ""
    ipp = re.search(r"<get src=\"([^\"]*ivyplusplus[^\"]*)\"", setup)
    ippv = re.search(r"ensureippversion version=\"([^\"]+)\"", setup)
    return items, {
        "ivy_xml": "buildScripts/ivy.xml",
        "ivyplusplus": {
            "url": ipp[1] if ipp else None,
            "min_version": ippv[1] if ippv else None,
            "here": False,
        },
    }


def ant_targets(snap: Snapshot, sha: str) -> set[str]:
    names = set()
    for f in ["build.xml"] + [
        f"buildScripts/{x}" for x in snap.ls(sha, "buildScripts") if x.endswith(".xml")
    ]:
        f = f if f.startswith("buildScripts/") or f == "build.xml" else f"buildScripts/{f}"
        try:
            t = snap.read(sha, f) or ""
        except OSError:
            t = ""
        names |= set(re.findall(r"<target\s+name=\"([^\"]+)\"", t))
    return names


# ---------------------------------------------------------------- Java rows


def test_command(eval_script: str) -> str:
    m = re.search(r">>>>> Start Test Output'\n(.*?)\n: '>>>>> End Test Output", eval_script, re.DOTALL)
    body = m[1] if m else ""
    return re.sub(r"\)\s*(2>\S+\s*)?\|\s*cat\s*$", ")", body.strip().splitlines()[0] if body.strip() else "")


def java_tool(cmd: str) -> str:
    for pat, tool in (
        (r"\bmvnd\b", "mvnd"),
        (r"\./mvnw\b", "mvnw"),
        (r"\bmvn\b", "mvn"),
        (r"\./gradlew\b", "gradlew"),
        (r"\bgradle\b", "gradle"),
        (r"\bant\b", "ant"),
    ):
        if re.search(pat, cmd):
            return tool
    return "unknown"


def java_row(snap: Snapshot, sha: str, cmd: str, tools: dict, m2_copy: Path | None, probes: dict) -> dict:
    tool = java_tool(cmd)
    out: dict = {"build_tool": tool, "test_command": cmd}
    blockers: list[str] = []
    if tool in ("mvnd", "mvn", "mvnw"):
        if tool == "mvnd" and not tools["mvnd"]:
            blockers.append(
                "the row runs `mvnd` (Maven daemon), which is not installed here and not in Debian "
                f"(mvn {tools['mvn_version']} could stand in)"
            )
        if tool == "mvnw":
            url = wrapper_url(snap, sha, ".mvn/wrapper/maven-wrapper.properties")
            out["maven_wrapper_distribution"] = url
            blockers.append(
                f"./mvnw downloads {url.rsplit('/', 1)[-1] if url else 'Maven'} from Maven Central "
                f"(unreachable; installed mvn is {tools['mvn_version']})"
            )
        m = re.search(r"-pl\s+(\S+)", cmd)
        module = m[1] if m else ""
        info = maven_module(snap, sha, module)
        items = info.pop("items")
        out.update({"module": module or ".", **info})
        counts = check_artifacts(items)
        out["artifacts"] = {
            **counts,
            "approximate": "direct dependencies, plugins, external parent and imported "
            "BOMs of the tested module and its in-repo parents; "
            "no transitive closure, no profiles",
        }
        out["missing"] = [
            gav(i)
            + (f" (Debian guess: {i['debian_package_guess']})" if i.get("debian_package_guess") else "")
            for i in items
            if i["status"] in ("missing", "other_version_here")
        ]
        out["reactor_modules_needed"] = [gav(i) for i in items if i["status"] == "reactor_module"]
        out["items"] = items
        lvl = (
            semver(str(info["compiler_level"] or "").replace("1.", "", 1)) if info["compiler_level"] else None
        )
        if lvl and lvl[0] < 7:
            blockers.append(
                f"compiles with source/target {info['compiler_level']}, which javac 17 rejects "
                "(needs <= JDK 11)"
            )
        n_missing = counts["missing"] + counts["other_version_here"]
        blockers.append(
            f"{n_missing} of {counts['artifacts']} direct Maven artifacts not on disk here"
            + (f": {', '.join(out['missing'][:4])}" if n_missing else "")
        )
        if out["reactor_modules_needed"]:
            blockers.append(
                f"`-pl {module}` without `-am` resolves sibling modules from the local repository: "
                f"{', '.join(out['reactor_modules_needed'][:3])}"
            )
        if m2_copy is not None and tools["mvn"]:
            key = (snap.git_dir, sha, cmd)
            probes.setdefault(key, maven_probe(snap, sha, cmd, m2_copy))
            out["offline_probe"] = probes[key]
            if out["offline_probe"].get("first_error"):
                blockers.append(f"`mvn -o` stops at: {out['offline_probe']['first_error'][:240]}")
    elif tool in ("gradlew", "gradle"):
        url = wrapper_url(snap, sha, "gradle/wrapper/gradle-wrapper.properties")
        dist = url.rsplit("/", 1)[-1] if url else None
        cached = bool(dist) and any(
            (Path.home() / ".gradle/wrapper/dists").glob(f"{dist.removesuffix('.zip')}*")
        )
        out["gradle_wrapper"] = {"distribution_url": url, "cached_here": cached}
        if not cached:
            blockers.append(
                f"./gradlew needs {dist} from services.gradle.org (unreachable, not cached; "
                f"Gradle here: {tools['gradle'] or 'not installed'}, Debian offers "
                f"{tools['debian_gradle']})"
            )
        plugins, deps = gradle_items(snap, sha)
        items = plugins + deps
        counts = check_artifacts(items)
        out["artifacts"] = {
            **counts,
            "approximate": "regex over build scripts: string-literal g:a:v and "
            "`id(...) version ...` plugins; no transitive closure",
        }
        out["missing"] = [gav(i) for i in items if i["status"] in ("missing", "other_version_here")]
        out["items"] = items
        blockers.append(
            f"{len(out['missing'])} of {counts['artifacts']} declared artifacts/plugins not on disk "
            f"here (approximate): {', '.join(out['missing'][:4])}"
        )
    elif tool == "ant":
        if not tools["ant"]:
            blockers.append(f"ant is not installed here (Debian offers ant {tools['debian_ant']})")
        targets = ant_targets(snap, sha)
        target = cmd.split("ant", 1)[1].strip(" )").split()[0] if "ant" in cmd else None
        out["ant_target"] = {"name": target, "defined_at_commit": target in targets}
        if target and target not in targets:
            blockers.append(
                f"ant target `{target}` is not defined in the repository at this commit (the "
                "benchmark image adds it)"
            )
        items, ivy = ivy_items(snap, sha)
        out["ivy"] = ivy
        if ivy.get("ivyplusplus", {}).get("url"):
            blockers.append(f"the build first downloads {ivy['ivyplusplus']['url']} (unreachable)")
        counts = check_artifacts(items)
        out["artifacts"] = {
            **counts,
            "approximate": "all buildScripts/ivy.xml dependencies (every conf), direct only",
        }
        out["missing"] = [
            f"{gav(i)} [{i['conf']}]" for i in items if i["status"] in ("missing", "other_version_here")
        ]
        core = [i for i in items if re.match(r"^(build|test|stripe)\b", i.get("conf") or "")]
        out["artifacts"]["core_confs"] = {
            "confs": "build, stripe, test (what compiling and testing need "
            "besides the javac/ecj/eclipse variants)",
            "artifacts": len(core),
            "not_on_disk": sum(i["status"] != "present" for i in core),
        }
        out["items"] = items
        blockers.append(
            f"{len(out['missing'])} of {counts['artifacts']} ivy.xml dependencies not on disk here: "
            f"{', '.join(out['missing'][:4])}"
        )
    out["blockers"] = blockers
    return out


# ---------------------------------------------------------------- summary


def toolchain_facts() -> dict:
    def ver(cmd: list[str]) -> str | None:
        if not shutil.which(cmd[0]):
            return None
        res = run(cmd)
        return first_line(re.sub(r"\x1b\[[0-9;]*m", "", res.stdout + res.stderr)) or None

    def deb(pkg: str) -> str | None:
        m = re.search(r"^Version: (\S+)", run(["apt-cache", "show", pkg]).stdout, re.MULTILINE)
        return m[1] if m else None

    mvn = ver(["mvn", "--version"])
    return {
        "cargo": ver(["cargo", "--version"]),
        "rustc": ver(["rustc", "--version"]),
        "rustup_toolchains": [t for t in run(["rustup", "toolchain", "list"]).stdout.splitlines() if t]
        if shutil.which("rustup")
        else [],
        "java": ver(["java", "-version"]),
        "javac": ver(["javac", "-version"]),
        "mvn": mvn,
        "mvn_version": (re.search(r"Maven (\S+)", mvn or "") or [None, None])[1],
        "mvnd": ver(["mvnd", "--version"]),
        "gradle": ver(["gradle", "--version"]),
        "ant": ver(["ant", "-version"]),
        "debian_gradle": deb("gradle"),
        "debian_ant": deb("ant"),
        "debian_rustc": deb("rustc"),
        "debian_cargo": deb("cargo"),
        "debian_maven": deb("maven"),
        "cargo_registry_cache": (Path.home() / ".cargo" / "registry").is_dir(),
        "debian_cargo_registry": Path("/usr/share/cargo/registry").is_dir(),
        "maven_repos": {str(r): r.is_dir() for r in MAVEN_REPOS},
    }


def per_repo_summary(repo: str, lang: str, rows: list[dict]) -> dict:
    n = len(rows)
    if all(r.get("source") != "ok" for r in rows):
        why = rows[0]["source_detail"]
        return {
            "language": lang,
            "rows": n,
            "blocker": f"no source here: {why}; not measured further",
            "kind": "no source",
        }
    rows = [r for r in rows if r.get("source") == "ok"]
    parts: list[str] = []

    def rng(xs: list[int]) -> str:
        return f"{min(xs)}" if min(xs) == max(xs) else f"{min(xs)}-{max(xs)}"

    kind = "registry only"
    if lang == "Rust":
        locked = [r for r in rows if r.get("cargo_lock")]
        if locked:
            tot = [r["locked"]["registry_crates"] for r in locked]
            miss = [r["locked"]["not_packaged"] for r in locked]
            exact = [r["locked"]["exact"] for r in locked]
            plat = [r["locked"]["not_packaged_non_linux_heuristic"] for r in locked]
            union = Counter(m.split()[0] for r in locked for m in r["missing"] if not NON_LINUX.match(m))
            parts.append(
                f"registry: of {rng(tot)} locked crates.io crates per row, {rng(exact)} are in Debian "
                f"bookworm at the exact version and {rng(miss)} are not packaged at all ({rng(plat)} of "
                f"them Windows/wasm/macOS-only by name; e.g. {', '.join(k for k, _ in union.most_common(4))})"
            )
        unlocked = [r for r in rows if not r.get("cargo_lock")]
        if unlocked:
            mr = [r["manifest_requirements"] for r in unlocked]
            union = Counter(m.split()[0] for r in unlocked for m in r["missing"])
            parts.append(
                f"{len(unlocked)} rows have no Cargo.lock (needs the crates.io index to resolve); of "
                f"{rng([x['direct_requirements'] for x in mr])} direct requirements, "
                f"{rng([x['not_packaged'] for x in mr])} name crates Debian lacks (e.g. "
                f"{', '.join(k for k, _ in union.most_common(3)) or 'none'}) and "
                f"{rng([x['not_satisfiable'] for x in mr])} need versions Debian lacks (approximate)"
            )
        pins = Counter(
            (r["toolchain_file"] or {}).get("channel")
            for r in rows
            if r.get("toolchain_file") and not r["toolchain_file"]["usable"]
        )
        if pins:
            kind = "registry + toolchain"
            parts.append(
                f"toolchain: {sum(pins.values())} rows pin a toolchain not installed here "
                f"({', '.join(f'{c} x{k}' for c, k in pins.most_common())})"
            )
        inc = sum(1 for r in rows if r.get("known_incompatible"))
        if inc:
            kind = "registry + toolchain"
            parts.append(f"{inc} rows lock time < 0.3.35, which does not compile on rustc >= 1.80")
        gitc = sum(1 for r in rows if r.get("git_crates"))
        if gitc:
            names = sorted({g.split(" (")[0].split()[0] for r in rows for g in r["git_crates"]})
            parts.append(f"{gitc} rows also need git-sourced crates from GitHub ({', '.join(names)})")
    else:
        tools = Counter(r["build_tool"] for r in rows)
        kind = "build tool + registry"
        miss = [len(r.get("missing", [])) for r in rows]
        tot = [r["artifacts"]["artifacts"] for r in rows]
        union = Counter(m.split(" ")[0] for r in rows for m in r.get("missing", []))
        seen: dict[str, int] = {}
        for r in rows:
            for b in r["blockers"]:
                if not re.match(r"^\d+ of \d+ |^`mvn -o` stops", b):
                    seen[b] = seen.get(b, 0) + 1
        parts.append(f"tool: {', '.join(tools)}")
        parts += [b if k == n else f"{b} ({k} of {n} rows)" for b, k in seen.items()]
        parts.append(
            f"{rng(miss)} of {rng(tot)} direct artifacts per row not on disk here (e.g. "
            f"{', '.join(k for k, _ in union.most_common(3))})"
        )
        probes = Counter(
            (r.get("offline_probe") or {}).get("first_error", "")[:200]
            for r in rows
            if (r.get("offline_probe") or {}).get("first_error")
        )
        for e, k in probes.most_common(2):
            parts.append(f"`mvn -o` stops at ({k} of {n} rows): {e}")
    return {"language": lang, "rows": n, "blocker": "; ".join(parts), "kind": kind}


def main(argv: list[str] | None = None) -> int:
    note_start()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="results/multilingual_git/blockers.json")
    ap.add_argument("--mirror-root", default="/work/.mirror")
    ap.add_argument("--dataset", default=DATASET, help="SWE-bench Multilingual's test parquet")
    ap.add_argument("--no-build-probe", action="store_true", help="skip the offline `mvn -o` probe")
    args = ap.parse_args(argv)
    t_start = time.monotonic()
    df = pd.read_parquet(args.dataset)
    df = df[df["repo"].isin(RUST + JAVA)]
    skipped = [
        r.instance_id
        for r in df.itertuples()
        if len(r.FAIL_TO_PASS) == 0 or str(r.FAIL_TO_PASS).strip() in ("[]", "")
    ]
    df = df[~df["instance_id"].isin(skipped)]
    print(f"{len(df)} rows ({', '.join(skipped)} skipped: empty FAIL_TO_PASS)", file=sys.stderr)
    tools = toolchain_facts()
    print(f"toolchain: {tools['cargo']} | {tools['javac']} | {tools['mvn']}", file=sys.stderr)
    deb = debian_crates()
    print(f"Debian bookworm: {len(deb)} crates packaged as librust-*-dev", file=sys.stderr)
    tc = RustToolchain()
    m2_tmp = None
    if not args.no_build_probe and tools["mvn"]:
        m2_tmp = tempfile.mkdtemp(prefix="m2copy-")
        src = Path.home() / ".m2" / "repository"
        if src.is_dir():
            subprocess.run(["cp", "-al", str(src), f"{m2_tmp}/repository"], check=False)
        else:
            os.makedirs(f"{m2_tmp}/repository")
    probes: dict = {}
    rows: list[dict] = []
    try:
        for repo in RUST + JAVA:
            lang = "Rust" if repo in RUST else "Java"
            snap = find_snapshot(Path(args.mirror_root), repo)
            for r in df[df["repo"] == repo].sort_values("instance_id").itertuples():
                t0 = time.monotonic()
                row = {
                    "instance_id": r.instance_id,
                    "repo": repo,
                    "language": lang,
                    "base_commit": r.base_commit,
                    "log_parser": r.log_parser,
                }
                if snap is None:
                    row.update(
                        source="none",
                        source_detail=FETCH_REFUSED.get(repo, f"no snapshot under {args.mirror_root}"),
                        blockers=[
                            (
                                f"no source here for commit {r.base_commit[:12]}: "
                                f"{FETCH_REFUSED.get(repo, 'no snapshot')}"
                            )
                        ],
                    )
                    if lang == "Java":
                        row["build_tool"] = java_tool(test_command(r.eval_script))
                        row["test_command"] = test_command(r.eval_script)
                elif not snap.has_commit(r.base_commit):
                    row.update(
                        source="no commit",
                        source_detail=f"snapshot lacks {r.base_commit}",
                        blockers=[f"no source here for commit {r.base_commit}"],
                    )
                else:
                    row.update(source="ok", source_detail=snap.git_dir)
                    try:
                        if lang == "Rust":
                            row["test_command"] = test_command(r.eval_script)
                            row.update(rust_row(snap, r.base_commit, deb, tc))
                        else:
                            row.update(
                                java_row(
                                    snap,
                                    r.base_commit,
                                    test_command(r.eval_script),
                                    tools,
                                    Path(m2_tmp, "repository") if m2_tmp else None,
                                    probes,
                                )
                            )
                    except (OSError, ET.ParseError, tomllib.TOMLDecodeError) as exc:
                        row.update(
                            source="read failure",
                            source_detail=str(exc),
                            blockers=[f"could not read the build files: {exc}"],
                        )
                row["seconds"] = round(time.monotonic() - t0, 1)
                rows.append(row)
                print(f"{r.instance_id}: {' | '.join(row['blockers'])[:300]}", file=sys.stderr)
    finally:
        if m2_tmp:
            shutil.rmtree(m2_tmp, ignore_errors=True)
    per_repo = {}
    for repo in RUST + JAVA:
        rr = [x for x in rows if x["repo"] == repo]
        if rr:
            per_repo[repo] = per_repo_summary(repo, rr[0]["language"], rr)
            print(f"{repo}: {per_repo[repo]['blocker']}", file=sys.stderr)
    elapsed = round(time.monotonic() - t_start, 1)
    write_result(
        Path(args.out),
        {
            "rows": rows,
            "per_repo": per_repo,
            "toolchain": tools,
            "skipped": skipped,
            "debian_crates_packaged": len(deb),
        },
        build_manifest(
            command=sys.argv,
            datasets=[{"source": args.dataset, "rows": len(df)}],
            timings={"total_s": elapsed},
            extra={"artifact": "multilingual-blockers", "mirror_root": args.mirror_root},
        ),
    )
    print(f"wrote {args.out} in {elapsed}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
