"""Inside the worker: build a private root, drop privileges, set limits, install seccomp.

This runs in the worker process itself, after ``unshare`` has put it in new
user, mount, pid, network, IPC and UTS namespaces and before any untrusted
code runs. It only uses the standard library (``ctypes`` for the syscalls
Python does not wrap), because the project's source is not visible once the
root has been switched.

Order matters: the root is built while the process still holds its
namespace capabilities, then every capability is dropped, ``no_new_privs`` is
set and the seccomp filter installed last, so nothing can undo the earlier
steps.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import resource
import struct
from collections.abc import Iterable
from pathlib import Path

_libc = ctypes.CDLL(None, use_errno=True)

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
PR_GET_SECCOMP = 21
PR_SET_PDEATHSIG = 1
SECCOMP_MODE_FILTER = 2
LINUX_CAPABILITY_VERSION_3 = 0x20080522

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000

CLONE_NEW_FLAGS = (
    0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
)

DENIED_SYSCALLS_X86_64 = {
    "socket": 41,
    "connect": 42,
    "bind": 49,
    "listen": 50,
    "accept": 43,
    "accept4": 288,
    "vhangup": 153,
    "pivot_root": 155,
    "chroot": 161,
    "acct": 163,
    "settimeofday": 164,
    "mount": 165,
    "umount2": 166,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "sethostname": 170,
    "setdomainname": 171,
    "iopl": 172,
    "ioperm": 173,
    "init_module": 175,
    "delete_module": 176,
    "quotactl": 179,
    "ptrace": 101,
    "kexec_load": 246,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "unshare": 272,
    "perf_event_open": 298,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "setns": 308,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "finit_module": 313,
    "kexec_file_load": 320,
    "bpf": 321,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
}
"""Syscalls a data-analysis snippet never needs: network, namespaces, mounts, tracing, kernel."""

WORKDIR = "/sandbox"
"""The worker's working folder inside its root: its only writable place (with /tmp)."""

CLONE_X86_64 = 56
KILL_X86_64 = 62
CLONE3_X86_64 = 435


