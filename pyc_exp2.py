import tempfile
from pathlib import Path
from execcritic.sandbox.base import Limits
from tests.demo_tasks import TOOLZ, build_demo
demo = build_demo(TOOLZ, Path(tempfile.mkdtemp(prefix="pycexp-")))
sb = demo.open_local(limits=Limits(memory_mb=2048, pids=1024))
r = sb.run("python -v -c \"import sys; sys.path.insert(0,'/.execcritic/reporter'); import execcritic_reporter.guard\" 2>&1 | grep -i 'guard'; ls -la /.execcritic/reporter/execcritic_reporter/__pycache__ | head -5; env | grep -i pyth", timeout=60, reporter=True)
print(r.output)
sb.close()
