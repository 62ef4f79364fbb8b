// The only file that issues lock system calls: open-file-description (OFD) byte-range locks.
internal import CShims
import Glibc

/// Thin typed calls over `fcntl(F_OFD_SETLK/SETLKW/GETLK)` on one lock-file descriptor.
///
/// OFD locks belong to the open file description, not the process: two descriptors opened
/// separately conflict even inside one process (so threads exclude each other), closing another
/// descriptor of the file does not drop them (unlike classic `F_SETLK`), and the kernel drops
/// them when the last descriptor of the description closes, including when the process dies.
package enum OFDLock {
    /// Which lock: shared (`F_RDLCK`) or exclusive (`F_WRLCK`), ordered by strength.
    package enum Kind: Int, Sendable, Comparable {
        case shared = 1
        case exclusive = 2

        package static func < (lhs: Kind, rhs: Kind) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// Outcome of a lock call.
    package enum Result: Equatable {
        case done
        /// Another open file description holds a conflicting lock.
        case wouldBlock
        case failed(Int32)
    }

    /// Locks (or unlocks, with `type == nil`) `[start, start+length)` without waiting.
    package static func trySet(fd: Int32, _ type: Kind?, start: Int64, length: Int64) -> Result {
        call(fd: fd, command: dp_F_OFD_SETLK, type, start: start, length: length)
    }

    /// Locks `[start, start+length)`, waiting in the kernel as long as it takes; retries on EINTR.
    package static func waitSet(fd: Int32, _ type: Kind, start: Int64, length: Int64) -> Result {
        while true {
            let result = call(fd: fd, command: dp_F_OFD_SETLKW, type, start: start, length: length)
            if result != .failed(EINTR) { return result }
        }
    }

    /// Releases every lock held through `fd` in one call.
    package static func unlockAll(fd: Int32) {
        _ = dp_fcntl_lock(fd, dp_F_OFD_SETLK, Int16(F_UNLCK), Int16(SEEK_SET), 0, 0, nil)
    }

    /// Whether some open file description holds a lock that conflicts with `type` on the range.
    package static func isLocked(fd: Int32, _ type: Kind, start: Int64, length: Int64) -> Result {
        var pid: Int32 = 0
        let rc = dp_fcntl_lock(fd, dp_F_OFD_GETLK, kernelType(type), Int16(SEEK_SET), start, length, &pid)
        if rc != 0 { return .failed(errno) }
        return pid == 0 ? .done : .wouldBlock
    }

    private static func call(fd: Int32, command: Int32, _ type: Kind?, start: Int64, length: Int64) -> Result {
        let rc = dp_fcntl_lock(fd, command, kernelType(type), Int16(SEEK_SET), start, length, nil)
        if rc == 0 { return .done }
        let code = errno
        return (code == EAGAIN || code == EACCES) ? .wouldBlock : .failed(code)
    }

    private static func kernelType(_ type: Kind?) -> Int16 {
        switch type {
        case nil: Int16(F_UNLCK)
        case .shared: Int16(F_RDLCK)
        case .exclusive: Int16(F_WRLCK)
        }
    }
}
