"""RSpec (fastlane, fpm, rubocop): node ids as SWE-bench names them - `description - ./spec/x_spec.rb[1:2:3]`
(fastlane) or the bare example `description` (fpm, rubocop), both from rspec's JSON formatter.

Selection rule (rspec-core 3):
  - `./spec/x_spec.rb[1:2:3]` - an example id - is node level: ids come from rspec's own JSON output
    and name one example (a group id would run its examples, none of which has that id, so the
    declared node would be missing at run time - operational, never a verdict);
  - `-E/--example-matches REGEX` (rspec-core >= 3.12) is a regex searched in the example's *full
    description* (group descriptions + example description); anchored `\\A...\\z` or `^...$` literal
    full descriptions (alternation allowed) are node level;
  - `-e/--example STRING` is a substring of the full description: `pattern`;
  - `spec/x_spec.rb:LINE` runs whatever example *or group* is declared at or above that line - not
    decidable from the command line: `pattern`;
  - a file is `file`, a directory `directory`, nothing is `suite`.
`--tag` only narrows. Refused: `--dry-run` (reports examples as passed without running them),
`--only-failures`/`--next-failure` (selection by the last run's state), `--bisect`, `-o/--out`
(results to a file), `--drb`.

build_command uses the id when the row's FAIL_TO_PASS carries one (fastlane). A bare description
(rubocop, fpm) needs the full description, which only the spec source knows; it is recovered from the
test patch when the patch shows every enclosing `describe`/`context` (see `_ml.recover_chains`),
otherwise build_command refuses.

Results: the command cannot pipe through jq as SWE-bench does, so observed_command asks for
`--format json` and parse_results reads the JSON document itself, keying each example by
`description - id` (fastlane naming), by `description` (fpm/rubocop naming) and by full description.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from execcritic.bundle.command import ParsedCommand
from execcritic.bundle.languages._describe import RB_GROUP, RB_LEAF, RB_MODULE, rb_unquote
from execcritic.bundle.nodes import Node, Selection, Selector
from execcritic.errors import InputError
from execcritic.runners import _ml
from execcritic.runners._ml import OK, OKV, Opt, reject
from execcritic.runners.base import Runner

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task

_OPTS: dict[str, Opt] = {
    "-e": Opt(True, "select"),
    "--example": Opt(True, "select"),
    "-E": Opt(True, "select"),
    "--example-matches": Opt(True, "select"),
    "-f": Opt(True, "observe"),
    "--format": Opt(True, "observe"),
    **{
        k: OKV
        for k in (
            "-t",
            "--tag",
            "-r",
            "--require",
            "-I",
            "--order",
            "--seed",
            "--failure-exit-code",
            "--error-exit-code",
            "--default-path",
            "--pattern",
            "--exclude-pattern",
            "--deprecation-out",
            "-O",
            "--options",
        )
    },
    **{
        k: OK
        for k in (
            "--no-color",
            "--color",
            "-c",
            "--force-color",
            "--no-profile",
            "--fail-fast",
            "--no-fail-fast",
            "-b",
            "--backtrace",
            "-w",
            "--warnings",
            "-p",
            "--profile",
            "--require-spec-helper",
            "--fail-if-no-examples",
            "--full-backtrace",
        )
    },
    "--dry-run": reject("reports examples as passed without running them"),
    "--only-failures": reject("selects examples by the last run's state, not by name"),
    "--next-failure": reject("selects examples by the last run's state, not by name"),
    "--bisect": reject("reruns subsets of the suite"),
    "-o": reject("writes the results to a file instead of the output the harness reads", takes=True),
    "--out": reject("writes the results to a file instead of the output the harness reads", takes=True),
    "-X": reject("runs against a DRb server"),
    "--drb": reject("runs against a DRb server"),
    "--init": reject("runs nothing"),
    "-h": reject("runs nothing"),
    "--help": reject("runs nothing"),
    "-v": reject("runs nothing"),
    "--version": reject("runs nothing"),
}
_ID = re.compile(r"^(?P<path>.+?\.rb)\[(?P<ids>\d+(?::\d+)*(?:,\d+(?::\d+)*)*)\]$")
_LINE = re.compile(r"^(?P<path>.+?\.rb)(?::\d+)+$")
_F2P_ID = re.compile(r"^(?P<desc>.*) - (?P<path>\S+\.rb)(?:\[(?P<id>\d+(?::\d+)*)\])?$")
_RUBY_START = ("\\A", "^")
_RUBY_END = ("\\z", "\\Z", "$")



def ruby_tool_args(cmd: ParsedCommand, tools: Sequence[str]) -> tuple[str, list[str]] | None:
    """(launcher text, arguments) for `tool ...`, `bundle exec tool ...`, `bin/tool ...`."""
    argv = list(cmd.argv)
    if not argv:
        return None
    if _ml.basename(argv[0]) == "bundle" and len(argv) >= 3 and argv[1] == "exec":
        if _ml.basename(argv[2]) in tools:
            return " ".join(argv[:3]), argv[3:]
        return None
    if _ml.basename(argv[0]) in tools:
        return argv[0], argv[1:]
    return None


def full_description(chain: Sequence[str], leaf: str) -> str:
    """RSpec's build_description_from: parts joined by a space, except no space between a Module
    description and a part starting with `#`, `.` or `::`."""
    out = ""
    prev_module = False
    for part in list(chain) + [leaf]:
        is_module = part.startswith(RB_MODULE)
        text = part.lstrip(RB_MODULE)
        if not out:
            out = text
        elif prev_module and re.match(r"^(?:#|::|\.)", text):
            out += text
        else:
            out += " " + text
        prev_module = is_module
    return out


class RSpecRunner(Runner):
    name = "rspec"
    language = "ruby"
    log_parser = "parse_log_rspec_transformed_json"

    def serves(self, task: Task) -> bool:
        return task.log_parser == "parse_log_rspec_transformed_json"

    def recognizes(self, cmd: ParsedCommand) -> bool:
        return ruby_tool_args(cmd, ("rspec",)) is not None

    def selection(self, cmd: ParsedCommand) -> Selection:
        _launcher, args = ruby_tool_args(cmd, ("rspec",)) or ("", [])
        w = _ml.walk_options(args, _OPTS, runner="rspec", stop_at_dd=False)
        sel = Selection(problems=list(w.problems))
        files = []
        for p in w.positionals:
            m = _ID.match(p)
            if m:
                path = m.group("path").removeprefix("./")
                for ident in m.group("ids").split(","):
                    sel.selectors.append(
                        Selector(
                            f"{path}[{ident}]", "node", Node(self.name, "", path=path, param=ident, text=p)
                        )
                    )
            elif _LINE.match(p):
                sel.selectors.append(
                    Selector(
                        p,
                        "pattern",
                        note="a line number runs whatever example or group is "
                        "declared at or above it; use an example id "
                        "file[1:2:3] or -E",
                    )
                )
            else:
                files.append(p)
        for e in _ml.values(w, "-e", "--example"):
            sel.selectors.append(Selector(e, "pattern", note="-e is a substring of the full description"))
        matches = _ml.values(w, "-E", "--example-matches")
        for regex in matches:
            lits = _ml.anchored_literals(regex, start=_RUBY_START, end=_RUBY_END)
            if lits is None:
                sel.selectors.append(
                    Selector(
                        regex,
                        "pattern",
                        note="-E is a regex searched in the full description; anchor it \\A...\\z",
                    )
                )
                continue
            path = files[0].removeprefix("./") if len(files) == 1 else None
            for lit in lits:
                sel.selectors.append(Selector(lit, "node", Node(self.name, lit, path=path, text=lit)))
        id_files = {s.node.path for s in sel.selectors if s.node is not None and s.node.param is not None}
        if id_files and matches:
            sel.problems.append(
                _ml.problem(
                    "runner.arguments",
                    "rspec: an example id replaces the -E filter for its file (rspec applies id and location "
                    "filters instead of name filters there); select every example of a file the same way",
                )
            )
        if not sel.selectors:
            for f in files:
                sel.selectors.append(
                    Selector(
                        f,
                        "file" if f.endswith(".rb") else "directory",
                        note="a spec file runs all of its examples",
                    )
                )
            if not files:
                sel.selectors.append(
                    Selector(cmd.render(), "suite", note="no file and no filter: every spec")
                )
        return sel

    def parse_node(self, text: str) -> Node:
        t = text.strip()
        m = _F2P_ID.match(t)
        if m:
            return Node(
                self.name,
                m.group("desc"),
                path=m.group("path").removeprefix("./"),
                param=m.group("id"),
                text=t,
            )
        m = _ID.match(t)
        if m and "," not in m.group("ids"):
            return Node(self.name, "", path=m.group("path").removeprefix("./"), param=m.group("ids"), text=t)
        return Node(self.name, t, text=t)

    def binds(self, selected: Node, declared: Node) -> bool:
        if selected.param is not None:  # an example id
            return (
                declared.param == selected.param
                and bool(declared.path)
                and declared.path.removeprefix("./") == (selected.path or "")
            )
        if declared.path and selected.path and declared.path.removeprefix("./") != selected.path:
            return False
        # -E full description: declared full description, or the example's own description at its end
        return (
            selected.name == declared.name
            or selected.name.endswith(" " + declared.name)
            or (bool(declared.name) and selected.name.endswith(declared.name) and declared.name[:1] in "#.:")
        )

    def node_for_file(self, path: str, scope: Sequence[str], name: str) -> Node:
        """A spec the patch adds, as `description - ./path` (SWE-bench's naming without an id);
        build_command recovers the full description from the patch."""
        return Node(self.name, name, path=path, text=f"{name} - ./{path}")

    def build_command(self, nodes: Sequence[Node], *, task: Task | None = None) -> str:
        launcher, env, keep = "bundle exec rspec", [], ["--no-color"]
        for off in _ml.official_commands(task):
            tool = ruby_tool_args(off, ("rspec",))
            if tool is None:
                continue
            launcher = tool[0]
            env = [f"{k}={v}" for k, v in off.env]
            break
        ids = [f"./{n.path}[{n.param}]" for n in nodes if n.param]
        prefix = env + launcher.split(" ")
        if len(ids) == len(nodes):
            return " ".join(_ml.q(p) for p in prefix + ids + keep)
        # ids and -E in one command are ANDed by rspec, so every node goes through -E
        fulls, files = [], []
        for n in nodes:
            if n.scope:
                fulls.append(n.name)  # node_for_file: the name is the full description
                files.append(n.path or "")
                continue
            hits = _ml.recover_chains(
                task,
                n.name,
                leaf=RB_LEAF,
                group=RB_GROUP,
                path_ok=lambda p, f=n.path: p == f if f else p.endswith("_spec.rb"),
                unquote=rb_unquote,
            )
            distinct = {(h.path, h.chain) for h in hits}
            if not distinct:
                raise InputError(
                    f"rspec: cannot select {n.name!r} exactly - SWE-bench names it by its own "
                    "description and the test patch does not show every enclosing describe/context "
                    "(-E matches the full description)",
                    instance=task.instance_id if task else None,
                    field="FAIL_TO_PASS",
                )
            for path, chain in sorted(distinct):  # SWE-bench's id covers every example with that description
                fulls.append(full_description(chain, n.name))
                files.append(path)
        regex = _ml.anchored_regex(_ml.unique(fulls), start="\\A", end="\\z")
        return " ".join(_ml.q(p) for p in prefix + _ml.unique(files) + ["-E", regex] + keep)

    def observed_command(self, cmd: ParsedCommand) -> ParsedCommand:
        out, argv, i = [], list(cmd.argv), 0
        while i < len(argv):
            if argv[i] in ("-f", "--format"):
                i += 2
                continue
            if not argv[i].startswith("--format="):
                out.append(argv[i])
            i += 1
        return cmd.with_argv(out + ["--format", "json"])

    def parse_results(self, log: str) -> dict[str, str]:
        results: dict[str, str] = {}
        start = log.find('{"version"')
        doc = None
        if start >= 0:
            try:
                doc, _ = json.JSONDecoder().raw_decode(log[start:])
            except ValueError:
                doc = None
        if isinstance(doc, dict):
            for ex in doc.get("examples", []):
                status = {"passed": "PASSED", "failed": "FAILED", "pending": "SKIPPED"}.get(
                    ex.get("status"), "ERROR"
                )
                desc, ident, full = (
                    ex.get("description", ""),
                    ex.get("id", ""),
                    ex.get("full_description", ""),
                )
                for key in (f"{desc} - {ident}", desc, full):
                    if key and results.get(key) != "FAILED":
                        results[key] = status
            return results
        return super().parse_results(log)  # SWE-bench's jq-transformed lines, if that is what ran

    def result_for(self, node: Node, results: dict[str, str]) -> str | None:
        if node.param is not None and node.path:
            for key, status in results.items():
                if key.endswith((f" - ./{node.path}[{node.param}]", f" - {node.path}[{node.param}]")):
                    return status
            return None
        return results.get(node.name)
