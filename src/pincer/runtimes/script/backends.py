"""The ways a command can be isolated: bubblewrap, a container engine, Landlock + seccomp + rlimits
(no namespaces), or (main session only) none.

Each backend turns a :class:`RunRequest` into a :class:`Launch`; limits, output capture and the
tree kill are common (``process.py``), and so are the cgroups the launch joins.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pincer.core.errors import RuntimeUnavailable
from pincer.runtimes.script import seccomp
from pincer.runtimes.script.manifest import NetworkMode
from pincer.runtimes.script.process import DiskWatch, Launch, RunRequest

if TYPE_CHECKING:  # the launcher is passed as source text, never imported
    from pincer.runtimes.script.landlock_launch import Config as LandlockConfig

__all__ = [
    "Backend",
    "BwrapBackend",
    "ContainerBackend",
    "HostBackend",
    "LandlockBackend",
    "SANDBOX_PATH",
    "RELAY_PORT",
    "relay_interpreter",
]

logger = logging.getLogger(__name__)

SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
SANDBOX_HOME = "/work"
RELAY_PORT = 3128
RELAY_DIR = "/run/pincer"
ENGINE_KILL_TIMEOUT_S = 10.0
_RELAY_SOURCE = Path(__file__).with_name("relay.py")
# Read-only bits of /etc a program needs to resolve names, verify TLS and find libraries; nothing
# that names the host's users or holds its secrets.
_ETC_FILES = (
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/pki",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/alternatives",
    "/etc/mime.types",
)
_LANDLOCK_LAUNCHER = Path(__file__).with_name("landlock_launch.py").read_text()
# What the Landlock backend lets a command read (and execute): the system, the same pieces of /etc
# the bwrap path binds, and /proc (no pid namespace here: other processes' command lines are visible,
# their environments are not, since Landlock also scopes ptrace access).
_LANDLOCK_RO = ("/usr", "/bin", "/lib", "/lib64", "/lib32", "/libx32", "/sbin", *_ETC_FILES, "/proc")
_LANDLOCK_DEV = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
LANDLOCK_NOFILE = 1024
_PROXY_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy")


class Backend(Protocol):
    @property
    def name(self) -> str: ...  # read-only, so frozen dataclasses satisfy it

    def launch(self, request: RunRequest) -> Launch: ...


def relay_interpreter() -> str | None:
    """A python3 under /usr (so visible inside the sandbox) to run the allowlist relay, if any."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(candidate, os.X_OK):
            real = os.path.realpath(candidate)
            if real.startswith("/usr/"):
                return candidate
    return None


def _proxy_env() -> dict[str, str]:
    url = f"http://127.0.0.1:{RELAY_PORT}"
    env = dict.fromkeys(_PROXY_ENV, url)
    env["NO_PROXY"] = env["no_proxy"] = ""
    return env


