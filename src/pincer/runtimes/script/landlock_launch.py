"""The in-process launcher of the Landlock backend: restrict this process, then exec the command.

This file is not imported by pincer: its source is passed to a system ``python3 -I -S -c`` (the
sandbox uid cannot read pincer's own virtualenv, and nothing of the host's Python setup should be
loaded). It uses only the standard library and must stay self-contained.

``sys.argv`` is ``["-c", CONFIG_JSON, *COMMAND]``. CONFIG holds: ``uid``/``gid`` (drop to them when
still root), ``nofile``, ``cwd``, ``env`` (the command's whole environment), ``ro``/``rw``/``dev``
(paths to allow), ``deny_net`` (restrict TCP bind/connect where the ABI can), ``bpf`` (the seccomp
program, hex), ``parent`` (pincer's pid: if it is gone by the time the parent-death signal is set,
stop), ``tmpfs`` (``[path, size, uid, gid]`` lists: as root, a private mount namespace gets a
tmpfs of that size on each path, so the kernel bounds what the run writes there). Every step either
succeeds or the launcher exits 126 with ``pincer-landlock: ...`` on stderr: the command is never
exec'd half-restricted.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import sys

SYS_LANDLOCK_CREATE_RULESET = 444  # the same number on every architecture (generic table)
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_REC, MS_SLAVE = 2, 4, 1 << 14, 1 << 19
PR_SET_PDEATHSIG = 1
PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2
SIGKILL = 9
# Not ``typing.TYPE_CHECKING``: importing typing would cost every sandboxed run a few milliseconds
# for names only the type checker reads (mypy treats any name TYPE_CHECKING as true).
TYPE_CHECKING = False

# Filesystem access rights, by the ABI that introduced them.
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1}
FS_LATEST = (1 << 16) - 1  # ABI 5 and later (IOCTL_DEV)
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # the only rights a non-directory takes
RO = EXECUTE | READ_FILE | READ_DIR
DEV = READ_FILE | WRITE_FILE | TRUNCATE
RW_DENIED = MAKE_CHAR | MAKE_BLOCK


if TYPE_CHECKING:
    from typing import TypedDict

    class Config(TypedDict):
        """CONFIG as ``backends.LandlockBackend`` writes it (JSON: tuples arrive as lists)."""

        uid: int | None
        gid: int | None
        nofile: int
        cwd: str
        env: dict[str, str]
        ro: list[str]
        dev: list[str]
        rw: list[str]
        deny_net: bool
        bpf: str
        tmpfs: list[tuple[str, int, int, int]]
        parent: int


class RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class Failed(Exception):
    pass


libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def check(result: int, step: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise Failed(f"{step}: {os.strerror(err)} (errno {err})")
    return result


def private_tmpfs(cfg: Config) -> None:
    mounts = cfg.get("tmpfs") or []
    if not mounts:
        return
    if os.geteuid() != 0:
        raise Failed("mounting a size-bounded tmpfs needs root")
    check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    # Slave, not private: the host's later mounts still appear here, ours never leave.
    check(libc.mount(b"none", b"/", None, MS_REC | MS_SLAVE, None), "making / a slave mount")
    for path, size, uid, gid in mounts:
        options = f"size={int(size)},mode=0700,uid={int(uid)},gid={int(gid)}".encode()
        check(libc.mount(b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options), f"mounting a tmpfs on {path}")


def drop_privileges(cfg: Config) -> None:
    uid, gid = cfg["uid"], cfg["gid"]
    if os.geteuid() != 0 or uid is None:
        return
    if gid is None:
        raise Failed("CONFIG names a uid to drop to but no gid")  # never run as root with root's group
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.geteuid() == 0 or os.getegid() == 0:
        raise Failed("dropping root did not take")


def landlock(cfg: Config) -> None:
    abi = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), LANDLOCK_CREATE_RULESET_VERSION)
    if abi < 1:
        raise Failed(f"Landlock is not available in this kernel ({os.strerror(ctypes.get_errno())})")
    handled = FS_BY_ABI.get(abi, FS_LATEST)
    attr = RulesetAttr(handled_access_fs=handled)
    size = 8
    if abi >= 4:
        size = 16
        if cfg["deny_net"]:
            attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP  # handled, and no port rule: all refused
    if abi >= 6:
        size = 24
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL  # no signals or abstract sockets outside
    ruleset = check(libc.syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0), "landlock_create_ruleset")
    rules = [(p, RO) for p in cfg["ro"]] + [(p, DEV) for p in cfg["dev"]] + [(p, handled & ~RW_DENIED) for p in cfg["rw"]]
    for path, access in rules:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            continue  # optional pieces (/lib64, /etc/pki, ...) that this host does not have
        try:
            is_dir = os.path.isdir(f"/proc/self/fd/{fd}")
            allowed = access & handled & (~0 if is_dir else FILE_RIGHTS)
            rule = PathBeneathAttr(allowed_access=allowed, parent_fd=fd)
            check(libc.syscall(SYS_LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH, ctypes.byref(rule), 0), f"landlock_add_rule {path}")
        finally:
            os.close(fd)
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    check(libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
    os.close(ruleset)


def seccomp(cfg: Config) -> None:
    program = bytes.fromhex(cfg["bpf"])
    buffer = ctypes.create_string_buffer(program, len(program))
    prog = SockFprog(len=len(program) // 8, filter=ctypes.cast(buffer, ctypes.c_void_p))
    check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "seccomp filter")


def main() -> None:
    cfg: Config = json.loads(sys.argv[1])
    argv = sys.argv[2:]
    try:
        _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        nofile = cfg["nofile"] if hard == resource.RLIM_INFINITY else min(cfg["nofile"], hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        private_tmpfs(cfg)
        drop_privileges(cfg)
        # After the uid change, which would clear it; kept across the exec below.
        check(libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
        if cfg.get("parent") is not None and os.getppid() != cfg["parent"]:
            raise Failed("pincer exited before the sandbox was set up")  # too late for the signal
        os.chdir(cfg["cwd"])
        landlock(cfg)
        seccomp(cfg)
    except (Failed, OSError, ValueError) as exc:
        sys.stderr.write(f"pincer-landlock: {exc}\n")
        sys.stderr.flush()
        os._exit(126)
    try:
        os.execvpe(argv[0], argv, cfg["env"])
    except OSError as exc:
        sys.stderr.write(f"pincer-landlock: cannot run {argv[0]}: {exc.strerror}\n")
        sys.stderr.flush()
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)


if __name__ == "__main__":
    main()
