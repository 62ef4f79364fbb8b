public import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// A small file mapped `MAP_SHARED` read-write: state every process that maps the same file sees at once.
///
/// Its words are read and written only through `AtomicWord64` (sequentially consistent), so no lock is needed
/// between processes. The live lock's state page and the coordinator's presenter generation counter are both one.
/// The mapping lasts as long as this object; take word addresses from `base` only while holding it.
public final class SharedPage: @unchecked Sendable {  // the mapping is immutable after init; every access to it is atomic
    /// The start of the mapping (page-aligned).
    public let base: UnsafeMutableRawPointer
    /// The mapping's length in bytes.
    package let size: Int

    /// The step of mapping that failed, for the caller's message.
    package enum Step: Sendable {
        case open, inspect, resize, map
    }

    /// Why the page could not be mapped: a system call failed, something other than a page file is at its name, or
    /// `accept` refused the file.
    package enum Failure: Error {
        case system(Step, Errno)
        /// What is at the name instead, as a phrase ("a symbolic link", "a file with 2 hard links", …).
        case foreign(String)
        case refused
    }

    /// Maps the file at `path` (creating it with `mode` if absent, and growing it to `size` bytes if shorter).
    ///
    /// The file is created or opened through the one safe open (`createOwned`, else `openOwned`): a symbolic link, a
    /// hard link, a FIFO or a directory planted at the name (the coordinator's lock directory may be shared) is
    /// refused before anything is resized, mapped or written, so no other file's bytes can become the page.
    /// - Parameter accept: judges the open file by its owner and permission bits before anything is written; a
    ///   refusal closes it untouched (a state page must not be shared with, or planted by, another user).
    /// - Throws: `.system(step, errno)` for the call that failed; `.foreign` for what is at the name instead;
    ///   `.refused` when `accept` said no.
    package init(path: String, size: Int, mode: mode_t, accept: (_ owner: uid_t, _ permissions: mode_t) -> Bool = { _, _ in true }) throws(Failure) {
        let fd = try Self.openPage(path, mode: mode)
        defer { Glibc.close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw .system(.inspect, Errno(errno)) }
        guard accept(st.st_uid, st.st_mode & 0o7777) else { throw .refused }
        if st.st_size < size, ftruncate(fd, off_t(size)) != 0 { throw .system(.resize, Errno(errno)) }
        guard let p = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), p != MAP_FAILED else {
            throw .system(.map, Errno(errno))
        }
        base = p
        self.size = size
    }

    deinit { munmap(base, size) }

    /// Creates the page file, or opens the one there, through the one safe open.
    static func openPage(_ path: String, mode: mode_t) throws(Failure) -> Int32 {
        let io = SystemFileIO()
        while true {
            do throws(OwnedFileFailure) {
                do throws(OwnedFileFailure) { return try io.createOwned(path, flags: O_RDWR, mode: mode) } catch .system(let e) where e.errno == EEXIST {
                    do throws(OwnedFileFailure) { return try io.openOwned(path, flags: O_RDWR, owner: .anyone) } catch .system(let e) where e.errno == ENOENT {
                        continue  // removed between the two opens: create it again
                    }
                }
            } catch {
                switch error {
                case .system(let e): throw Failure.system(.open, e)
                case .foreign(let what): throw Failure.foreign(what)
                }
            }
        }
    }

    /// The 64-bit word at byte `offset` (a multiple of 8 inside the page).
    @inlinable @inline(__always)
    public func word(at offset: Int) -> AtomicWord64 { AtomicWord64((base + offset).assumingMemoryBound(to: UInt64.self)) }
}