@dataclass(frozen=True, kw_only=True, slots=True)
class BwrapBackend:
    """bubblewrap with every namespace unshared. When pincer runs as root, bwrap is started as the
    unprivileged ``uid``: ``--uid`` alone would leave the process host root inside a user
    namespace, still able to read root's files through the mounts.

    So bwrap runs as that uid, and nothing of pincer's own install may need to be reachable by
    path: pincer's virtualenv can sit under a directory the uid cannot traverse (a ``0700`` home or
    ``mktemp -d``). The binary is then a root-owned copy (:mod:`pincer.runtimes.script.binaries`,
    chosen by the detector), and the in-sandbox relay is handed over as a memfd that
    ``--ro-bind-data`` copies in."""

    bwrap: Path
    uid: int = 65534
    gid: int = 65534
    name: str = "bwrap"

    @property
    def drops_uid(self) -> bool:
        return os.geteuid() == 0

    def launch(self, request: RunRequest) -> Launch:
        args: list[str] = [
            str(self.bwrap),
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--die-with-parent",
            "--new-session",
            "--cap-drop", "ALL",
            "--uid", str(self.uid),
            "--gid", str(self.gid),
            "--hostname", "sandbox",
            "--clearenv",
        ]  # fmt: skip
        if request.network is NetworkMode.HOST:
            args.append("--share-net")
        env = {"PATH": SANDBOX_PATH, "HOME": SANDBOX_HOME, **request.env}
        argv = list(request.argv)
        if request.network is NetworkMode.ALLOWLIST:
            interpreter = relay_interpreter()
            if request.proxy_socket is None or interpreter is None:
                raise RuntimeUnavailable(
                    "network allowlist mode needs python3 under /usr for the in-sandbox relay",
                    hint="apt-get install python3-minimal, or use network none/host",
                )
            env.update(_proxy_env())
            relay = f"{RELAY_DIR}/relay.py"
            argv = [interpreter, "-I", "-S", relay, f"{RELAY_DIR}/proxy.sock", str(RELAY_PORT), "--", *argv]
        for name, value in env.items():
            args += ["--setenv", name, value]
        args += [
            "--ro-bind", "/usr", "/usr",
            "--symlink", "usr/bin", "/bin",
            "--symlink", "usr/lib", "/lib",
            "--symlink", "usr/lib64", "/lib64",
            "--symlink", "usr/sbin", "/sbin",
        ]  # fmt: skip
        for path in _ETC_FILES:
            args += ["--ro-bind-try", path, path]
        args += [
            "--proc", "/proc",
            "--dev", "/dev",
            "--size", str(request.limits.tmp_size_bytes), "--tmpfs", "/tmp",
        ]  # fmt: skip
        fds: list[int] = []
        try:
            if request.workdir_max_bytes is not None:
                # A fresh scratch /work is a tmpfs of that size inside the sandbox: the kernel
                # answers ENOSPC past it, nothing reaches the host disk, and its pages count against
                # the run's memory cgroup. The host-side workdir is not used.
                args += ["--size", str(request.workdir_max_bytes), "--tmpfs", SANDBOX_HOME]
            else:
                args += ["--bind", str(request.workdir), SANDBOX_HOME]
            # Extra mounts after /tmp and /work, or those would hide them.
            for mount in request.mounts:
                args += ["--bind" if mount.writable else "--ro-bind", str(mount.source), mount.target]
            if request.network is NetworkMode.ALLOWLIST and request.proxy_socket is not None:
                relay_fd = _memfd("pincer-relay", _RELAY_SOURCE.read_bytes())
                fds.append(relay_fd)
                args += ["--ro-bind-data", str(relay_fd), f"{RELAY_DIR}/relay.py"]
                args += ["--bind", str(request.proxy_socket), f"{RELAY_DIR}/proxy.sock"]
            seccomp_fd = seccomp.bpf_memfd()
            fds.append(seccomp_fd)
        except OSError as exc:
            for fd in fds:
                os.close(fd)
            raise RuntimeUnavailable(f"cannot prepare the sandbox: {exc}", hint="run `pincer sandbox doctor`") from exc
        args += ["--chdir", SANDBOX_HOME, "--remount-ro", "/", "--seccomp", str(seccomp_fd), "--", *argv]
        drop = self.drops_uid
        return Launch(
            argv=tuple(args),
            env={},  # bwrap's own pid 1 keeps the environment bwrap was started with
            backend=self.name,
            user=self.uid if drop else None,
            group=self.gid if drop else None,
            pass_fds=tuple(fds),
        )


