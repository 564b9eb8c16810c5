import tempfile, subprocess, shutil
from pathlib import Path
from execcritic.sandbox.base import Limits, HARNESS_FILES
from tests.demo_tasks import TOOLZ, build_demo
demo = build_demo(TOOLZ, Path(tempfile.mkdtemp(prefix="pycexp-")))
sb = demo.open_local(limits=Limits(memory_mb=2048, pids=1024))
cmd = "for i in 1 2 3 4 5; do python -W ignore -c \"import time,sys; sys.path.insert(0,'/.execcritic/reporter'); t=time.perf_counter(); import execcritic_reporter, execcritic_reporter.core, execcritic_reporter.guard, execcritic_reporter.pytest_plugin; print(round(time.perf_counter()-t,4))\"; done"
for on in (False, True, False, True):
    shutil.rmtree(HARNESS_FILES / "execcritic_reporter" / "__pycache__", ignore_errors=True)
    if on:
        subprocess.run([f"{demo.venv}/bin/python", "-W", "ignore", "-m", "compileall", "-q", str(HARNESS_FILES)], check=True)
    r = sb.run(cmd, timeout=60, reporter=True)
    print("pyc" if on else "no pyc", r.output.split())
sb.close()
