"""The sandbox's seccomp filter: one deny-list, rendered for Docker (JSON) and for bwrap (BPF).

Docker before 25 lets io_uring through its default profile, and bwrap has no filter of its own,
so both backends load this one. It denies, on top of what dropping every capability already
stops: io_uring (ENOSYS, so runtimes fall back to plain I/O), new namespaces (`unshare`,
`setns`, `clone` with a CLONE_NEW* flag; `clone3` answers ENOSYS so libc falls back to `clone`,
whose flags a filter can see), mounts, ptrace and cross-process memory access, keyrings, bpf,
perf events, userfaultfd, module and kexec loading, and clock, swap and reboot calls. Everything
else is allowed: the other limits (no capabilities, an unprivileged uid, a read-only root, no
network) do the rest.

Numbers are x86_64's; the bwrap filter kills any other architecture's calls, so a 32-bit or x32
program cannot slip past it.
"""

from __future__ import annotations

import json
import struct

# x86_64 syscall numbers (asm/unistd_64.h).
DENIED = {
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
    "unshare": 272, "setns": 308,
    "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "open_tree": 428, "move_mount": 429,
    "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
    "keyctl": 250, "add_key": 248, "request_key": 249,
    "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "fanotify_init": 300,
    "kexec_load": 246, "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176,
    "open_by_handle_at": 304, "name_to_handle_at": 303, "quotactl": 179, "lookup_dcookie": 212,
    "swapon": 167, "swapoff": 168, "reboot": 169, "acct": 163, "vhangup": 153,
    "iopl": 172, "ioperm": 173, "settimeofday": 164, "clock_settime": 227, "adjtimex": 159,
    "clock_adjtime": 305, "uselib": 134, "ustat": 136, "sysfs": 139, "_sysctl": 156,
}  # fmt: skip
UNIMPLEMENTED = {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "clone3": 435}
CLONE = 56
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
CLONE_NEW_FLAGS = (0x20000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)

EPERM = 1
ENOSYS = 38


def docker_profile() -> str:
    """The filter as a Docker seccomp profile (the content `--security-opt seccomp=` takes)."""
    rules = [
        {"names": sorted(DENIED), "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM},
        {"names": sorted(UNIMPLEMENTED), "action": "SCMP_ACT_ERRNO", "errnoRet": ENOSYS},
    ]
    # Rules on one syscall are alternatives; arguments within one rule must all match.
    for flag in CLONE_NEW_FLAGS:
        rules.append(
            {
                "names": ["clone"],
                "action": "SCMP_ACT_ERRNO",
                "errnoRet": EPERM,
                "args": [{"index": 0, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}],
            }
        )
    profile = {
        "defaultAction": "SCMP_ACT_ALLOW",
        "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
        "syscalls": rules,
    }
    return json.dumps(profile)


# Classic BPF opcodes and seccomp return values (linux/filter.h, linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000
_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_BIT = 0x40000000


def bpf_program() -> bytes:
    """The filter as a classic BPF program for `bwrap --seccomp FD` (x86_64 only).

    Layout: check the architecture, refuse x32 numbers, one equality test per denied call
    jumping to a shared return, the clone flag test, allow.
    """
    denied = sorted(DENIED.values())
    missing = sorted(UNIMPLEMENTED.values())
    # After the tests: allow, eperm, enosys, then clone's block (load flags, test, eperm, allow).
    tests = len(denied) + len(missing) + 1
    program: list[tuple[int, int, int, int]] = [
        (_LD_W_ABS, 0, 0, 4),
        (_JEQ_K, 1, 0, _AUDIT_ARCH_X86_64),
        (_RET_K, 0, 0, _RET_KILL_PROCESS),
        (_LD_W_ABS, 0, 0, 0),
        (_JGE_K, 0, 1, _X32_BIT),
        (_RET_K, 0, 0, _RET_ERRNO | EPERM),
    ]
    first_test = len(program)
    eperm_at = first_test + tests + 1
    enosys_at = eperm_at + 1
    clone_at = enosys_at + 1

    def jump(to: int) -> int:
        offset = to - (len(program) + 1)
        if not 0 <= offset <= 255:
            raise ValueError("seccomp filter too long for 8-bit jumps")
        return offset

    for number in denied:
        program.append((_JEQ_K, jump(eperm_at), 0, number))
    for number in missing:
        program.append((_JEQ_K, jump(enosys_at), 0, number))
    program.append((_JEQ_K, jump(clone_at), 0, CLONE))
    program.append((_RET_K, 0, 0, _RET_ALLOW))
    program.append((_RET_K, 0, 0, _RET_ERRNO | EPERM))
    program.append((_RET_K, 0, 0, _RET_ERRNO | ENOSYS))
    mask = 0
    for flag in CLONE_NEW_FLAGS:
        mask |= flag
    # The low 32 bits of clone's first argument (little-endian) hold the flags.
    program.append((_LD_W_ABS, 0, 0, 16))
    program.append((_JSET_K, 0, 1, mask))
    program.append((_RET_K, 0, 0, _RET_ERRNO | EPERM))
    program.append((_RET_K, 0, 0, _RET_ALLOW))
    return b"".join(struct.pack("<HBBI", *instruction) for instruction in program)
