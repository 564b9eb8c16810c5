import dataclasses, os, shutil, statistics, sys, tempfile, time, json, random
from pathlib import Path
from execcritic.config import PAPER
from execcritic.harness.execute import execute
from execcritic.sandbox.base import Limits, HARNESS_FILES
from tests.bundles import ScenarioKit
from tests.demo_tasks import TOOLZ, build_demo
print(HARNESS_FILES)
work = Path(tempfile.mkdtemp(prefix="pycexp-"))
demo = build_demo(TOOLZ, work)
cold = demo.open_local(limits=Limits(memory_mb=2048, pids=1024), warm_bytecode=True)
bundle = ScenarioKit(demo, cold).official_bundle()
cfg = dataclasses.replace(PAPER.harness, prestart_next_run=False)
cache = HARNESS_FILES / "execcritic_reporter" / "__pycache__"
def compiled(on):
    shutil.rmtree(cache, ignore_errors=True); shutil.rmtree(HARNESS_FILES / "__pycache__", ignore_errors=True)
    if on:
        import subprocess
        subprocess.run([f"{demo.venv}/bin/python", "-m", "compileall", "-q", str(HARNESS_FILES)], check=True)
t = {True: [], False: []}
execute(demo.task, bundle, sandbox=cold, config=cfg)
for r in range(int(sys.argv[1])):
    for on in random.sample([True, False], 2):
        compiled(on)
        s = time.monotonic(); out = execute(demo.task, bundle, sandbox=cold, config=cfg); dt = time.monotonic() - s
        assert out.valid and out.extra.get("reporter", {}).get("ended"), out.diagnostic
        t[on].append(dt)
print(json.dumps({"pyc": statistics.median(t[True]), "no_pyc": statistics.median(t[False]), "load": os.getloadavg()}))
cold.close()
