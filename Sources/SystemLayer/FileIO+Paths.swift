// Calls on a path rather than a descriptor, for the library's own directories (runtime, domain, rotation roots).
#if canImport(Glibc)
import Glibc
#endif

extension FileIO {
    /// `mkdir(2)` of `path` with `mode` (before the umask).
    package func makeDirectory(atPath path: String, mode: mode_t) throws(SystemError) {
        guard mkdir(path, mode) == 0 else { throw SystemError(errno) }
    }

    /// `lstat(2)` of `path`: the link itself when it is a symbolic link.
    package func linkStatus(_ path: String) throws(SystemError) -> stat {
        var st = stat()
        guard lstat(path, &st) == 0 else { throw SystemError(errno) }
        return st
    }

    /// `stat(2)` of `path`, following symbolic links.
    package func status(atPath path: String) throws(SystemError) -> stat {
        var st = stat()
        guard stat(path, &st) == 0 else { throw SystemError(errno) }
        return st
    }

    /// Whether this process may write in `path` (`access(W_OK)`, by the real user and group).
    package func isWritable(_ path: String) -> Bool { access(path, W_OK) == 0 }

    /// Whether anything is at `path` (`access(F_OK)`, following a final symbolic link).
    package func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    /// `realpath(3)`: `path` absolute, with every symbolic link, `.` and `..` resolved.
    package func resolvedPath(_ path: String) throws(SystemError) -> String {
        guard let resolved = realpath(path, nil) else { throw SystemError(errno) }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// The names in the directory at `path` (without `.` and `..`), in directory order.
    /// - Throws: `opendir(3)`'s errno (`ENOENT`, `ENOTDIR`, `EACCES`…).
    package func directoryNames(_ path: String) throws(SystemError) -> [String] {
        guard let d = opendir(path) else { throw SystemError(errno) }
        defer { closedir(d) }
        var names: [String] = []
        while let e = readdir(d) {
            let name = entryName(e)
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}
