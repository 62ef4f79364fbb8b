#if canImport(Glibc)
import Glibc
#endif

// The real `*at` calls: names relative to an open directory, as the atomic replace makes them (AtomicReplace.swift).
// `EINTR` is retried as in the path calls.
extension SystemFileIO {
    public func openAt(_ directory: Int32, _ name: String, flags: Int32, mode: mode_t) throws(SystemError) -> Int32 {
        while true {
            let fd = Glibc.openat(directory, name, flags | O_CLOEXEC, mode)
            if fd >= 0 { return fd }
            if errno != EINTR { throw SystemError(errno) }
        }
    }

    public func renameAt(_ directory: Int32, _ from: String, to: String) throws(SystemError) {
        guard Glibc.renameat(directory, from, directory, to) == 0 else { throw SystemError(errno) }
    }

    public func unlinkAt(_ directory: Int32, _ name: String) throws(SystemError) {
        guard Glibc.unlinkat(directory, name, 0) == 0 else { throw SystemError(errno) }
    }

    public func identityAt(_ directory: Int32, _ name: String) throws(SystemError) -> (device: UInt64, inode: UInt64) {
        var st = stat()
        guard fstatat(directory, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { throw SystemError(errno) }
        return (UInt64(st.st_dev), UInt64(st.st_ino))
    }

    public func copyUserAttributes(at directory: Int32, from name: String, to destination: Int32) throws(SystemError) {
        let src: Int32
        do throws(SystemError) { src = try openAt(directory, name, flags: O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, mode: 0) } catch where error.errno == ENOENT || error.errno == ELOOP {
            return  // a new file, or a symbolic link the replace overwrites: nothing to keep
        }
        defer { Glibc.close(src) }
        try ExtendedAttributes.copyUserAttributes(from: src, to: destination)
    }
}
