"""What the code under test may not do in either backend, whatever it runs: the kernel-level half of the verdict's
trust (the reporter's in-process guard is the other half, and it is only as strong as this).

A verdict is computed inside the tested process, so the primitives that read or write another address space -
or the tested one from outside - are taken away at the OS level, for every process a run starts:

- a seccomp filter (`seccomp_program` for bubblewrap's `--seccomp`, `docker_profile` for Docker) refuses
  ptrace, process_vm_readv/writev, perf_event_open, bpf, userfaultfd, kcmp, pidfd_getfd, io_uring, page
  migration, key rings, module and kexec loading, mounting and namespaces (clone/unshare with a namespace flag
  - a new user namespace is how a process would get the right to mount a procfs of its own; clone3 answers
  ENOSYS, its flags are out of a filter's reach, and libc falls back to clone). The filter is inherited by
  every child and survives execve. It also pins the reporter's channel: nothing may dup2/dup3 over, or close,
  descriptor `CHANNEL_FD` (the reporter moves its socket there), so records cannot be diverted;
- no procfs at all in the tested process's mount namespace (no `/proc/<pid>/mem` under any spelling, no
  `/proc/self/fd` to find the channel by); without a visible procfs the kernel refuses to mount a new one
  (`mount_too_revealing`), measured in tests/integration/test_confinement.py;
- no foreign-function interface: the native modules that call arbitrary C or read raw memory (`FFI_MODULES`:
  ctypes, cffi, CPython's own test modules, subinterpreters that run outside the reporter's audit hook) are
  hidden behind /dev/null, and the standard library's `ctypes/__init__.py` is replaced by an inert module
  (`INERT_CTYPES`: importable - Django's test runner and pandas import ctypes at module level - but every
  operation raises), unless a task's recipe says its Gold run needs the real thing (`TaskEnvironment.ffi`).

Syscall numbers come from the kernel headers (x86-64 and the generic table that arm64 uses);
tests/unit/test_confine.py compares them with the installed headers.
"""

from __future__ import annotations

import glob
import json
import os
import platform
import struct
from functools import lru_cache
from pathlib import Path

# the inert ctypes, bound over every `ctypes/__init__.py`; it lives with the reporter's files (mounted in both backends)
INERT_CTYPES = Path(__file__).resolve().parents[1] / "harness" / "reporter" / "inside" / "inert" / "ctypes_init.py"
INERT_CTYPES_MOUNTED = "/.execcritic/reporter/inert/ctypes_init.py"

# The reporter's channel lives on this descriptor in the tested process (below Docker's default 1024-fd limit).
CHANNEL_FD = 1023

EPERM, ENOSYS = 1, 38
# Namespace flags of clone/unshare (CLONE_NEWTIME, NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET)
NAMESPACE_FLAGS = 0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
CLONE_NEWUSER = 0x10000000

# syscall -> (x86-64 number, generic/arm64 number or None)
SYSCALLS = {
    # another address space, or this one from outside
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "perf_event_open": (298, 241), "bpf": (321, 280), "userfaultfd": (323, 282), "kcmp": (312, 272),
    "pidfd_getfd": (438, 438), "process_madvise": (440, 440), "move_pages": (279, 239),
    "migrate_pages": (256, 238), "get_robust_list": (274, 100),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    # filters, namespaces, mounts (and reading the mount table: the harness's mounts are not the test's business)
    "seccomp": (317, 277), "setns": (308, 268), "pivot_root": (155, 41), "mount": (165, 40), "umount2": (166, 39),
    "statmount": (457, 457), "listmount": (458, 458),
    # the kernel and the machine (Docker's default profile refuses these too)
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218), "kexec_load": (246, 104),
    "kexec_file_load": (320, 294), "init_module": (175, 105), "finit_module": (313, 273),
    "delete_module": (176, 106), "acct": (163, 89), "swapon": (167, 224), "swapoff": (168, 225),
    "reboot": (169, 142), "quotactl": (179, 60), "quotactl_fd": (443, 443), "settimeofday": (164, 170),
    "clock_settime": (227, 112), "clock_adjtime": (305, 266), "syslog": (103, 116),
    "open_by_handle_at": (304, 265), "name_to_handle_at": (303, 264), "lookup_dcookie": (212, 18),
    "fanotify_init": (300, 262), "vhangup": (153, 58), "nfsservctl": (180, 42),
    "uselib": (134, None), "ustat": (136, None), "sysfs": (139, None), "_sysctl": (156, None),
    "iopl": (172, None), "ioperm": (173, None), "modify_ldt": (154, None),
    # the new mount API: ENOSYS, so that libmount falls back to mount(2) where the harness mounts (Docker)
    "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "move_mount": (429, 429), "open_tree": (428, 428), "mount_setattr": (442, 442), "open_tree_attr": (467, 467),
    "clone3": (435, 435),
    # argument-checked
    "clone": (56, 220), "unshare": (272, 97), "dup2": (33, None), "dup3": (292, 24), "close": (3, 57),
    "close_range": (436, 436),
}
ENOSYS_CALLS = ("clone3", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
                "open_tree_attr")
ARG_CHECKED = ("clone", "unshare", "dup2", "dup3", "close", "close_range")
DENIED = tuple(n for n in SYSCALLS if n not in ENOSYS_CALLS and n not in ARG_CHECKED)
# Docker: the harness's own wrapper mounts (it holds CAP_SYS_ADMIN only until it drops every capability), so
# these stay allowed there and the kernel's capability check refuses them to the code under test
DOCKER_ALLOWED = ("mount", "umount2")

ARCHES = {"x86_64": (0xC000003E, 0), "aarch64": (0xC00000B7, 1)}   # AUDIT_ARCH_*, column in SYSCALLS
X32_BIT = 0x40000000

# Native modules that hand the tested code raw memory or arbitrary C calls, or run code outside the audit hook
FFI_MODULES = ("_ctypes", "_cffi_backend")
NATIVE_DYNLOAD = ("_ctypes_test", "_testcapi", "_testinternalcapi", "_testmultiphase", "_testsinglephase",
                  "_testbuffer", "_testclinic", "_testimportmultiple", "_xxtestfuzz", "_testexternalinspection",
                  "_remote_debugging", "_xxsubinterpreters", "_xxinterpchannels", "_interpreters",
                  "_interpchannels", "_interpqueues")


# ---- classic BPF for seccomp -------------------------------------------------------------------------------
_LD_ABS, _JEQ, _JGT, _JGE, _JSET, _RET = 0x20, 0x15, 0x25, 0x35, 0x45, 0x06
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
_NR, _ARCH, _ARG = 0, 4, 16       # offsets in struct seccomp_data (args: 8 bytes each, low word first)


def _arg(i: int) -> int:
    return _ARG + 8 * i


def seccomp_program(arch: str | None = None, channel_fd: int = CHANNEL_FD) -> bytes:
    """The filter as an array of `struct sock_filter` (what `bwrap --seccomp FD` reads). Anything but the
    native architecture (i386 via int 0x80, x32) gets ENOSYS."""
    arch = arch or platform.machine()
    if arch not in ARCHES:
        raise ValueError(f"no seccomp syscall table for architecture {arch!r}")
    audit_arch, col = ARCHES[arch]
    nr = {name: nums[col] for name, nums in SYSCALLS.items() if nums[col] is not None}
    prog: list[tuple] = []       # (code, k, jt, jf); jt/jf are labels (str) or 0

    def op(code, k=0, jt=0, jf=0):
        prog.append((code, k, jt, jf))

    def label(name):
        prog.append(("label", name))

    op(_LD_ABS, _ARCH)
    op(_JEQ, audit_arch, 0, "foreign")
    op(_LD_ABS, _NR)
    if arch == "x86_64":
        op(_JGE, X32_BIT, "enosys", 0)
    for name in DENIED:
        if name in nr:
            op(_JEQ, nr[name], "eperm", 0)
    for name in ENOSYS_CALLS:
        if name in nr:
            op(_JEQ, nr[name], "enosys", 0)
    for name in ("clone", "unshare"):
        op(_JEQ, nr[name], 0, f"{name}-end")
        op(_LD_ABS, _arg(0))
        op(_JSET, NAMESPACE_FLAGS, "eperm", 0)
        op(_LD_ABS, _NR)
        label(f"{name}-end")
    for name, idx in (("dup2", 1), ("dup3", 1), ("close", 0)):
        if name in nr:
            op(_JEQ, nr[name], 0, f"{name}-end")
            op(_LD_ABS, _arg(idx))
            op(_JEQ, channel_fd, "eperm", 0)
            op(_LD_ABS, _NR)
            label(f"{name}-end")
    op(_JEQ, nr["close_range"], 0, "allow")     # close_range(first, last): refused when first <= fd <= last
    op(_LD_ABS, _arg(0))
    op(_JGT, channel_fd, "allow", 0)
    op(_LD_ABS, _arg(1))
    op(_JGE, channel_fd, "eperm", "allow")
    label("allow")
    op(_RET, RET_ALLOW)
    label("eperm")
    op(_RET, RET_ERRNO | EPERM)
    label("enosys")
    op(_RET, RET_ERRNO | ENOSYS)
    label("foreign")
    op(_RET, RET_ERRNO | ENOSYS)
    return _assemble(prog)


def _assemble(prog: list[tuple]) -> bytes:
    where, pc = {}, 0
    for item in prog:
        if item[0] == "label":
            where[item[1]] = pc
        else:
            pc += 1
    out, pc = [], 0
    for item in prog:
        if item[0] == "label":
            continue
        code, k, jt, jf = item
        offs = []
        for target in (jt, jf):
            off = where[target] - pc - 1 if isinstance(target, str) else target
            if not 0 <= off <= 255:
                raise ValueError(f"seccomp program: jump out of range at {pc}")
            offs.append(off)
        out.append(struct.pack("<HBBI", code, offs[0], offs[1], k))
        pc += 1
    return b"".join(out)


def docker_profile(channel_fd: int = CHANNEL_FD) -> str:
    """The same rules as a Docker seccomp profile (JSON for `security_opt=["seccomp=..."]`): everything not
    named is allowed (Docker's default profile is an allow-list; the calls it refuses that matter here are all
    listed), and mount/umount2 stay allowed for the harness's own wrapper - the kernel refuses them to any
    process without CAP_SYS_ADMIN, which the code under test never holds."""
    deny = [n for n in DENIED if n not in DOCKER_ALLOWED]
    rules = [
        {"names": deny, "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM},
        {"names": list(ENOSYS_CALLS), "action": "SCMP_ACT_ERRNO", "errnoRet": ENOSYS},
        {"names": ["clone", "unshare"], "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM,
         "args": [{"index": 0, "value": CLONE_NEWUSER, "valueTwo": CLONE_NEWUSER, "op": "SCMP_CMP_MASKED_EQ"}]},
        {"names": ["dup2", "dup3"], "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM,
         "args": [{"index": 1, "value": channel_fd, "op": "SCMP_CMP_EQ"}]},
        {"names": ["close"], "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM,
         "args": [{"index": 0, "value": channel_fd, "op": "SCMP_CMP_EQ"}]},
        {"names": ["close_range"], "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM,
         "args": [{"index": 0, "value": channel_fd, "op": "SCMP_CMP_LE"},
                  {"index": 1, "value": channel_fd, "op": "SCMP_CMP_GE"}]},
    ]
    return json.dumps({"defaultAction": "SCMP_ACT_ALLOW",
                       "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32", "SCMP_ARCH_AARCH64",
                                         "SCMP_ARCH_ARM"],
                       "syscalls": rules})


# ---- native modules ---------------------------------------------------------------------------------------
def _ffi_name(name: str, dynload: bool) -> bool:
    if not name.endswith(".so"):
        return False
    mod = name.split(".", 1)[0]
    return mod in FFI_MODULES or (dynload and mod in NATIVE_DYNLOAD)


_LAYOUTS = ("lib*/python3*", "local/lib*/python3*", "envs/*/lib*/python3*")


@lru_cache(maxsize=64)
def ffi_files(roots: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(native modules to hide, ctypes packages to replace) of every Python installation under `roots`
    (prefixes such as /usr, a venv, a pyenv version, a conda tree): lib-dynload, site-packages, dist-packages."""
    hidden: set[str] = set()
    packages: set[str] = set()
    for root in roots:
        for layout in _LAYOUTS:
            for lib in glob.glob(os.path.join(root, layout)):
                init = os.path.join(lib, "ctypes", "__init__.py")
                if os.path.isfile(init):
                    packages.add(init)
                for sub, dynload in (("lib-dynload", True), ("site-packages", False)):
                    hidden.update(_native(os.path.join(lib, sub), dynload))
        hidden.update(_native(os.path.join(root, "lib", "python3", "dist-packages"), False))
    return tuple(sorted(hidden)), tuple(sorted(packages))


def _native(d: str, dynload: bool) -> list[str]:
    try:
        names = os.listdir(d)
    except OSError:
        return []
    return [os.path.join(d, n) for n in names if _ffi_name(n, dynload) and os.path.isfile(os.path.join(d, n))]


# (for Docker: the same two lists from the image; a ctypes package is printed with a leading "+")
FIND_FFI_SCRIPT = (
    "find / -xdev \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o -type f "
    "-path '*/python3*/ctypes/__init__.py' -printf '+%p\\n' -o -type f \\( "
    + " -o ".join(f"-name '{m}.*so'" for m in FFI_MODULES)
    + " -o \\( -path '*/lib-dynload/*' \\( "
    + " -o ".join(f"-name '{m}.*so'" for m in NATIVE_DYNLOAD)
    + " \\) \\) \\) -print 2>/dev/null; echo EXECCRITIC-FFI-END\n")
