"""The seccomp rules as data: syscall numbers against the installed kernel headers, and the program's shape."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest

from execcritic.sandbox import confine

HEADERS = {0: Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"), 1: Path("/usr/include/asm-generic/unistd.h")}


@pytest.mark.parametrize("col", [0, 1], ids=["x86_64", "generic"])
def test_syscall_numbers_match_the_kernel_headers(col):
    header = HEADERS[col]
    if not header.is_file():                   # (no kernel headers here: the numbers every table agrees on)
        assert (confine.SYSCALLS["ptrace"][col], confine.SYSCALLS["clone3"][col]) == ((101, 435), (117, 435))[col]
        return
    defined = {m.group(1): int(m.group(2)) for m in
               re.finditer(r"#define __NR(?:3264)?_(\w+)\s+(\d+)", header.read_text())}
    checked = 0
    for name, nums in confine.SYSCALLS.items():
        if nums[col] is None:
            assert name not in defined, f"{name} exists in {header}"
        elif name in defined:
            assert defined[name] == nums[col], name
            checked += 1
    present = sum(1 for nums in confine.SYSCALLS.values() if nums[col] is not None)
    assert checked >= present - 4      # only calls newer than the headers are taken on trust


def _decode(prog: bytes) -> list[tuple[int, int, int, int]]:
    return [struct.unpack("<HBBI", prog[i:i + 8]) for i in range(0, len(prog), 8)]


def test_program_checks_the_architecture_first_and_ends_in_returns():
    for arch, (audit, _col) in confine.ARCHES.items():
        ins = _decode(confine.seccomp_program(arch))
        assert ins[0] == (0x20, 0, 0, 4) and ins[1][0] == 0x15 and ins[1][3] == audit
        assert all(code == 0x06 for code, *_ in ins[-4:])
        assert len(ins) < 4096
        for pc, (code, jt, jf, _k) in enumerate(ins):      # every jump lands inside the program
            if code & 0x07 == 0x05:
                assert pc + 1 + max(jt, jf) < len(ins)


def test_every_denied_call_is_compared_in_the_program():
    ins = _decode(confine.seccomp_program("x86_64"))
    compared = {k for code, _jt, _jf, k in ins if code == 0x15}
    for name in confine.DENIED + confine.ENOSYS_CALLS:
        assert confine.SYSCALLS[name][0] in compared, name


def test_docker_profile_keeps_only_the_harness_mounts():
    profile = json.loads(confine.docker_profile())
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW"
    denied = {n for r in profile["syscalls"] if "args" not in r for n in r["names"]}
    assert {"ptrace", "process_vm_readv", "bpf", "setns", "pidfd_getfd", "io_uring_setup", "clone3"} <= denied
    assert not denied & set(confine.DOCKER_ALLOWED)
    newuser = next(r for r in profile["syscalls"] if "clone" in r["names"])
    assert newuser["args"][0]["value"] == confine.CLONE_NEWUSER


def test_unknown_architecture_is_refused():
    with pytest.raises(ValueError):
        confine.seccomp_program("mips")