def _memfd(name: str, data: bytes) -> int:
    """A readable fd holding ``data`` at offset 0, for bwrap's ``--*-data FD`` options (which consume it)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd


@dataclass(frozen=True, kw_only=True, slots=True)
class ContainerBackend:
    """docker or podman with a configured image. Killing the client does not stop a container, so
    the kill goes through the engine by name."""

    engine: Path
    image: str
    uid: int = 65534
    gid: int = 65534
    extra_args: tuple[str, ...] = ()
    name: str = "docker"

    def launch(self, request: RunRequest) -> Launch:
        if request.network is NetworkMode.ALLOWLIST:
            raise RuntimeUnavailable(
                "network allowlist mode is only available with the bwrap backend",
                hint='set the script backend to "bwrap", or use network none/host',
            )
        limits = request.limits
        container = f"pincer-{uuid.uuid4().hex[:16]}"
        args = [
            str(self.engine), "run", "--rm", "--name", container,
            "--network", "host" if request.network is NetworkMode.HOST else "none",
            "--read-only",
            "--tmpfs", f"/tmp:rw,nosuid,nodev,size={limits.tmp_size_bytes}",
            "--user", f"{self.uid}:{self.gid}",
            "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges",
            "--pids-limit", str(limits.pids),
            "--memory", str(limits.memory_bytes),
            "--memory-swap", str(limits.memory_bytes),
            "--ulimit", f"cpu={limits.cpu_s}:{limits.cpu_s + 1}",
            "--ulimit", f"fsize={limits.file_size_bytes}:{limits.file_size_bytes}",
            "--ulimit", "nofile=1024:1024",
            "--ulimit", f"nproc={limits.pids}:{limits.pids}",
            *(
                ["--tmpfs", f"{SANDBOX_HOME}:rw,nosuid,nodev,exec,size={request.workdir_max_bytes},mode=1777"]
                if request.workdir_max_bytes is not None
                else ["-v", f"{request.workdir}:{SANDBOX_HOME}:rw"]
            ),
            "-w", SANDBOX_HOME,
            "-e", f"HOME={SANDBOX_HOME}", "-e", f"PATH={SANDBOX_PATH}",
            *self.extra_args,
        ]  # fmt: skip
        for mount in request.mounts:
            args += ["-v", f"{mount.source}:{mount.target}:{'rw' if mount.writable else 'ro'}"]
        for name, value in request.env.items():
            args += ["-e", f"{name}={value}"]
        args += [self.image, *request.argv]
        engine_env = _engine_env()

        def kill() -> None:
            subprocess.run(
                [str(self.engine), "kill", container],
                env=engine_env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=ENGINE_KILL_TIMEOUT_S,
                check=False,
            )

        return Launch(argv=tuple(args), env=engine_env, backend=self.name, on_kill=kill)


def _engine_env() -> dict[str, str]:
    """What a container engine client needs to find its daemon; the container gets none of it."""
    keep = ("PATH", "HOME", "DOCKER_HOST", "DOCKER_CONFIG", "CONTAINER_HOST", "XDG_RUNTIME_DIR", "TMPDIR")
    return {k: v for k, v in os.environ.items() if k in keep}


@dataclass(frozen=True, kw_only=True, slots=True)
class HostBackend:
    """No isolation: the main session's tools when configured to run on the host. Limits, cgroups,
    the output caps, the timeout and the empty environment still apply; the network, the file
    system and the uid are the host's."""

    name: str = "host"

    def launch(self, request: RunRequest) -> Launch:
        if request.network is NetworkMode.ALLOWLIST:
            logger.info("host backend: the network allowlist is not enforced on the host")
        env: dict[str, str] = {"PATH": SANDBOX_PATH, "HOME": str(request.workdir), **request.env}
        watch = None if request.workdir_max_bytes is None else DiskWatch(path=request.workdir, max_bytes=request.workdir_max_bytes)
        return Launch(argv=tuple(request.argv), env=env, backend=self.name, cwd=request.workdir, watch=watch)