class IsolationError(OSError):
    """A step of building the sandbox failed; the worker must not serve code."""


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        msg = f"{what}: {os.strerror(err)}"
        raise IsolationError(err, msg)


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    _check(
        _libc.mount(
            source.encode(),
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {source} -> {target}",
    )


def _bind(source: str, target: str, *, writable: bool = False) -> None:
    """Bind ``source`` at ``target``; read-only unless asked, never setuid or devices."""
    _mount(source, target, None, MS_BIND | MS_REC, None)
    flags = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV
    if not writable:
        flags |= MS_RDONLY
    _mount("none", target, None, flags, None)


def _mirror(root: Path, host_path: Path) -> Path:
    """Create ``host_path`` inside ``root`` (same kind: dir, file or symlink)."""
    inside = root / str(host_path).lstrip("/")
    inside.parent.mkdir(parents=True, exist_ok=True)
    if host_path.is_dir():
        inside.mkdir(exist_ok=True)
    else:
        inside.touch(exist_ok=True)
    return inside


def build_root(
    new_root: Path,
    *,
    read_only: Iterable[Path],
    work: Path,
    devices: Iterable[str] = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"),
) -> None:
    """Switch this process to a root that holds only what the worker needs.

    ``read_only`` folders (the interpreter, its libraries, the virtualenv) are
    bound read-only at their own paths so imports keep working; ``work`` is
    bound read-write at ``/sandbox``; ``/tmp`` is a small private tmpfs; ``/proc``
    is the new pid namespace's own. Top-level symlinks such as ``/lib ->
    usr/lib`` are recreated. The old root is detached, so nothing else of the
    host file system stays reachable.
    """
    _mount("none", "/", None, MS_REC | MS_PRIVATE, None)
    _mount("tmpfs", str(new_root), "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=0755")
    # The private /tmp comes first: a checkout or virtualenv that lives under
    # the host's /tmp is then bound inside it instead of being hidden by it.
    (new_root / "tmp").mkdir()
    _mount("tmpfs", str(new_root / "tmp"), "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777")
    for top in ("lib", "lib64", "lib32", "bin", "sbin"):
        host = Path("/") / top
        if host.is_symlink():
            (new_root / top).symlink_to(os.readlink(host))
    seen: set[str] = set()
    for folder in sorted(
        {p.resolve() for p in read_only if p.exists()}, key=lambda p: len(p.parts)
    ):
        if any(str(folder).startswith(s + "/") or str(folder) == s for s in seen):
            continue
        seen.add(str(folder))
        _bind(str(folder), str(_mirror(new_root, folder)))
    for dev in devices:
        if Path(dev).exists():
            _bind(dev, str(_mirror(new_root, Path(dev))), writable=True)
    inside_work = new_root / WORKDIR.lstrip("/")
    if inside_work.exists():
        msg = f"the sandbox folder {WORKDIR} clashes with a host folder bound into the sandbox"
        raise IsolationError(errno.EEXIST, msg)
    inside_work.mkdir()
    _bind(str(work), str(inside_work), writable=True)
    (new_root / "proc").mkdir()
    _mount("proc", str(new_root / "proc"), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    old = new_root / ".old-root"
    old.mkdir()
    _check(
        _libc.syscall(155, str(new_root).encode(), str(old).encode()),  # pivot_root
        "pivot_root",
    )
    os.chdir("/")
    _check(_libc.umount2(b"/.old-root", MNT_DETACH), "umount old root")
    os.rmdir("/.old-root")
    _mount("none", "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None)
    os.chdir(WORKDIR)


def drop_capabilities() -> None:
    """Empty the bounding, effective, permitted and inheritable capability sets."""
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
            _check(-1, f"drop capability {cap}")
    header = struct.pack("Ii", LINUX_CAPABILITY_VERSION_3, 0)
    data = bytes(24)
    _check(_libc.capset(header, data), "capset")


def set_limits(
    *,
    memory_bytes: int,
    cpu_seconds: int,
    processes: int,
    file_bytes: int,
    open_files: int = 512,
) -> None:
    """The floor under every mechanism: rlimits the kernel enforces on the worker.

    ``cpu_seconds`` is the worker's lifetime hard limit; each call lowers the
    soft limit to its own budget (see the worker).
    """
    limits = {
        resource.RLIMIT_AS: memory_bytes,
        resource.RLIMIT_CPU: cpu_seconds,
        resource.RLIMIT_NPROC: processes,
        resource.RLIMIT_FSIZE: file_bytes,
        resource.RLIMIT_NOFILE: open_files,
        resource.RLIMIT_CORE: 0,
    }
    for which, value in limits.items():
        resource.setrlimit(which, (value, value))


def seccomp_supported() -> bool:
    """Whether this kernel and architecture take our seccomp filter."""
    if platform.system() != "Linux" or platform.machine() not in {"x86_64", "AMD64"}:
        return False
    return _libc.prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0


def _ins(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)


def seccomp_program(denied: Iterable[int] | None = None) -> bytes:
    """A classic-BPF seccomp filter (x86_64): deny-list with ``EPERM``.

    Other architectures' calling conventions are killed outright (no i386 or
    x32 detour around the list); ``kill`` may not target a process group
    or every process (pid <= 0); ``clone`` may not create namespaces and
    ``clone3`` answers ``ENOSYS`` so libc falls back to the inspectable
    ``clone``.
    """
    ld_w_abs, ja, jeq, jge, jset, ret = 0x20, 0x05, 0x15, 0x35, 0x45, 0x06
    eperm = SECCOMP_RET_ERRNO | errno.EPERM
    nr_off, arch_off, arg0_off = 0, 4, 16
    prog = [
        _ins(ld_w_abs, 0, 0, arch_off),
        _ins(jeq, 1, 0, AUDIT_ARCH_X86_64),
        _ins(ret, 0, 0, SECCOMP_RET_KILL_PROCESS),
        _ins(ld_w_abs, 0, 0, nr_off),
        _ins(jge, 0, 1, X32_SYSCALL_BIT),
        _ins(ret, 0, 0, eperm),
        _ins(jeq, 0, 1, CLONE3_X86_64),
        _ins(ret, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS),
    ]
    for nr in sorted(set(DENIED_SYSCALLS_X86_64.values() if denied is None else denied)):
        prog += [_ins(jeq, 0, 1, nr), _ins(ret, 0, 0, eperm)]
    prog += [
        _ins(jeq, 0, 5, KILL_X86_64),
        _ins(ld_w_abs, 0, 0, arg0_off),
        _ins(jeq, 2, 0, 0),
        _ins(jset, 1, 0, 0x80000000),
        _ins(ja, 0, 0, 1),
        _ins(ret, 0, 0, eperm),
        _ins(ld_w_abs, 0, 0, nr_off),
        _ins(jeq, 0, 3, CLONE_X86_64),
        _ins(ld_w_abs, 0, 0, arg0_off),
        _ins(jset, 0, 1, CLONE_NEW_FLAGS),
        _ins(ret, 0, 0, eperm),
        _ins(ret, 0, 0, SECCOMP_RET_ALLOW),
    ]
    return b"".join(prog)


def install_seccomp() -> None:
    """Set ``no_new_privs`` and load the filter; irreversible for this process tree."""
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    program = seccomp_program()
    buf = ctypes.create_string_buffer(program)

    class SockFprog(ctypes.Structure):
        _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))

    fprog = SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    _check(
        _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0),
        "seccomp",
    )


def set_no_new_privs() -> None:
    """Forbid gaining privileges through exec (setuid binaries, file capabilities)."""
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
