import SystemLayer
internal import CShims

#if canImport(Glibc)
import Glibc
#endif
internal import PathSyntax

/// Resolves container paths beneath the container root with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`.
///
/// Every lookup takes a path relative to the root, or an absolute path that
/// lies inside it (`beneath(_:)` turns it into the relative one, byte-wise);
/// an absolute path anywhere else fails `EXDEV` before any lookup.
///
/// The kernel does the confinement during the lookup itself, so it holds
/// against a symbolic link swapped in at any moment: `..` that climbs out,
/// absolute paths, symbolic links leaving the root and `/proc` magic links
/// all fail (`EXDEV` or `ELOOP`). Operations on a final component
/// (`unlinkat`, `renameat`, `mkdirat`, `fstatat` without following) resolve
/// only its parent this way and never follow the last link.
///
/// Hard links cannot be seen in a path: a regular file with `st_nlink > 1`
/// may be a second name of a file outside, so opening one fails `EMLINK`
/// (reported as `.escapesContainer`). The library itself never makes hard links.
final class Confinement: Sendable {
    /// The container root, absolute.
    let root: String
    /// The root, opened `Confinement.pathOnly | O_DIRECTORY`; every lookup starts here.
    let rootFD: Int32
    /// The seam the container's plain-file reads and writes go through (the real calls, or a test's faults).
    let io: any FileIO

    /// `O_PATH`: a descriptor that only names a place (lookups, fstat), never reads or writes.
    static let pathOnly: Int32 = dp_O_PATH
    static let resolve: UInt64 = dp_RESOLVE_BENEATH | dp_RESOLVE_NO_MAGICLINKS

    /// Opens `root` (an existing directory) as the confinement root; a relative `root` is taken from the working directory.
    init(root: String, io: any FileIO = SystemFileIO()) throws(SystemError) {
        guard !root.utf8.contains(0) else { throw SystemError(EINVAL) }
        let fd = Glibc.open(root, Confinement.pathOnly | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw SystemError(errno) }
        self.root = isAbsolutePath(root) ? root : Container.currentDirectory() + "/" + root
        self.rootFD = fd
        self.io = io
    }

    deinit { Glibc.close(rootFD) }

    /// The lookup beneath the root that `path` names: a relative path as it is; an absolute one inside the
    /// root as its part below the root ("." for the root itself).
    ///
    /// Compared with `root` byte for byte as written (PathSyntax), not resolved: `..` and symbolic links
    /// below the root are left to `openat2`, which refuses any that leave it, and an absolute path that
    /// reaches the root through another spelling (a link above it) counts as outside.
    /// - Throws: `EXDEV` for an absolute path outside the root.
    func beneath(_ path: String) throws(SystemError) -> String {
        guard isAbsolutePath(path) else { return path }
        if samePath(droppingTrailingSeparators(path), droppingTrailingSeparators(root)) { return "." }
        guard let inside = relativePath(of: path, inside: root) else { throw SystemError(EXDEV) }
        // "/root//a" gives "/a": drop the separators left at the front, or the kernel would see an absolute path.
        let rest = inside.utf8.drop { $0 == UInt8(ascii: "/") }
        return rest.isEmpty ? "." : String(decoding: rest, as: UTF8.self)
    }

    /// The absolute path of the item `path` names (for file coordination); `path` under the root as written when it is outside.
    func absolute(_ path: String) -> String {
        guard let inside = try? beneath(path) else { return root + "/" + path }
        return inside == "." ? root : root + "/" + inside
    }

    /// `openat2` of `path` beneath the root; regular files with more than one link are refused (`EMLINK`).
    /// With `noSymlinks`, any symbolic link in the path is refused (`ELOOP`): tree walks that delete use it.
    func open(_ path: String, flags: Int32, mode: mode_t = 0, noSymlinks: Bool = false) throws(SystemError) -> Int32 {
        try Self.open(try beneath(path), beneath: rootFD, flags: flags, mode: mode, noSymlinks: noSymlinks)
    }

    /// `openat2` of `path` beneath the directory `dirFD`.
    static func open(_ path: String, beneath dirFD: Int32, flags: Int32, mode: mode_t = 0, noSymlinks: Bool = false) throws(SystemError) -> Int32 {
        guard !path.isEmpty, !path.utf8.contains(0) else { throw SystemError(EINVAL) }
        var retries = 0
        while true {
            let creating = flags & O_CREAT != 0
            let fd = dp_openat2(dirFD, path, UInt64(UInt32(bitPattern: flags | O_CLOEXEC)), creating ? UInt64(mode) : 0, resolve | (noSymlinks ? dp_RESOLVE_NO_SYMLINKS : 0))
            if fd >= 0 {
                if flags & Confinement.pathOnly == 0 {
                    var st = stat()
                    if fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_nlink > 1 {
                        Glibc.close(fd)
                        throw SystemError(EMLINK)
                    }
                }
                return fd
            }
            // EAGAIN: a concurrent rename made the kernel distrust `..`; retry a bounded number of times.
            if errno == EINTR || (errno == EAGAIN && retries < 64) { retries += 1; continue }
            throw SystemError(errno)
        }
    }

