#if canImport(Glibc)
import Glibc
#endif

// Default implementations of the seam's lock and identity calls (the rollback journal uses them), on `OFDLock`.
extension FileIO {
    public func tryLockExclusive(_ fd: Int32) throws(SystemError) -> Bool {
        while true {
            switch OFDLock.trySet(fd: fd, .exclusive, start: 0, length: 0) {
            case .done: return true
            case .wouldBlock: return false
            case .failed(EINTR): continue
            case .failed(let code): throw SystemError(code)
            }
        }
    }

    public func unlock(_ fd: Int32) { OFDLock.unlockAll(fd: fd) }

    public func identity(_ fd: Int32) throws(SystemError) -> (device: UInt64, inode: UInt64) {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw SystemError(errno) }
        return (UInt64(st.st_dev), UInt64(st.st_ino))
    }
}
