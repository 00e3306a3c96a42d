"""The seccomp deny list every sandboxed command runs under, as a classic-BPF program.

The program is generated with libseccomp through the ``pyseccomp`` ctypes binding (libseccomp2 is
part of every Debian/Ubuntu base system), which gets the architecture checks right: a syscall made
through a foreign ABI (x32, i386 on x86_64) kills the process instead of slipping past the list.

Denied (EPERM, so programs see an ordinary permission error):

- ``ptrace``, ``process_vm_readv``/``writev``: reading or steering other processes;
- ``keyctl``, ``add_key``, ``request_key``: the kernel keyring is not namespaced;
- ``bpf``, ``perf_event_open``, ``userfaultfd``: large kernel attack surface;
- ``io_uring_*``: bypasses seccomp for the operations it queues;
- ``ioctl(TIOCSTI)`` and ``ioctl(TIOCLINUX)``: pushing keystrokes into a terminal outside;
- new user namespaces: ``unshare``/``clone`` with ``CLONE_NEWUSER``; ``clone3`` answers ENOSYS
  because its flags sit in memory a filter cannot read, and libc then falls back to ``clone``;
- module and kexec loading, ``open_by_handle_at`` (the classic container escape).
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import socket
import tempfile

from pincer.core.errors import RuntimeUnavailable

__all__ = ["DENIED_SYSCALLS", "deny_list_bpf", "seccomp_available", "bpf_memfd"]

logger = logging.getLogger(__name__)

DENIED_SYSCALLS: tuple[str, ...] = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "open_by_handle_at",
)

TIOCSTI = 0x5412
TIOCLINUX = 0x541C
CLONE_NEWUSER = 0x10000000
_IOCTL_CMD_MASK = 0xFFFFFFFF  # the request argument is an unsigned int in a 64-bit register


def seccomp_available() -> tuple[bool, str]:
    """Whether the deny list can be generated here, and why not."""
    try:
        deny_list_bpf()
    except RuntimeUnavailable as exc:
        return False, exc.message
    return True, "libseccomp via pyseccomp"


@functools.cache
def deny_list_bpf(*, deny_inet: bool = False, deny_unix: bool = False) -> bytes:
    """The deny list as raw ``struct sock_filter`` instructions, as ``bwrap --seccomp`` reads them.

    ``deny_inet`` also refuses ``socket(AF_INET/AF_INET6)``: the Landlock backend has no network
    namespace, and Landlock restricts at most TCP bind/connect (ABI 4+), never UDP or raw sockets.
    ``deny_unix`` refuses ``socket(AF_UNIX)``: without a mount namespace every pathname socket of
    the host (a daemon's 0777 control socket) is reachable by path, and Landlock does not govern
    ``connect``. ``socketpair`` stays allowed: its two ends reach nobody else."""
    try:
        import pyseccomp as sc
    except (ImportError, RuntimeError, OSError) as exc:
        raise RuntimeUnavailable(
            f"cannot build the seccomp deny list: {exc}",
            hint="install libseccomp2 (apt-get install libseccomp2) and the pyseccomp package",
        ) from exc
    try:
        flt = sc.SyscallFilter(defaction=sc.ALLOW)
        deny = sc.ERRNO(errno.EPERM)
        for name in DENIED_SYSCALLS:
            try:
                flt.add_rule(deny, name)
            except (OSError, ValueError, RuntimeError):
                # An old libseccomp may not know a recent syscall name; the rest still applies.
                logger.warning("seccomp: libseccomp does not know %s; not filtered", name)
        for request in (TIOCSTI, TIOCLINUX):
            flt.add_rule(deny, "ioctl", sc.Arg(1, sc.MASKED_EQ, _IOCTL_CMD_MASK, request))
        flt.add_rule(deny, "unshare", sc.Arg(0, sc.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))
        flt.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))
        flt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
        families = [socket.AF_INET, socket.AF_INET6] if deny_inet else []
        if deny_unix:
            families.append(socket.AF_UNIX)
        for family in families:
            flt.add_rule(deny, "socket", sc.Arg(0, sc.EQ, family))
        with tempfile.TemporaryFile() as fh:
            flt.export_bpf(fh)
            fh.seek(0)
            program = fh.read()
    except OSError as exc:
        raise RuntimeUnavailable(
            f"libseccomp failed to build the deny list: {exc}", hint="check the libseccomp2 version (2.5 or newer)"
        ) from exc
    if not program or len(program) % 8:
        raise RuntimeUnavailable("libseccomp produced an empty or malformed BPF program", hint="update libseccomp2")
    return program


def bpf_memfd() -> int:
    """A fresh readable fd holding the program at offset 0 (bwrap consumes the fd it is given)."""
    program = deny_list_bpf()
    fd = os.memfd_create("pincer-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd
