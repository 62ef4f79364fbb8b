import DataProtectionKeys
import DataProtectionFiles
import SystemLayer

#if canImport(Glibc)
import Glibc
#endif

/// The file layer's I/O seam with every path taken relative to a container root and resolved beneath it.
///
/// `ProtectedFiles` built on it writes, renames and unlinks only inside the
/// container, including its atomic replace's temporary file and directory
/// fsync. Descriptor calls go to `base` unchanged.
struct ConfinedFileIO: FileIO {
    let confinement: Confinement
    let base: any FileIO

    /// Opens beneath the root; a descriptor opened for writing also takes a shared OFD lock on the file,
    /// the "being written" mark `purge` probes for, released when the descriptor closes.
    func open(_ path: String, flags: Int32, mode: mode_t) throws(SystemError) -> Int32 {
        let fd = try confinement.open(path, flags: flags, mode: mode)
        if flags & O_ACCMODE != O_RDONLY, flags & O_DIRECTORY == 0 {
            _ = OFDLock.trySet(fd: fd, .shared, start: 0, length: 0)
        }
        return fd
    }

    func close(_ fd: Int32) { base.close(fd) }

    func pread(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(SystemError) -> Int {
        try base.pread(fd, into: buffer, at: offset)
    }

    func pwrite(_ fd: Int32, from buffer: UnsafeRawBufferPointer, at offset: Int64) throws(SystemError) -> Int {
        try base.pwrite(fd, from: buffer, at: offset)
    }

    func fsync(_ fd: Int32) throws(SystemError) { try base.fsync(fd) }

    func ftruncate(_ fd: Int32, to size: Int64) throws(SystemError) { try base.ftruncate(fd, to: size) }

    func size(_ fd: Int32) throws(SystemError) -> Int64 { try base.size(fd) }

    func rename(_ from: String, to: String) throws(SystemError) { try confinement.rename(from, to: to, replacing: true) }

    func unlink(_ path: String) throws(SystemError) { try confinement.remove(path) }

    /// Names what the confinement refused (a path outside the root, a link out, a hard link) and the fix.
    func refusal(_ error: SystemError, _ action: String, _ path: String) -> (any Error)? { confinement.failure(error.errno, action, path) }

    // The `*at` calls take a directory this seam opened beneath the root and one name without "/", with
    // `O_NOFOLLOW` (the atomic replace's): nothing in them can leave the root, so they go to `base` unchanged.

    func openAt(_ directory: Int32, _ name: String, flags: Int32, mode: mode_t) throws(SystemError) -> Int32 {
        try base.openAt(directory, name, flags: flags, mode: mode)
    }

    func renameAt(_ directory: Int32, _ from: String, to: String) throws(SystemError) { try base.renameAt(directory, from, to: to) }

    func unlinkAt(_ directory: Int32, _ name: String) throws(SystemError) { try base.unlinkAt(directory, name) }

    func identityAt(_ directory: Int32, _ name: String) throws(SystemError) -> (device: UInt64, inode: UInt64) { try base.identityAt(directory, name) }

    /// Copies the `user.*` attributes of `name` (opened beneath `directory`, refused if it has a second hard link:
    /// it may be a file outside) to `destination`; a missing file or a symbolic link copies nothing.
    func copyUserAttributes(at directory: Int32, from name: String, to destination: Int32) throws(SystemError) {
        let src: Int32
        do throws(SystemError) { src = try confinement.open(name, beneath: directory, flags: O_RDONLY | O_NOFOLLOW | O_NONBLOCK) } catch where error.errno == ENOENT || error.errno == ELOOP {
            return  // a new file, or a symbolic link the replace will overwrite: nothing to keep
        }
        defer { confinement.io.close(src) }
        try ExtendedAttributes.copyUserAttributes(from: src, to: destination)
    }
}
