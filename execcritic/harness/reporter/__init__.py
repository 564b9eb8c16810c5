"""The harness-owned results channel: an in-process reporter (inside/, bound read-only into the sandbox and
started by the interpreter before any code under test) and the harness end that authenticates its record
stream (channel.py, stream.py). See inside/execcritic_reporter/__init__.py for what it records and why."""

from execcritic.harness.reporter.channel import (CHANNEL_MOUNT, ENV_SOCKET, INSIDE_DIR, REPORTER_MOUNT,
                                                 ReporterChannel)
from execcritic.harness.reporter.stream import NodeRecord, ReporterReport, parse_stream

__all__ = ["CHANNEL_MOUNT", "ENV_SOCKET", "INSIDE_DIR", "NodeRecord", "REPORTER_MOUNT", "ReporterChannel",
           "ReporterReport", "parse_stream"]
