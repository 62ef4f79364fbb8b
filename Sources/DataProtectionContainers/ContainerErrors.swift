#if canImport(Glibc)
import DataProtectionKeys
import DataProtectionFiles
import Glibc
#endif
internal import PathSyntax

extension Confinement {
    /// Wraps an errno from a confined lookup of `path`, naming escapes as `.escapesContainer` with the root and the fix.
    func failure(_ err: Int32, _ action: String, _ path: String) -> ProtectionError {
        let prefix = "unable to \(action) '\(path)'"
        switch err {
        case EXDEV where isAbsolutePath(path) && (try? beneath(path)) == nil:
            return ProtectionError(.escapesContainer, "\(prefix): it is outside the container '\(root)'; pass a path relative to the container root", path: path)
        case EXDEV:
            return ProtectionError(.escapesContainer, "\(prefix): it resolves outside the container '\(root)' ('..' above the root, or a symbolic link that leaves it); pass a path relative to the container root that stays inside it", path: path)
        case ELOOP:
            return ProtectionError(.escapesContainer, "\(prefix): it goes through a magic link, a symbolic link where none is allowed, or a symbolic-link loop; use the real path inside the container '\(root)'", path: path)
        case EMLINK:
            return ProtectionError(.escapesContainer, "\(prefix): the file has more than one hard link, so it may be a file outside the container '\(root)'; copy it into the container instead of linking it", path: path)
        case EINVAL:
            return ProtectionError(.invalidArgument, "\(prefix): the path is empty, names no item ('.' or '..'), contains a NUL byte, or is invalid for this operation", path: path)
        case ENAMETOOLONG:
            return ProtectionError(.invalidArgument, "\(prefix): a name in the path is longer than 255 bytes or the path longer than 4095; use a shorter name", path: path)
        default:
            return .errno(err, action, path)
        }
    }

    /// `error` (from the file layer on this container) with an errno from a confined lookup translated as `failure` does.
    func failure(_ error: ProtectionError, _ action: String, _ path: String) -> ProtectionError {
        guard case .io(let err) = error.code, [EXDEV, ELOOP, EMLINK, EINVAL, ENAMETOOLONG].contains(err) else { return error }
        return failure(err, action, error.path ?? path)
    }
}
