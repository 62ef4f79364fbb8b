// Translation of errno into KeyringError, done once at the boundary.
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#endif

/// Which system call an operation goes through (seccomp filters act per syscall).
enum KeyringSyscall: Sendable {
    case addKey
    case keyctl
}

/// What a failed call was about, for the error message.
struct KeyringSubject: Sendable {
    var key: KeySerial?
    var type: KeyType?
    var description: String?

    static func serial(_ key: KeySerial) -> KeyringSubject { KeyringSubject(key: key) }

    /// A call about no particular key (the availability probe).
    static let none = KeyringSubject()

    var isEmpty: Bool { key == nil && type == nil && description == nil }

    /// `user key 'dp:a' (123)`, `keyring @s`, `key 123`.
    var phrase: String {
        var words = type.map { $0 == .keyring ? "keyring" : "\($0.rawValue) key" } ?? "key"
        if let description { words += " '\(description)'" }
        if let key { words += description == nil ? " \(key)" : " (\(key))" }
        return words
    }
}

extension KeyringError.Code {
    /// The code for an errno, before the refusal probe is consulted.
    init(errno code: Int32) {
        switch code {
        case ENOKEY, ENOENT: self = .notFound
        case EACCES, EPERM: self = .permissionDenied
        case EKEYEXPIRED: self = .expired
        case EKEYREVOKED: self = .revoked
        case EDQUOT: self = .quotaExceeded
        case ENOSYS: self = .unavailable
        case EINVAL, ENOTDIR, ENODEV: self = .invalidArgument
        default: self = .io(code)
        }
    }
}

extension KeyringError {
    /// Translates a failed call's errno into an error; on EPERM/EACCES asks
    /// whether the syscall itself is refused (seccomp) and reports `unavailable` if so.
    static func translating(
        errno code: Int32, operation: String, syscall: KeyringSyscall, subject: KeyringSubject
    ) -> KeyringError {
        var kind = Code(errno: code)
        if kind == .permissionDenied, Keyring.refusal(of: syscall) != nil {
            kind = .unavailable
        }
        return KeyringError(
            code: kind, errno: code, operation: operation, key: subject.key,
            keyDescription: subject.description,
            message: message(code: kind, errno: code, operation: operation, subject: subject))
    }

    /// An error this module detects before calling the kernel (bad input).
    static func invalid(
        _ reason: String, operation: String, subject: KeyringSubject
    ) -> KeyringError {
        KeyringError(
            code: .invalidArgument, errno: 0, operation: operation, key: subject.key,
            keyDescription: subject.description,
            message: "\(operation) on \(subject.phrase): \(reason)")
    }

    static func message(
        code: Code, errno: Int32, operation: String, subject: KeyringSubject
    ) -> String {
        let on = subject.isEmpty ? "" : " on \(subject.phrase)"
        let head = "\(operation)\(on) failed (\(errnoName(errno)))"
        switch code {
        case .notFound:
            return "\(head): the key does not exist or is not reachable from that keyring; "
                + "add it again (for a class key: unlock the domain), or search the keyring it was linked into"
        case .permissionDenied:
            return "\(head): the key's permissions refuse this to the calling process "
                + "(a same-uid process that does not possess a default `user` key may only view it); "
                + "set permissions explicitly when adding (KeyPermissions.privateToOwner) "
                + "or reach the key through a keyring this process possesses"
        case .expired:
            return "\(head): the key's timeout elapsed; add the key again (for a class key: unlock the domain)"
        case .revoked:
            return "\(head): the key was revoked; add a new key"
        case .quotaExceeded:
            return "\(head): the uid's key quota is used up; unlink or invalidate keys no longer needed, "
                + "or raise /proc/sys/kernel/keys/maxkeys and maxbytes (root_maxkeys and root_maxbytes for root)"
        case .unavailable:
            let cause = errno == ENOSYS ? " (or the kernel lacks keys support)" : ""
            return "\(head): the kernel keyring is blocked for this process, e.g. by a container seccomp profile "
                + "that denies add_key/keyctl/request_key\(cause); allow those syscalls in the profile, "
                + "or choose the explicit in-process key store for single-process embedding"
        case .invalidArgument:
            return "\(head): the kernel rejected the arguments; check that the key type exists, that the description "
                + "is non-empty (a logon key needs a 'prefix:' description), that the payload fits the type "
                + "(user: at most 32767 bytes) and that the target is a keyring"
        case .bufferTooSmall(let required):
            return "\(operation)\(on): the payload is \(required) bytes, larger than the buffer; "
                + "pass a buffer of at least \(required) bytes"
        case .io(EOPNOTSUPP):
            return "\(head): the key's type does not allow this (a logon key can never be read back)"
        case .io:
            return "\(head): unexpected error from the kernel keyring"
        }
    }

    /// The symbolic name of the errnos the keyring returns, else `errno N`.
    static func errnoName(_ code: Int32) -> String {
        switch code {
        case 0: "no errno"
        case ENOKEY: "ENOKEY"
        case ENOENT: "ENOENT"
        case EACCES: "EACCES"
        case EPERM: "EPERM"
        case EKEYEXPIRED: "EKEYEXPIRED"
        case EKEYREVOKED: "EKEYREVOKED"
        case EKEYREJECTED: "EKEYREJECTED"
        case EDQUOT: "EDQUOT"
        case ENOSYS: "ENOSYS"
        case EINVAL: "EINVAL"
        case ENOTDIR: "ENOTDIR"
        case ENODEV: "ENODEV"
        case EOPNOTSUPP: "EOPNOTSUPP"
        case ENOMEM: "ENOMEM"
        case EFAULT: "EFAULT"
        case EDEADLK: "EDEADLK"
        case EAGAIN: "EAGAIN"
        default: "errno \(code)"
        }
    }
}