@dataclass(frozen=True, kw_only=True, slots=True)
class LandlockBackend:
    """Landlock + seccomp + rlimits, for Linux hosts where bubblewrap cannot create namespaces.

    The command is started through ``landlock_launch.py`` run by a system ``python3 -I -S``: after
    the common chain (cgroups joined, rlimits set) it sets ``nofile``, mounts the tmpfs below (as
    root), drops root to ``uid``, sets ``no_new_privs`` and the parent-death signal, applies a Landlock ruleset (read-only system,
    read-write workdir and a private tmp dir; TCP refused unless the network is ``host``; signals and
    abstract sockets scoped, ABI 6+) and the seccomp deny list (plus ``socket(AF_UNIX)`` always and
    ``socket(AF_INET*)`` when the network is ``none``), then execs the command with exactly the
    sandbox environment.

    Sizes: as root, the launcher unshares a private mount namespace (nothing else: the paths stay
    the host's) and mounts a tmpfs of ``workdir_max_bytes`` on the scratch workdir and one of
    ``tmp_size_bytes`` on the private tmp dir, so the kernel bounds both. Without root the scratch
    workdir is measured every 100 ms and the run killed past the cap (:class:`DiskWatch`, with
    RLIMIT_FSIZE no larger than the cap), and the tmp dir is bounded per file only.

    Weaker than bwrap: no pid namespace (the timeout kills through the cgroup and process group),
    no mount isolation (the workdir is its real path, not ``/work``; a mount must have
    ``target == source``; ``/tmp`` is a per-run directory named by ``TMPDIR``), no allowlist
    network mode."""

    interpreter: str
    scratch: Path
    uid: int = 65534
    gid: int = 65534
    name: str = "landlock"

    def launch(self, request: RunRequest) -> Launch:
        if request.network is NetworkMode.ALLOWLIST:
            raise RuntimeUnavailable(
                "network allowlist mode is only available with the bwrap backend (Landlock has no network "
                "namespace to route through the proxy)",
                hint='make bubblewrap work here (`pincer sandbox doctor`), or use network none/host',
            )
        extra_ro: list[str] = []
        extra_rw: list[str] = []
        for mount in request.mounts:
            if os.path.normpath(str(mount.source)) != os.path.normpath(mount.target):
                raise RuntimeUnavailable(
                    f"the landlock backend cannot show {mount.source} at {mount.target}: it has no mount namespace",
                    hint="set the mount's target equal to its source, or make bubblewrap work here",
                )
            (extra_rw if mount.writable else extra_ro).append(str(mount.source))
        deny_net = request.network is not NetworkMode.HOST
        # Before anything is created on disk. AF_UNIX is refused in every network mode: "host" means
        # the IP network, not the host's daemons (no allowlist mode here needs the relay's socket).
        program = seccomp.deny_list_bpf(deny_inet=deny_net, deny_unix=True).hex()
        drop = os.geteuid() == 0
        tmp = Path(tempfile.mkdtemp(prefix="tmp-", dir=self.scratch))
        if drop:
            os.chown(tmp, self.uid, self.gid)
        workdir = str(request.workdir.resolve())
        env = {"PATH": SANDBOX_PATH, "HOME": workdir, "TMPDIR": str(tmp), **request.env}
        tmpfs: list[tuple[str, int, int, int]] = []
        watch = None
        if drop:  # root may mount, in a mount namespace of the run's own
            if request.workdir_max_bytes is not None:
                tmpfs.append((workdir, request.workdir_max_bytes, self.uid, self.gid))
            tmpfs.append((str(tmp), request.limits.tmp_size_bytes, self.uid, self.gid))
        elif request.workdir_max_bytes is not None:
            watch = DiskWatch(path=request.workdir, max_bytes=request.workdir_max_bytes)
        config: LandlockConfig = {
            "uid": self.uid if drop else None,
            "gid": self.gid if drop else None,
            "nofile": LANDLOCK_NOFILE,
            "cwd": workdir,
            "env": env,
            "ro": [*_LANDLOCK_RO, *extra_ro],
            "dev": list(_LANDLOCK_DEV),
            "rw": [workdir, str(tmp), *extra_rw],
            "deny_net": deny_net,
            "bpf": program,
            "tmpfs": tmpfs,
            "parent": os.getpid(),  # the exec chain keeps the spawned pid, so it is the launcher's parent
        }
        argv = (self.interpreter, "-I", "-S", "-c", _LANDLOCK_LAUNCHER, json.dumps(config), *request.argv)
        return Launch(
            argv=argv,
            env={},  # the launcher execs the command with ``config["env"]`` only
            backend=self.name,
            cwd=request.workdir,
            # The launcher starts as root and drops to ``uid`` itself, after mounting the tmpfs.
            on_close=lambda: shutil.rmtree(tmp, ignore_errors=True),
            watch=watch,
        )


def which_engine(name: str, env: Mapping[str, str] | None = None) -> Path | None:
    found = shutil.which(name, path=(env or os.environ).get("PATH"))
    return Path(found) if found else None
