"""Every generated .tex compiles: each table is \\input{} into a minimal article whose text width is the paper's
(5.5 in, the ICLR style) and run through pdflatex. Any error, a character the font lacks, a float too large
for the page, or a line more than OVERFULL_PT wider than the page fails the test. pdflatex comes from Debian
(scripts/system-deps.sh, which `make test` runs first); without it the test fails and says so, since a skip
would let LaTeX that does not compile pass on a fresh machine."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from execcritic.figures import build_all
from execcritic.figures.tables import TEX_PACKAGES
from tests.synthetic_results import REPO, make_all

pytestmark = pytest.mark.slow

OVERFULL_PT = 1.0            # TeX's own \hfuzz is 0.1pt; a point is invisible at any zoom a reader uses
TEXT_WIDTH = "5.5in"
DOCUMENT = r"""\documentclass{article}
%(packages)s
\setlength{\textwidth}{%(width)s}
\setlength{\oddsidemargin}{0.5in}
\tracinglostchars=2
\begin{document}
\input{%(tex)s}
\end{document}
"""


def _pdflatex() -> str:
    exe = shutil.which("pdflatex")
    if exe is None:
        pytest.fail("pdflatex is missing: run scripts/system-deps.sh (it installs Debian's texlive-latex-base and "
                    "texlive-latex-recommended, which has booktabs)")
    return exe


def compile_problems(tex: Path, workdir: Path) -> list[str]:
    """What is wrong when `tex` is compiled inside the minimal document (empty: nothing)."""
    workdir.mkdir(parents=True, exist_ok=True)
    doc = workdir / "doc.tex"
    doc.write_text(DOCUMENT % {"packages": "\n".join(f"\\usepackage{{{p}}}" for p in TEX_PACKAGES),
                               "width": TEXT_WIDTH, "tex": tex.resolve().as_posix()})
    proc = subprocess.run([_pdflatex(), "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape",
                           "doc.tex"], check=False, cwd=workdir, capture_output=True, text=True, timeout=120)
    log = (workdir / "doc.log").read_text(errors="replace") if (workdir / "doc.log").is_file() else proc.stdout
    problems = [line for line in log.splitlines() if line.startswith("! ")]
    if proc.returncode != 0 and not problems:
        problems.append(f"pdflatex exited {proc.returncode}: {proc.stdout[-400:]}")
    for m in re.finditer(r"Overfull \\[hv]box \(([\d.]+)pt too (?:wide|high)\)[^\n]*", log):
        if float(m.group(1)) > OVERFULL_PT:
            problems.append(m.group(0))
    problems += re.findall(r"Missing character: [^\n]*", log)
    problems += re.findall(r"LaTeX Warning: Float too large[^\n]*", log)
    if not (workdir / "doc.pdf").is_file():
        problems.append("no PDF was written")
    return problems


@pytest.fixture(scope="module")
def synthetic_figures(tmp_path_factory) -> Path:
    """Tables with measured values, intervals, measured-only rows and measured deltas (SYNTHETIC runs)."""
    root = tmp_path_factory.mktemp("latex")
    make_all(root / "results")
    build_all(root / "results", root / "paper_figures", latest=True)
    return root / "paper_figures"


def _committed() -> list[Path]:
    return sorted((REPO / "paper_figures").glob("*.tex"))


def test_there_are_tex_files_to_compile():
    assert {p.stem for p in _committed()} >= {"table1", "table2", "table3", "table4", "table5", "table6",
                                              "figure5", "figure6"}


@pytest.mark.parametrize("tex", _committed(), ids=lambda p: p.name)
def test_every_committed_tex_compiles_and_fits_the_page(tex, tmp_path):
    assert compile_problems(tex, tmp_path) == []


def test_the_tables_of_measured_runs_compile_and_fit_the_page(synthetic_figures, tmp_path):
    texs = sorted(synthetic_figures.glob("*.tex"))
    assert len(texs) == 8
    problems = {t.name: p for t in texs if (p := compile_problems(t, tmp_path / t.stem))}
    assert problems == {}


def test_an_overfull_table_is_caught(tmp_path):
    """The check itself: a table wider than the page fails."""
    wide = tmp_path / "wide.tex"
    wide.write_text("\\begin{tabular}{" + "l" * 12 + "}\n" + " & ".join(["a-rather-wide-cell"] * 12) + " \\\\\n"
                    "\\end{tabular}\n")
    problems = compile_problems(wide, tmp_path / "build")
    assert problems and "Overfull" in problems[0]
    bad = tmp_path / "bad.tex"
    bad.write_text("\\undefinedmacro\n")
    assert any("Undefined control sequence" in p for p in compile_problems(bad, tmp_path / "build2"))