    /// Runs `body` with the parent directory of `path` (opened beneath the root) and the last component.
    ///
    /// The last component must name an item: not empty, `.` or `..`.
    func withParent<R>(of path: String, _ body: (Int32, String) throws(SystemError) -> R) throws(SystemError) -> R {
        // Split at the byte (PathSyntax.swift): a name handed to the *at calls below must hold no "/".
        let p = droppingTrailingSeparators(try beneath(path))
        let name = lastComponent(of: p)
        guard !name.isEmpty, name != ".", name != "..", !path.utf8.contains(0) else { throw SystemError(EINVAL) }
        let fd = try open(parentDirectory(of: p), flags: Confinement.pathOnly | O_DIRECTORY)
        defer { Glibc.close(fd) }
        return try body(fd, name)
    }

    /// `fstatat` of `path` without following a final symbolic link.
    func status(_ path: String) throws(SystemError) -> stat {
        let path = try beneath(path)
        if path == "." || path.isEmpty {
            var st = stat()
            guard fstat(rootFD, &st) == 0 else { throw SystemError(errno) }
            return st
        }
        return try withParent(of: path) { (fd, name) throws(SystemError) in
            var st = stat()
            guard fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { throw SystemError(errno) }
            return st
        }
    }

    /// `mkdirat`; an existing directory is not an error when `existingOK`.
    func makeDirectory(_ path: String, mode: mode_t = 0o700, existingOK: Bool = true) throws(SystemError) {
        try withParent(of: path) { (fd, name) throws(SystemError) in
            if mkdirat(fd, name, mode) == 0 { return }
            let e = errno
            var st = stat()
            if e == EEXIST, existingOK, fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0, st.st_mode & S_IFMT == S_IFDIR { return }
            throw SystemError(e)
        }
    }

    /// `unlinkat` of a file or symbolic link, or of an empty directory when `directory`.
    func remove(_ path: String, directory: Bool = false) throws(SystemError) {
        try withParent(of: path) { (fd, name) throws(SystemError) in
            guard unlinkat(fd, name, directory ? AT_REMOVEDIR : 0) == 0 else { throw SystemError(errno) }
        }
    }

    /// `renameat` (or `renameat2(RENAME_NOREPLACE)` unless `replacing`) of one item to another path, both beneath the root.
    func rename(_ from: String, to: String, replacing: Bool) throws(SystemError) {
        try withParent(of: from) { (fromFD, fromName) throws(SystemError) in
            try withParent(of: to) { (toFD, toName) throws(SystemError) in
                let rc = replacing ? renameat(fromFD, fromName, toFD, toName) : dp_renameat_noreplace(fromFD, fromName, toFD, toName)
                guard rc == 0 else { throw SystemError(errno) }
            }
        }
    }

    /// The names in the directory `path` (without `.` and `..`), with their `lstat`.
    func entries(_ path: String, noSymlinks: Bool = false) throws(SystemError) -> [(name: String, status: stat)] {
        let fd = try open(path.isEmpty ? "." : path, flags: O_RDONLY | O_DIRECTORY, noSymlinks: noSymlinks)
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
        return out.sorted { $0.0 < $1.0 }
    }

    /// The device and inode of the open directory `fd`, and of each of its ancestors up to the root (innermost first).
    ///
    /// - Throws: `EXDEV` when the walk up reaches the filesystem root without meeting the container root.
    func ancestry(of fd: Int32) throws(SystemError) -> [FileIdentity] {
        let rootID = try FileIdentity(fd: rootFD)
        var chain: [FileIdentity] = []
        var current = Glibc.dup(fd)
        guard current >= 0 else { throw SystemError(errno) }
        defer { Glibc.close(current) }
        for _ in 0..<256 {
            let id = try FileIdentity(fd: current)
            if id == rootID { return chain }
            if chain.last == id { break }  // `..` of "/" is "/": outside the root
            chain.append(id)
            let up = openat(current, "..", Confinement.pathOnly | O_DIRECTORY | O_CLOEXEC)
            guard up >= 0 else { throw SystemError(errno) }
            Glibc.close(current)
            current = up
        }
        throw SystemError(EXDEV)
    }
}

/// A file's device and inode number: what identifies it whatever its path.
struct FileIdentity: Hashable, Sendable {
    let device: UInt64
    let inode: UInt64

    init(fd: Int32) throws(SystemError) {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw SystemError(errno) }
        self.init(st)
    }

    init(_ st: stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
    }
}
