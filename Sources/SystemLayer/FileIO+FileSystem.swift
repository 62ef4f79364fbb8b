// Calls on a whole file system rather than one file: syncfs, statfs, statvfs.

#if canImport(Glibc)
import Glibc
#endif

extension FileIO {
    /// `syncfs(2)`: commits every buffer of the file system holding `fd`. The default implementation; a seam may
    /// override it (FileIO.swift declares it).
    public func syncFileSystem(_ fd: Int32) throws(SystemError) {
        guard system_syncfs(fd) == 0 else { throw SystemError(errno) }
    }

    /// Bytes available to unprivileged users on the file system holding `fd` (`fstatvfs`: `f_bavail × f_frsize`).
    package func availableBytes(onFileSystemOf fd: Int32) throws(SystemError) -> Int64 {
        var s = statvfs()
        guard fstatvfs(fd, &s) == 0 else { throw SystemError(errno) }
        return Int64(s.f_bavail) * Int64(s.f_frsize)
    }
}

/// The file-system type of the one holding `path`: `statfs(2)`'s `f_type` magic (0x6969 NFS, 0x65735546 FUSE, …).
package func fileSystemMagic(of path: String) throws(SystemError) -> Int64 {
    var magic: Int64 = 0
    guard system_statfs_type(path, &magic) == 0 else { throw SystemError(errno) }
    return magic
}
