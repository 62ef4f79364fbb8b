import SystemLayer

#if canImport(Glibc)
import Glibc
#endif

// The system layer reports errno (`SystemError`) and what it found at a name (`OwnedFileFailure`); the library
// reports `ProtectionError`, naming the protected file and the fix. The mapping is here.

extension OwnedFileFailure {
    /// The typed error for `action` on `subject` (the protected file the name serves) failing at `path`.
    ///
    /// - Parameter fix: what to do about a foreign file; default: remove it, it is not ours.
    package func error(_ action: String, _ subject: String, at path: String, fix: String? = nil) -> ProtectionError {
        switch self {
        case .system(let e): return .errno(e.errno, action, subject)
        case .foreign(let what):
            let remedy = fix ?? "it was not made by this library; remove it (`rm -r '\(path)'`) and try again"
            return ProtectionError(
                .untrustedFile,
                "unable to \(action) '\(subject)': '\(path)' is \(what), where only a regular file of ours with one link may be; \(remedy)",
                path: subject)
        }
    }
}

extension FileIO {
    /// The error to report when `action` on `path` failed in one of the seam's path calls (`open`, `rename`, `unlink`).
    ///
    /// `ProtectionError.errno`, unless the seam names what it refused (a confined seam: the confinement and the fix).
    package func failure(_ error: SystemError, _ action: String, _ path: String) -> ProtectionError {
        (refusal(error, action, path) as? ProtectionError) ?? .errno(error.errno, action, path)
    }
}

extension ProtectionError {
    /// The error for `action` on `path` when the atomic replace could not begin (`AtomicReplace.init`).
    package static func replace(_ error: SystemError, _ action: String, _ path: String, io: any FileIO) -> ProtectionError {
        guard error.errno == EBUSY else { return io.failure(error, action, path) }
        return ProtectionError(.io(EBUSY), "unable to \(action) '\(path)': no temporary name beside it could be claimed (other writers keep taking them); try again", path: path)
    }
}
