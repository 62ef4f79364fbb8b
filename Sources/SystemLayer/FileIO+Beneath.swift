// Lookups relative to an open directory: openat2(2)'s confined resolution and the `*at` calls on one name.

#if canImport(Glibc)
import Glibc
#endif

/// `O_PATH`: a descriptor that only names a place (lookups, `fstat`), never reads or writes. Glibc's Swift module
/// hides it (it needs `_GNU_SOURCE`).
package let openPathOnly: Int32 = system_O_PATH

/// How `openat2(2)` may resolve a path (its `RESOLVE_*` flags).
package struct PathResolution: OptionSet, Sendable {
    package let rawValue: UInt64
    package init(rawValue: UInt64) { self.rawValue = rawValue }

    /// `RESOLVE_BENEATH`: every step stays beneath the starting directory (`..` above it, absolute paths and
    /// symbolic links that leave it fail `EXDEV`).
    package static let beneath = PathResolution(rawValue: system_RESOLVE_BENEATH)
    /// `RESOLVE_NO_MAGICLINKS`: `/proc/<pid>/fd`-style links fail `ELOOP`.
    package static let noMagicLinks = PathResolution(rawValue: system_RESOLVE_NO_MAGICLINKS)
    /// `RESOLVE_NO_SYMLINKS`: any symbolic link on the way fails `ELOOP`.
    package static let noSymlinks = PathResolution(rawValue: system_RESOLVE_NO_SYMLINKS)
}

// Default implementations of the seam's directory-relative calls (FileIO.swift declares them). Each is one system
// call: the caller decides what to retry, as the confinement does for `EAGAIN` after a concurrent rename.
extension FileIO {
    public func openat2(_ path: String, in directory: Int32, flags: Int32, mode: mode_t, resolve: UInt64) throws(SystemError) -> Int32 {
        let fd = system_openat2(directory, path, UInt64(UInt32(bitPattern: flags)), UInt64(mode), resolve)
        guard fd >= 0 else { throw SystemError(errno) }
        return fd
    }

    public func makeDirectory(_ name: String, in directory: Int32, mode: mode_t) throws(SystemError) {
        guard mkdirat(directory, name, mode) == 0 else { throw SystemError(errno) }
    }

    public func unlink(_ name: String, in directory: Int32, isDirectory: Bool) throws(SystemError) {
        guard unlinkat(directory, name, isDirectory ? AT_REMOVEDIR : 0) == 0 else { throw SystemError(errno) }
    }

    public func rename(_ name: String, in directory: Int32, to newName: String, in newDirectory: Int32, replacing: Bool) throws(SystemError) {
        let rc = replacing ? renameat(directory, name, newDirectory, newName) : system_renameat_noreplace(directory, name, newDirectory, newName)
        guard rc == 0 else { throw SystemError(errno) }
    }
}

extension FileIO {
    /// `openat2(2)` of `path` beneath `directory` with `resolution`; `mode` counts only with `O_CREAT`.
    package func open(_ path: String, beneath directory: Int32, flags: Int32, mode: mode_t, resolution: PathResolution) throws(SystemError) -> Int32 {
        try openat2(path, in: directory, flags: flags, mode: flags & O_CREAT != 0 ? mode : 0, resolve: resolution.rawValue)
    }

    /// `fstatat(2)` of `name` in `directory` without following a final symbolic link.
    package func status(of name: String, in directory: Int32) throws(SystemError) -> stat {
        var st = stat()
        guard fstatat(directory, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { throw SystemError(errno) }
        return st
    }

    /// `fstat(2)` of `fd`, all of it.
    package func fullStatus(_ fd: Int32) throws(SystemError) -> stat {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw SystemError(errno) }
        return st
    }

    /// `fchmodat(2)` of `name` in `directory` (following a final symbolic link, as `fchmodat` always does on Linux).
    package func changeMode(of name: String, in directory: Int32, to mode: mode_t) throws(SystemError) {
        guard fchmodat(directory, name, mode, 0) == 0 else { throw SystemError(errno) }
    }

    /// `openat(dirFD, "..", O_PATH | O_DIRECTORY)`: the parent of the open directory `fd` (the root is its own).
    package func openParent(of fd: Int32) throws(SystemError) -> Int32 {
        let up = openat(fd, "..", openPathOnly | O_DIRECTORY | O_CLOEXEC)
        guard up >= 0 else { throw SystemError(errno) }
        return up
    }

    /// `dup(2)` of `fd` (close-on-exec).
    package func duplicate(_ fd: Int32) throws(SystemError) -> Int32 {
        let copy = fcntl(fd, F_DUPFD_CLOEXEC, 0)
        guard copy >= 0 else { throw SystemError(errno) }
        return copy
    }

    /// The names in the open directory `fd` (without `.` and `..`) with their `fstatat` (not following links);
    /// takes over `fd` and closes it. An entry removed while listing is left out.
    package func entries(ofOpenDirectory fd: Int32) throws(SystemError) -> [(name: String, status: stat)] {
        guard let dir = fdopendir(fd) else { let e = errno; Glibc.close(fd); throw SystemError(e) }
        defer { closedir(dir) }
        var out: [(String, stat)] = []
        while let ent = readdir(dir) {
            let name = entryName(ent)
            if name == "." || name == ".." { continue }
            var st = stat()
            guard fstatat(dirfd(dir), name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { continue }  // removed meanwhile
            out.append((name, st))
        }
        return out
    }
}
