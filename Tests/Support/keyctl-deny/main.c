// keyctl-deny: run a command with the kernel keyring refused, as a hostile
// container would refuse it. It installs a seccomp BPF filter that makes the
// add_key, keyctl and request_key system calls fail with EPERM (or the errno
// chosen with --errno=ENOSYS|EPERM|EACCES; Docker's default profile answers
// EPERM, a kernel built without CONFIG_KEYS answers ENOSYS), sets
// PR_SET_NO_NEW_PRIVS so no privilege is needed, and then execvp()s the
// command, which inherits the filter along with every process it starts.
// Every other system call is allowed. KernelKeyring's tests use it to prove
// that a refused keyring is reported as `unavailable`; the hostile-environment
// suite reuses it to run whole programs (dpctl, test binaries) under the same
// refusal. Usage: keyctl-deny [--errno=NAME] command [argument...]; exit status
// 125 if the filter cannot be installed, 127 if the command cannot be run.
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define DENY_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define DENY_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "keyctl-deny knows the syscall ABI of x86_64 and aarch64 only"
#endif

// x32 system calls on x86_64 carry this bit; masking it off denies them too.
#define DENY_X32_SYSCALL_BIT 0x40000000u

static int parse_errno(const char *name) {
    if (strcmp(name, "EPERM") == 0) return EPERM;
    if (strcmp(name, "EACCES") == 0) return EACCES;
    if (strcmp(name, "ENOSYS") == 0) return ENOSYS;
    return -1;
}

static int install_filter(int error) {
    struct sock_filter filter[] = {
        // A foreign ABI could reach the same calls under other numbers: refuse it outright.
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, DENY_AUDIT_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_STMT(BPF_ALU | BPF_AND | BPF_K, ~DENY_X32_SYSCALL_BIT),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_add_key, 3, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_keyctl, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_request_key, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)error & SECCOMP_RET_DATA)),
    };
    struct sock_fprog program = {
        .len = (unsigned short)(sizeof filter / sizeof filter[0]),
        .filter = filter,
    };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program);
}

int main(int argc, char **argv) {
    int error = EPERM;
    int first = 1;
    if (first < argc && strncmp(argv[first], "--errno=", 8) == 0) {
        error = parse_errno(argv[first] + 8);
        if (error < 0) {
            fprintf(stderr, "keyctl-deny: error: unknown errno '%s'\n"
                            "keyctl-deny: hint: use --errno=EPERM, --errno=EACCES or --errno=ENOSYS\n",
                    argv[first] + 8);
            return 125;
        }
        first += 1;
    }
    if (first >= argc) {
        fprintf(stderr, "usage: keyctl-deny [--errno=EPERM|EACCES|ENOSYS] command [argument...]\n");
        return 125;
    }
    if (install_filter(error) != 0) {
        fprintf(stderr, "keyctl-deny: error: cannot install the seccomp filter: %s\n", strerror(errno));
        return 125;
    }
    execvp(argv[first], argv + first);
    fprintf(stderr, "keyctl-deny: error: cannot run '%s': %s\n", argv[first], strerror(errno));
    return 127;
}
