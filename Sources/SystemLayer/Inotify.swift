// inotify: change events of watched directories, for the file coordinator's reports of uncoordinated changes.
#if canImport(Glibc)
import Glibc
#endif

/// One inotify instance (`inotify_init1(2)` with `IN_CLOEXEC`); its descriptor is read for `inotify_event` records.
package struct Inotify: Sendable {
    /// The instance's descriptor: read it (`FileIO.read`) for the events of every watch.
    package let fd: Int32

    /// Makes an instance.
    /// - Throws: `inotify_init1`'s errno (`EMFILE` when the per-user instance limit is reached, `ENOSYS`).
    package init() throws(SystemError) {
        let fd = inotify_init1(Int32(IN_CLOEXEC))
        guard fd >= 0 else { throw SystemError(errno) }
        self.fd = fd
    }

    /// `inotify_add_watch(2)`: watches `path` for the events of `mask`, and returns the watch descriptor events carry.
    /// - Throws: its errno (`ENOENT`, `EACCES`, `ENOSPC` when the watch limit is reached).
    package func watch(_ path: String, mask: UInt32) throws(SystemError) -> Int32 {
        let wd = inotify_add_watch(fd, path, mask)
        guard wd >= 0 else { throw SystemError(errno) }
        return wd
    }
}
