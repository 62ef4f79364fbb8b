import ProtectionCrypto

#if canImport(Glibc)
import Glibc
#endif

// How the library words a `ProtectionError` about a file: the path and the action, then the cause and the fix.
extension ProtectionError {
    /// The same error, re-attributed to `path` with the message prefixed as
    /// "unable to <action> '<path>': …" unless it already names a file.
    package func about(_ path: String, _ action: String) -> ProtectionError {
        guard self.path == nil else { return self }
        return ProtectionError(code, "unable to \(action) '\(path)': \(message)", path: path, underlying: underlying)
    }

    /// The same error told about `path` instead of a temporary file standing in for it:
    /// "unable to <action> '<path>': <reason>" (the cause stays in `underlying`).
    package func retargeted(_ path: String, _ action: String) -> ProtectionError {
        guard let p = self.path, p != path else { return self }
        var reason = message
        if let r = message.firstRange(of: "'\(p)': ") { reason = String(message[r.upperBound...]) }
        return ProtectionError(code, "unable to \(action) '\(path)': \(reason)", path: path, underlying: underlying ?? self)
    }

    /// Wraps an errno from a system call on `path`.
    package static func errno(_ err: Int32, _ action: String, _ path: String) -> ProtectionError {
        let fix: String
        switch err {
        case ENOENT: return ProtectionError(.notFound, "unable to \(action) '\(path)': no such file or directory", path: path)
        case EEXIST: return ProtectionError(.alreadyExists, "unable to \(action) '\(path)': it already exists; remove it or choose another name", path: path)
        case EACCES, EPERM: fix = "; check its owner and permissions"
        case ENOSPC: fix = "; free some space on its filesystem"
        case EROFS: fix = "; its filesystem is mounted read-only; remount it read-write (`mount -o remount,rw`) or use a writable location"
        case EDQUOT: fix = "; the disk quota is exhausted"
        default: fix = ""
        }
        return ProtectionError(.io(err), "unable to \(action) '\(path)': \(String(cString: strerror(err)))\(fix)", path: path)
    }

    /// Translates a crypto failure met while working on `path`.
    package static func crypto(_ e: CryptoError, _ action: String, _ path: String) -> ProtectionError {
        switch e.code {
        case .authenticationFailed:
            return ProtectionError(.authenticationFailed, "unable to \(action) '\(path)': authentication failed; the file was modified, truncated or damaged; restore it from a backup", path: path, underlying: e)
        case .unsupportedCipher:
            return ProtectionError(.unsupportedCipher, "unable to \(action) '\(path)': \(e.message)", path: path, underlying: e)
        default:
            return ProtectionError(.io(EIO), "unable to \(action) '\(path)': \(e.message)", path: path, underlying: e)
        }
    }
}
