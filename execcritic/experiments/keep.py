"""A notebook run by `papermill` on its own keeps its executed copy with its run, as `execcritic reproduce` does.

The kernel cannot store a notebook papermill has not finished writing, so the notebook's last cell
(`experiments.keep_notebook(run)`) finds where papermill writes it (the `PAPERMILL_OUTPUT_PATH` parameter of
`papermill --inject-output-path`, else the papermill command line of the kernel's parent process) and leaves a
small detached process that waits for papermill to exit, then stores the file as the run's `notebook.ipynb`
(`results.store.attach_notebook`) - unless the notebook stopped with an error: that copy stays where papermill
wrote it, with its traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from execcritic.results.store import Run, attach_notebook


def papermill_output(parent: int | None = None) -> Path | None:
    """The output notebook path of the papermill command that started this kernel, or None."""
    pid = parent or os.getppid()
    try:
        argv = [a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return None
    for i, arg in enumerate(argv):
        script = Path(arg).name == "papermill" or (arg == "papermill" and argv[i - 1:i] == ["-m"])
        if script:
            # options that take a value: skip it, so that only the two notebook paths remain
            taking = {"-p", "--parameters", "-r", "--parameters_raw", "-f", "--parameters_file", "-y",
                      "--parameters_yaml", "-b", "--parameters_base64", "-k", "--kernel", "-l", "--language",
                      "--cwd", "--engine", "--start-timeout", "--start_timeout", "--execution-timeout",
                      "--stdout-file", "--stderr-file", "--autosave-cell-every", "--log-level"}
            positional, skip = [], 0
            for a in argv[i + 1:]:
                if skip:
                    skip -= 1
                elif a in ("-p", "--parameters", "-r", "--parameters_raw"):
                    skip = 2
                elif a in taking:
                    skip = 1
                elif not a.startswith("-"):
                    positional.append(a)
            if len(positional) >= 2 and positional[1] != "-":
                out = Path(positional[1])
                return out if out.is_absolute() else cwd / out
            return None
    return None


def keep_notebook(run: Run, output_path: str | None = None) -> str:
    """Arrange for this notebook's executed copy to be stored with `run`; says what will happen."""
    if os.environ.get("EXECCRITIC_INVOKED_BY"):
        return "`execcritic reproduce` stores the executed notebook with the run when it ends"
    path = Path(output_path) if output_path else papermill_output()
    if path is None:
        return ("not run by papermill: save the notebook and call execcritic.results.store.attach_notebook("
                f"{run.artifact!r}, {run.run_id!r}, <path>, root={str(run.path.parent.parent)!r}) to keep it")
    subprocess.Popen([sys.executable, "-m", "execcritic.experiments.keep", str(os.getppid()), str(path),
                      run.artifact, run.run_id, str(run.path.parent.parent)], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return f"the executed notebook {path} is stored as {run.path / 'notebook.ipynb'} once papermill has written it"


def _wait_and_attach(pid: int, path: Path, artifact: str, run_id: str, root: str, timeout_s: float = 86400) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.5)
    if not path.is_file():
        return 1
    import nbformat  # lazy: its jsonschema import costs seconds, and only this waiter reads a notebook

    nb = nbformat.read(path, 4)             # a half-written file fails here and is not stored
    if any(o.get("output_type") == "error" for c in nb.cells for o in c.get("outputs", ())):
        return 2
    attach_notebook(artifact, run_id, path, root=root)
    return 0


if __name__ == "__main__":
    pid, path, artifact, run_id, root = sys.argv[1:6]
    sys.exit(_wait_and_attach(int(pid), Path(path), artifact, run_id, root))
