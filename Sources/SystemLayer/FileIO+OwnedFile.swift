#if canImport(Glibc)
import Glibc
#endif

/// What `fstat(2)` says about an open file: the facts the owned-file open checks.
public struct FileStatus: Sendable, Equatable {
    /// `st_mode & S_IFMT`.
    public var type: mode_t
    /// `st_nlink`.
    public var links: UInt64
    /// `st_uid`.
    public var owner: uid_t

    public init(type: mode_t, links: UInt64, owner: uid_t) {
        self.type = type
        self.links = links
        self.owner = owner
    }
}

/// Why a name that must hold a regular file of ours does not: the system call failed, or something else is there.
///
/// The library turns it into its own error, naming the protected file the name serves and the fix.
package enum OwnedFileFailure: Error {
    case system(SystemError)
    /// What is at the name instead, as a phrase: "a symbolic link", "a file with 2 hard links", …
    case foreign(String)
}

/// Whose file an existing owned file must be.
package enum FileOwner {
    /// Anyone's: the other checks suffice.
    case anyone
    /// This process's effective user's.
    case us
    /// This process's effective user's, or `uid`'s.
    case usOr(uid_t)

    package func allows(_ uid: uid_t) -> Bool {
        switch self {
        case .anyone: true
        case .us: uid == geteuid()
        case .usOr(let other): uid == geteuid() || uid == other
        }
    }
}

// The one safe open for "a file that must be a regular file of ours": journals, recovery's data file, temporary
// files of replaces and of durable writes, and sweeps of those names all go through these two functions.
//
// Security: a directory the library writes in may be shared (an Inbox, a group directory), so anyone may have
// planted something at a name it owns. `O_NOFOLLOW` refuses a symbolic link, so no write lands in the link's
// target; `O_NONBLOCK` makes opening a FIFO return at once instead of waiting for a peer (and `O_NOCTTY` keeps a
// terminal from becoming ours); `fstat` on the open descriptor (not the name, which may change meanwhile) then
// refuses anything but a regular file, and a file with a second hard link, whose bytes are also some other name's.
// A new file is made with `O_CREAT | O_EXCL`, which never follows or reuses whatever is at the name.
extension FileIO {
    /// `fstat(2)` of `fd`: type, link count, owner. The default implementation; a seam may override it.
    public func status(_ fd: Int32) throws(SystemError) -> FileStatus {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw SystemError(errno) }
        return FileStatus(type: st.st_mode & S_IFMT, links: UInt64(st.st_nlink), owner: st.st_uid)
    }

    /// Opens the existing file at `path`, which must be a regular file with one link owned as `owner` says.
    ///
    /// - Parameter flags: access mode and extra flags (`O_NOFOLLOW`, `O_NONBLOCK`, `O_NOCTTY` are always added).
    /// - Returns: the descriptor (`O_NONBLOCK` stays set: it changes nothing for a regular file).
    /// - Throws: `.foreign` naming what is there instead; `.system` for other failures (`ENOENT` when absent).
    package func openOwned(_ path: String, flags: Int32, owner: FileOwner = .us) throws(OwnedFileFailure) -> Int32 {
        try owned(owner) { (extra) throws(SystemError) in try open(path, flags: flags | extra, mode: 0) }
    }

    /// `openOwned` of `name` (one path component) in the open directory `directory`: what sweeps of a directory use.
    package func openOwned(at directory: Int32, _ name: String, flags: Int32, owner: FileOwner = .us) throws(OwnedFileFailure) -> Int32 {
        try owned(owner) { (extra) throws(SystemError) in try openAt(directory, name, flags: flags | extra, mode: 0) }
    }

    /// Runs `open` with the owned-file flags, maps what it refused, and checks the file it opened.
    private func owned(_ owner: FileOwner, _ open: (Int32) throws(SystemError) -> Int32) throws(OwnedFileFailure) -> Int32 {
        let fd: Int32
        do throws(SystemError) { fd = try open(O_NOFOLLOW | O_NONBLOCK | O_NOCTTY) } catch {
            switch error.errno {
            case ELOOP: throw .foreign("a symbolic link")
            case EISDIR: throw .foreign("a directory")
            case ENXIO: throw .foreign("a FIFO or socket")  // write-only open of a FIFO nobody reads, or a socket
            default: throw .system(error)
            }
        }
        do throws(OwnedFileFailure) {
            try checkOwned(fd, owner: owner)
            return fd
        } catch {
            close(fd)
            throw error
        }
    }

    /// Creates a new file at `path` with `O_CREAT | O_EXCL` (nothing at the name is followed or reused).
    ///
    /// - Throws: `.system(EEXIST)` when anything, even a dangling link, is at the name; `.system` for other failures.
    package func createOwned(_ path: String, flags: Int32, mode: mode_t) throws(OwnedFileFailure) -> Int32 {
        do throws(SystemError) { return try open(path, flags: flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY, mode: mode) } catch {
            throw .system(error)
        }
    }

    /// Throws `.foreign` unless `fd` is a regular file with one link whose owner `owner` allows.
    package func checkOwned(_ fd: Int32, owner: FileOwner) throws(OwnedFileFailure) {
        let st: FileStatus
        do throws(SystemError) { st = try status(fd) } catch { throw .system(error) }
        guard st.type == S_IFREG else { throw .foreign(Self.describe(st.type)) }
        if st.links == 0 { throw .system(SystemError(ENOENT)) }  // removed since the open: as if never found
        guard st.links == 1 else { throw .foreign("a file with \(st.links) hard links") }
        guard owner.allows(st.owner) else { throw .foreign("a file owned by uid \(st.owner), not by you (uid \(geteuid()))") }
    }

    private static func describe(_ type: mode_t) -> String {
        switch type {
        case S_IFDIR: "a directory"
        case S_IFIFO: "a FIFO"
        case S_IFSOCK: "a socket"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFLNK: "a symbolic link"
        default: "not a regular file"
        }
    }
}
