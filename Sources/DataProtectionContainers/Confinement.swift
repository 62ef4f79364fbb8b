import DataProtectionKeys
import DataProtectionFiles
import SystemLayer

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
///
/// Test hook: testing SPI (with the members the path fuzzer drives), so the fuzz harness in Tests/Support can resolve
/// hostile paths through it; containers are its only user in the library.
@_spi(Testing) public final class Confinement: Sendable {
    /// The container root, absolute.
    let root: String
    /// The root, opened `Confinement.pathOnly | O_DIRECTORY`; every lookup starts here.
    let rootFD: Int32
    /// The seam the container's plain-file reads and writes go through (the real calls, or a test's faults).
    let io: any FileIO

    /// `O_PATH`: a descriptor that only names a place (lookups, fstat), never reads or writes.
    public static let pathOnly: Int32 = openPathOnly
    static let resolution: PathResolution = [.beneath, .noMagicLinks]

    /// Opens `root` (an existing directory) as the confinement root; a relative `root` is taken from the working directory.
    public init(root: String, io: any FileIO = SystemFileIO()) throws(SystemError) {
        guard !root.utf8.contains(0) else { throw SystemError(EINVAL) }
        let fd = try io.open(root, flags: Confinement.pathOnly | O_DIRECTORY, mode: 0)
        self.root = isAbsolutePath(root) ? root : Container.currentDirectory() + "/" + root
        self.rootFD = fd
        self.io = io
    }

    deinit { io.close(rootFD) }

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
    public func open(_ path: String, flags: Int32, mode: mode_t = 0, noSymlinks: Bool = false) throws(SystemError) -> Int32 {
        try open(try beneath(path), beneath: rootFD, flags: flags, mode: mode, noSymlinks: noSymlinks)
    }

    /// `openat2` of `path` beneath the directory `dirFD`.
    func open(_ path: String, beneath dirFD: Int32, flags: Int32, mode: mode_t = 0, noSymlinks: Bool = false) throws(SystemError) -> Int32 {
        guard !path.isEmpty, !path.utf8.contains(0) else { throw SystemError(EINVAL) }
        let resolution = noSymlinks ? Self.resolution.union(.noSymlinks) : Self.resolution
        var retries = 0
        while true {
            let fd: Int32
            do throws(SystemError) { fd = try io.open(path, beneath: dirFD, flags: flags | O_CLOEXEC, mode: mode, resolution: resolution) } catch {
                // EAGAIN: a concurrent rename made the kernel distrust `..`; retry a bounded number of times.
                if error.errno == EINTR || (error.errno == EAGAIN && retries < 64) { retries += 1; continue }
                throw error
            }
            if flags & Confinement.pathOnly == 0, let st = try? io.fullStatus(fd), st.st_mode & S_IFMT == S_IFREG, st.st_nlink > 1 {
                io.close(fd)
                throw SystemError(EMLINK)
            }
            return fd
        }
    }

    /// Runs `body` with the parent directory of `path` (opened beneath the root) and the last component.
    ///
    /// The last component must name an item: not empty, `.` or `..`.
    public func withParent<R>(of path: String, _ body: (Int32, String) throws(SystemError) -> R) throws(SystemError) -> R {
        // Split at the byte (PathSyntax.swift): a name handed to the *at calls below must hold no "/".
        let p = droppingTrailingSeparators(try beneath(path))
        let name = lastComponent(of: p)
        guard !name.isEmpty, name != ".", name != "..", !path.utf8.contains(0) else { throw SystemError(EINVAL) }
        let fd = try open(parentDirectory(of: p), flags: Confinement.pathOnly | O_DIRECTORY)
        defer { io.close(fd) }
        return try body(fd, name)
    }

    /// `fstatat` of `path` without following a final symbolic link.
    public func status(_ path: String) throws(SystemError) -> stat {
        let path = try beneath(path)
        if path == "." || path.isEmpty { return try io.fullStatus(rootFD) }
        return try withParent(of: path) { (fd, name) throws(SystemError) in try io.status(of: name, in: fd) }
    }

    /// `mkdirat`; an existing directory is not an error when `existingOK`.
    public func makeDirectory(_ path: String, mode: mode_t = 0o700, existingOK: Bool = true) throws(SystemError) {
        try withParent(of: path) { (fd, name) throws(SystemError) in
            do throws(SystemError) { try io.makeDirectory(name, in: fd, mode: mode) } catch {
                if error.errno == EEXIST, existingOK, let st = try? io.status(of: name, in: fd), st.st_mode & S_IFMT == S_IFDIR { return }
                throw error
            }
        }
    }

    /// `unlinkat` of a file or symbolic link, or of an empty directory when `directory`.
    public func remove(_ path: String, directory: Bool = false) throws(SystemError) {
        try withParent(of: path) { (fd, name) throws(SystemError) in
            try io.unlink(name, in: fd, isDirectory: directory)
        }
    }

    /// `renameat` (or `renameat2(RENAME_NOREPLACE)` unless `replacing`) of one item to another path, both beneath the root.
    public func rename(_ from: String, to: String, replacing: Bool) throws(SystemError) {
        try withParent(of: from) { (fromFD, fromName) throws(SystemError) in
            try withParent(of: to) { (toFD, toName) throws(SystemError) in
                try io.rename(fromName, in: fromFD, to: toName, in: toFD, replacing: replacing)
            }
        }
    }

    /// The names in the directory `path` (without `.` and `..`), with their `lstat`.
    public func entries(_ path: String, noSymlinks: Bool = false) throws(SystemError) -> [(name: String, status: stat)] {
        let fd = try open(path.isEmpty ? "." : path, flags: O_RDONLY | O_DIRECTORY, noSymlinks: noSymlinks)
        return try io.entries(ofOpenDirectory: fd).sorted { $0.name < $1.name }
    }

    /// The device and inode of the open directory `fd`, and of each of its ancestors up to the root (innermost first).
    ///
    /// - Throws: `EXDEV` when the walk up reaches the filesystem root without meeting the container root.
    func ancestry(of fd: Int32) throws(SystemError) -> [FileIdentity] {
        let rootID = FileIdentity(try io.fullStatus(rootFD))
        var chain: [FileIdentity] = []
        var current = try io.duplicate(fd)
        defer { io.close(current) }
        for _ in 0..<256 {
            let id = FileIdentity(try io.fullStatus(current))
            if id == rootID { return chain }
            if chain.last == id { break }  // `..` of "/" is "/": outside the root
            chain.append(id)
            let up = try io.openParent(of: current)
            io.close(current)
            current = up
        }
        throw SystemError(EXDEV)
    }
}

/// A file's device and inode number: what identifies it whatever its path.
package struct FileIdentity: Hashable, Sendable {
    let device: UInt64
    let inode: UInt64

    package init(fd: Int32) throws(SystemError) { self.init(try SystemFileIO().fullStatus(fd)) }

    package init(_ st: stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
    }
}
