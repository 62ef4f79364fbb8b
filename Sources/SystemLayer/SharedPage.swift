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

    /// Why the page could not be mapped: a system call failed, or `accept` refused the file.
    package enum Failure: Error {
        case system(Step, Errno)
        case refused
    }

    /// Maps the file at `path` (creating it with `mode` if absent, and growing it to `size` bytes if shorter).
    ///
    /// - Parameter accept: judges the open file by its owner and permission bits before anything is written; a
    ///   refusal closes it untouched (a state page must not be shared with, or planted by, another user).
    /// - Throws: `.system(step, errno)` for the call that failed; `.refused` when `accept` said no.
    package init(path: String, size: Int, mode: mode_t, accept: (_ owner: uid_t, _ permissions: mode_t) -> Bool = { _, _ in true }) throws(Failure) {
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC, mode)
        guard fd >= 0 else { throw .system(.open, Errno(errno)) }
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

    /// The 64-bit word at byte `offset` (a multiple of 8 inside the page).
    @inlinable @inline(__always)
    public func word(at offset: Int) -> AtomicWord64 { AtomicWord64((base + offset).assumingMemoryBound(to: UInt64.self)) }
}
