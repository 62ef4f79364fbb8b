internal import CShims

#if canImport(Glibc)
import Glibc
#endif

// Default implementations of the seam's lock and identity calls (the rollback journal uses them).
extension FileIO {
    public func tryLockExclusive(_ fd: Int32) throws(SystemError) -> Bool {
        while true {
            if dp_fcntl_lock(fd, dp_F_OFD_SETLK, Int16(F_WRLCK), Int16(SEEK_SET), 0, 0, nil) == 0 { return true }
            switch errno {
            case EINTR: continue
            case EAGAIN, EACCES: return false
            default: throw SystemError(errno)
            }
        }
    }

    public func unlock(_ fd: Int32) {
        _ = dp_fcntl_lock(fd, dp_F_OFD_SETLK, Int16(F_UNLCK), Int16(SEEK_SET), 0, 0, nil)
    }

    public func identity(_ fd: Int32) throws(SystemError) -> (device: UInt64, inode: UInt64) {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw SystemError(errno) }
        return (UInt64(st.st_dev), UInt64(st.st_ino))
    }
}
