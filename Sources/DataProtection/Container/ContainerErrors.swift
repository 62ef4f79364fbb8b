#if canImport(Glibc)
import Glibc
#endif

extension ProtectionError {
    /// Wraps an errno from a confined lookup of `path`, naming escapes as `.escapesContainer`.
    static func container(_ err: Int32, _ action: String, _ path: String) -> ProtectionError {
        let prefix = "unable to \(action) '\(path)'"
        switch err {
        case EXDEV:
            return ProtectionError(.escapesContainer, "\(prefix): it resolves outside the container ('..' above the root, an absolute path, or a symbolic link that leaves it); use a path inside the container", path: path)
        case ELOOP:
            return ProtectionError(.escapesContainer, "\(prefix): it goes through a magic link, a symbolic link where none is allowed, or a symbolic-link loop; use the real path inside the container", path: path)
        case EMLINK:
            return ProtectionError(.escapesContainer, "\(prefix): the file has more than one hard link, so it may be a file outside the container; copy it into the container instead of linking it", path: path)
        case EINVAL:
            return ProtectionError(.invalidArgument, "\(prefix): the path is empty, names no item ('.' or '..'), contains a NUL byte, or is invalid for this operation", path: path)
        case ENAMETOOLONG:
            return ProtectionError(.invalidArgument, "\(prefix): a name in the path is longer than 255 bytes or the path longer than 4095; use a shorter name", path: path)
        default:
            return .errno(err, action, path)
        }
    }

    /// The same error with a file layer's errno from a confined lookup translated as `container(_:_:_:)` does.
    func inContainer(_ action: String, _ path: String) -> ProtectionError {
        guard case .io(let err) = code, [EXDEV, ELOOP, EMLINK, EINVAL, ENAMETOOLONG].contains(err) else { return self }
        return .container(err, action, self.path ?? path)
    }
}
