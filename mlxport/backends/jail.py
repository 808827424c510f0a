"""What a sandboxed process applies to itself before untrusted code runs: resource limits, a
Landlock ruleset (the filesystem paths it may read and write, no TCP, no signals or abstract
sockets outside its own domain, no ptrace of any process outside it) and a seccomp allowlist of
the system calls its kind of process needs (libseccomp, through ctypes).

The standard library only: a worker imports it, and a compiler's launcher runs this file as a
script (``python -I -S jail.py SPEC -- argv...``), which confines itself and then runs ``argv``.
confine.py builds the sandbox around it (namespaces through bubblewrap, the environment).
docs/security.md says what each layer prevents and what is left without it.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import json
import os
import resource
import sys

LINUX = sys.platform.startswith("linux")

# ---------------------------------------------------------------- limits


def set_limits(
    *, memory: int = 0, cpu: int = 0, fsize: int = 0, nofile: int = 0, nproc: int = 0
) -> None:
    """Hard limits (a process cannot raise them back) for what is given; no core dumps ever."""
    wanted = [
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_AS, memory, memory),
        (resource.RLIMIT_CPU, cpu, cpu + 5),  # SIGXCPU at the soft limit, SIGKILL 5 s later
        (resource.RLIMIT_FSIZE, fsize, fsize),
        (resource.RLIMIT_NOFILE, nofile, nofile),
    ]
    if nproc and hasattr(resource, "RLIMIT_NPROC"):
        wanted.append((resource.RLIMIT_NPROC, nproc, nproc))
    for limit, soft, hard in wanted:
        if limit != resource.RLIMIT_CORE and not soft:
            continue
        with contextlib.suppress(ValueError, OSError):
            _, old = resource.getrlimit(limit)
            if old != resource.RLIM_INFINITY:
                soft, hard = min(soft, old), min(hard, old)
            resource.setrlimit(limit, (soft, hard))


# ---------------------------------------------------------------- Landlock

_SYS_CREATE, _SYS_ADD, _SYS_RESTRICT = 444, 445, 446  # the same on x86-64 and arm64
_FS_EXECUTE, _FS_WRITE, _FS_READ, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FILE_ONLY = _FS_EXECUTE | _FS_WRITE | _FS_READ | _FS_TRUNCATE | _FS_IOCTL_DEV
_READ = _FS_EXECUTE | _FS_READ | _FS_READ_DIR
# what the devices every process uses need (null, zero, urandom): reading, writing, isatty()
_DEVICE = _FS_READ | _FS_WRITE | _FS_IOCTL_DEV
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return libc


def landlock_abi() -> int:
    """The Landlock ABI this kernel offers (0: none: not Linux, too old, or not enabled)."""
    if not LINUX:
        return 0
    libc = _libc()
    abi = libc.syscall(_SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(int(abi), 0)


def _fs_rights(abi: int) -> int:
    rights = (1 << 13) - 1  # ABI 1: execute .. make_sym
    if abi >= 2:
        rights |= _FS_REFER
    if abi >= 3:
        rights |= _FS_TRUNCATE
    if abi >= 5:
        rights |= _FS_IOCTL_DEV
    return rights


def landlock(reads: list[str], writes: list[str], devices: list[str] = ()) -> str:
    """Restrict this process (and what it starts) to reading ``reads``, reading and writing
    ``writes`` and the usual devices (and ``devices``: a GPU's); with ABI 4, no TCP bind or
    connect; with ABI 6, no signal to and no abstract socket of a process outside this domain.
    Landlock also stops ptrace, and so /proc/PID/mem and /proc/PID/environ, of any process outside
    it, whatever its owner. What is in force, in words."""
    abi = landlock_abi()
    if abi <= 0:
        return "landlock: unavailable (" + ("not Linux" if not LINUX else "kernel has none") + ")"
    libc = _libc()
    fs = _fs_rights(abi)
    attr = _RulesetAttr(fs, 0, 0)
    size = ctypes.sizeof(_RulesetAttr)
    if abi >= 4:
        attr.handled_access_net = 0b11  # bind_tcp, connect_tcp: no rule allows either
    else:
        size = 8
    if abi >= 6:
        attr.scoped = 0b11  # abstract unix sockets, signals
    else:
        size = min(size, 16)
    fd = libc.syscall(_SYS_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        return f"landlock: unavailable (ruleset refused: {os.strerror(ctypes.get_errno())})"
    try:
        rules = [(p, _READ) for p in reads] + [(p, fs) for p in writes]
        rules += [(p, _DEVICE) for p in DEVICES] + [(p, _DEVICE | _FS_READ_DIR) for p in devices]
        for path, rights in rules:
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # not here: nothing to allow
            try:
                if not os.path.isdir(path):
                    rights &= _FILE_ONLY
                rule = _PathBeneath(rights & fs, pfd)
                if libc.syscall(_SYS_ADD, fd, 1, ctypes.byref(rule), 0) != 0:
                    err = os.strerror(ctypes.get_errno())
                    return f"landlock: unavailable (rule for {path} refused: {err})"
            finally:
                os.close(pfd)
        libc.prctl(38, 1, 0, 0)  # PR_SET_NO_NEW_PRIVS, which restrict_self needs
        if libc.syscall(_SYS_RESTRICT, fd, 0) != 0:
            return f"landlock: unavailable (not applied: {os.strerror(ctypes.get_errno())})"
    finally:
        os.close(fd)
    what = ["files: read only what is needed, write only its own folder"]
    what.append("no TCP" if abi >= 4 else "TCP not covered (ABI < 4)")
    what.append("no signals out" if abi >= 6 else "signals not scoped (ABI < 6)")
    return f"landlock ABI {abi}: " + ", ".join(what) + ", no ptrace out"


# ---------------------------------------------------------------- seccomp

_ALLOW = 0x7FFF0000
_EQ, _MASKED_EQ = 4, 7


def _errno_action(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


def _words(text: str) -> list[str]:
    return text.split()


# What a Python worker running kernels needs after its imports: memory, files it already may
# open, threads (clone with CLONE_THREAD only), time, signals to itself, polling its pipes.
WORKER_CALLS = _words("""
read write readv writev pread64 pwrite64 preadv pwritev preadv2 pwritev2 lseek close close_range
openat open creat stat fstat lstat newfstatat statx access faccessat faccessat2 readlink
readlinkat getdents getdents64 fcntl dup dup2 dup3 pipe pipe2 flock fsync fdatasync ftruncate
fadvise64 readahead mkdir mkdirat unlink unlinkat rmdir rename renameat renameat2 getcwd chdir
fchdir umask
mmap munmap mprotect mremap madvise brk msync mincore mlock munlock mlock2 membarrier
pkey_mprotect pkey_alloc pkey_free mbind get_mempolicy set_mempolicy set_mempolicy_home_node
futex futex_waitv set_robust_list get_robust_list rseq set_tid_address exit exit_group gettid
getpid getppid getuid geteuid getgid getegid getgroups getresuid getresgid getpgrp getpgid
getsid sched_yield sched_getaffinity sched_getparam sched_getscheduler sched_get_priority_max
sched_get_priority_min getcpu getpriority getrlimit getrusage times sysinfo uname
nanosleep clock_nanosleep clock_gettime clock_getres gettimeofday time
rt_sigaction rt_sigprocmask rt_sigreturn rt_sigsuspend rt_sigpending rt_sigtimedwait sigaltstack
restart_syscall
poll ppoll select pselect6 epoll_create epoll_create1 epoll_ctl epoll_wait epoll_pwait
epoll_pwait2 eventfd eventfd2 getrandom wait4 waitid arch_prctl
""")
# A compiler's driver starts its passes (cc1plus, as, ld) and raises its stack limit.
COMPILER_CALLS = WORKER_CALLS + _words("""
fork vfork execve execveat kill tkill tgkill chmod fchmod fchmodat fchmodat2 utimensat setpgid
setrlimit symlink symlinkat link linkat
""")
# Never, for any profile: other processes' memory, the kernel's attack surface, privileges.
DANGEROUS = _words("""
ptrace process_vm_readv process_vm_writev process_madvise process_mrelease pidfd_open pidfd_getfd
pidfd_send_signal kcmp perf_event_open bpf userfaultfd io_uring_setup io_uring_enter
io_uring_register keyctl add_key request_key mount umount2 move_mount fsopen fsconfig fsmount
fspick open_tree mount_setattr pivot_root chroot unshare setns name_to_handle_at
open_by_handle_at init_module finit_module delete_module kexec_load kexec_file_load reboot
swapon swapoff syslog acct quotactl quotactl_fd lookup_dcookie migrate_pages move_pages
memfd_secret fanotify_init setuid setgid setreuid setregid setresuid setresgid setfsuid setfsgid
setgroups capset personality vhangup iopl ioperm modify_ldt uselib ustat sysfs nfsservctl
settimeofday clock_settime clock_adjtime adjtimex sethostname setdomainname
""")
# prctl options a worker's libraries use: naming threads and memory, reading its own state
_PRCTL = (2, 3, 15, 16, 21, 23, 30, 38, 39, 0x53564D41)
# ioctl requests: isatty (TCGETS), the terminal size, FIONREAD, FIONBIO, FIOCLEX, FIONCLEX
_IOCTL = (0x5401, 0x5413, 0x541B, 0x5421, 0x5450, 0x5451)
_CLONE_THREAD = 0x00010000
_CLONE_NAMESPACES = 0x7E020000  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET


def _libseccomp() -> ctypes.CDLL | None:
    if not LINUX:
        return None
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    ]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


class _Filter:
    def __init__(self, lib: ctypes.CDLL, default: int):
        self.lib = lib
        self.ctx = lib.seccomp_init(default)

    def nr(self, name: str) -> int:
        return self.lib.seccomp_syscall_resolve_name(name.encode())

    def add(self, action: int, name: str, *cmps: tuple[int, int, int, int]) -> None:
        nr = self.nr(name)
        if nr < 0:
            return  # not on this architecture
        array = (_ArgCmp * max(len(cmps), 1))(*[_ArgCmp(*c) for c in cmps])
        if self.lib.seccomp_rule_add_array(self.ctx, action, nr, len(cmps), array) != 0:
            raise OSError(f"the rule for {name} was refused")


def seccomp(profile: str, pid: int | None = None) -> str:
    """Load the seccomp filter of ``profile`` into this process (no_new_privs first):

    - ``worker``: an allowlist (WORKER_CALLS); anything else fails with EPERM. Threads but no
      processes (clone only with CLONE_THREAD; clone3 answers ENOSYS so the C library falls back
      to clone), no exec; kill and tgkill only to this process; prctl and ioctl only for the few
      requests above; no sockets.
    - ``compiler``: the allowlist plus starting processes and exec (a compiler driver runs its
      passes), without new namespaces.
    - ``gpu``: everything but DANGEROUS, fork, vfork, exec and clone without CLONE_THREAD (a GPU
      driver's calls are not enumerated).
    """
    lib = _libseccomp()
    if lib is None:
        return (
            "seccomp: unavailable (libseccomp.so.2 not found)"
            if LINUX
            else f"seccomp: unavailable on {sys.platform}"
        )
    pid = os.getpid() if pid is None else pid
    eperm = _errno_action(errno.EPERM)
    allowlist = profile in ("worker", "compiler")
    f = _Filter(lib, eperm if allowlist else _ALLOW)
    if not f.ctx:
        return "seccomp: unavailable (seccomp_init failed)"
    try:
        if allowlist:
            calls = COMPILER_CALLS if profile == "compiler" else WORKER_CALLS
            for name in calls:
                if name in ("kill", "tgkill", "tkill", "arch_prctl"):
                    continue
                f.add(_ALLOW, name)
            if profile == "compiler":
                for name in ("kill", "tkill", "tgkill", "arch_prctl"):
                    f.add(_ALLOW, name)
                f.add(_ALLOW, "clone", (0, _MASKED_EQ, _CLONE_NAMESPACES, 0))
            else:
                f.add(_ALLOW, "clone", (0, _MASKED_EQ, _CLONE_THREAD, _CLONE_THREAD))
                for target in (0, pid):  # itself, its process group (the watchdog)
                    f.add(_ALLOW, "kill", (0, _EQ, target, 0))
                f.add(_ALLOW, "tgkill", (0, _EQ, pid, 0))
                f.add(_ALLOW, "arch_prctl")
            f.add(_errno_action(errno.ENOSYS), "clone3")
            for option in _PRCTL:
                f.add(_ALLOW, "prctl", (0, _EQ, option, 0))
            for request in _IOCTL:
                f.add(_ALLOW, "ioctl", (1, _MASKED_EQ, 0xFFFFFFFF, request))
            f.add(_ALLOW, "prlimit64", (0, _EQ, 0, 0))  # its own limits (never above the hard)
        else:
            for name in (*DANGEROUS, "fork", "vfork", "execve", "execveat"):
                f.add(eperm, name)
            f.add(eperm, "clone", (0, _MASKED_EQ, _CLONE_THREAD, 0))
            f.add(_errno_action(errno.ENOSYS), "clone3")
        if lib.seccomp_load(f.ctx) != 0:  # sets no_new_privs first (libseccomp's default)
            return "seccomp: unavailable (the kernel refused the filter)"
    except OSError as e:
        return f"seccomp: unavailable ({e})"
    finally:
        lib.seccomp_release(f.ctx)
    if profile == "worker":
        return f"seccomp: allowlist of {len(WORKER_CALLS)} calls; no fork, no exec, no sockets"
    if profile == "compiler":
        return f"seccomp: allowlist of {len(COMPILER_CALLS)} calls (a compiler's passes)"
    return f"seccomp: denylist of {len(DANGEROUS) + 4} calls; no fork, no exec"


# ---------------------------------------------------------------- the compiler's launcher


def confine(spec: dict) -> list[str]:
    """Apply ``spec`` (limits, Landlock paths, seccomp profile) to this process."""
    set_limits(
        memory=spec.get("memory", 0),
        cpu=spec.get("cpu", 0),
        fsize=spec.get("fsize", 0),
        nofile=spec.get("nofile", 0),
    )
    layers = []
    if spec.get("landlock", True):
        layers.append(landlock(spec.get("reads", []), spec.get("writes", []), spec.get("devices")))
    if spec.get("seccomp"):
        layers.append(seccomp(spec["seccomp"]))
    return layers


def main(argv: list[str]) -> None:
    """``jail.py SPEC -- COMMAND...``: confine this process as SPEC (JSON) says, then exec."""
    spec = json.loads(argv[1])
    command = argv[argv.index("--") + 1 :]
    layers = confine(spec)
    if spec.get("strict"):
        missing = [line for line in layers if "unavailable" in line]
        if missing:
            sys.stderr.write("mlxport sandbox: " + "; ".join(missing) + "\n")
            os._exit(125)
    try:
        os.execvp(command[0], command)
    except OSError as e:
        sys.stderr.write(f"mlxport sandbox: cannot run {command[0]}: {e}\n")
        os._exit(127)


if __name__ == "__main__":
    main(sys.argv)
