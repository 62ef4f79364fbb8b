#if canImport(Glibc)
import Glibc
#endif

/// A file mapped `MAP_SHARED` region by region, with OFD byte-range locks on it: SQLite's wal-index (`-shm`), which
/// every connection to a WAL database maps and locks.
///
/// Opened through the one safe open (as `SharedPage`): a link, FIFO or directory planted at the name is refused before
/// anything is resized or mapped. Each object has its own open file description, so its locks exclude every other
/// object's, in this process (another connection, another thread) and in others.
package final class SharedMemoryFile {
    /// The file's path.
    package let path: String
    private var fd: Int32
    /// Every mapping made, unmapped together by `close`.
    private var mappings: [(UnsafeMutableRawPointer, Int)] = []

    /// Creates the file (mode `mode`) or opens the one at `path`.
    ///
    /// - Throws: `SharedPage.Failure`: `.system(.open, errno)`, or `.foreign` naming what is at the name instead.
    package init(path: String, mode: mode_t) throws(SharedPage.Failure) {
        self.path = path
        fd = try SharedPage.openPage(path, mode: mode)
    }

    deinit { close() }

    /// The file's size in bytes.
    package func size() throws(SystemError) -> Int64 { try SystemFileIO().size(fd) }

    /// Sets the file's size (`ftruncate`): zero empties it, a larger size extends it with zeros.
    package func resize(to size: Int64) throws(SystemError) { try SystemFileIO().ftruncate(fd, to: size) }

    /// Maps `length` bytes from `offset` (a multiple of the page size), read-write and shared; `close` unmaps it.
    package func map(offset: Int64, length: Int) throws(SystemError) -> UnsafeMutableRawPointer {
        guard let p = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off_t(offset)), p != MAP_FAILED else {
            throw SystemError(errno)
        }
        mappings.append((p, length))
        return p
    }

    /// Locks (`kind`), or unlocks (nil), bytes `[start, start+length)` without waiting.
    package func lock(_ kind: OFDLock.Kind?, start: Int64, length: Int64) -> OFDLock.Result {
        OFDLock.trySet(fd: fd, kind, start: start, length: length)
    }

    /// Locks bytes `[start, start+length)`, waiting for whoever holds a conflicting lock.
    package func waitLock(_ kind: OFDLock.Kind, start: Int64, length: Int64) -> OFDLock.Result {
        OFDLock.waitSet(fd: fd, kind, start: start, length: length)
    }

    /// Unmaps every region and closes the file (its locks go with it); later calls fail with `EBADF`.
    package func close() {
        for (p, n) in mappings { munmap(p, n) }
        mappings = []
        if fd >= 0 { Glibc.close(fd); fd = -1 }
    }
}
