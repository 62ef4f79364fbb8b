#if canImport(Glibc)
import Glibc
#endif
internal import PathSyntax
public import SystemPackage

/// The file-system calls the protected-file layer makes, as a seam.
///
/// `SystemFileIO` is the real thing. Tests substitute an implementation that
/// fails the Nth call (EIO, ENOSPC, EINTR, short writes) or drops unsynced
/// writes to simulate power loss. Methods mirror the system calls: they
/// throw the raw errno (`SystemError`), and may transfer fewer bytes than
/// asked; callers loop and attach the file name.
public protocol FileIO: Sendable {
    /// `open(2)`; returns the descriptor.
    func open(_ path: String, flags: Int32, mode: mode_t) throws(SystemError) -> Int32
    /// `close(2)`; never retried.
    func close(_ fd: Int32)
    /// `pread(2)`: may return fewer bytes than asked; 0 at end of file.
    func pread(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(SystemError) -> Int
    /// `pwrite(2)`: may write fewer bytes than asked.
    func pwrite(_ fd: Int32, from buffer: UnsafeRawBufferPointer, at offset: Int64) throws(SystemError) -> Int
    /// `read(2)` at the descriptor's position (a pipe, a terminal, a caller's file): may return fewer bytes than asked.
    /// The default implementation is `SystemFileIO`'s.
    func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int
    /// `write(2)` at the descriptor's position: may write fewer bytes than asked. Default: `SystemFileIO`'s.
    func write(_ fd: Int32, from buffer: UnsafeRawBufferPointer) throws(SystemError) -> Int
    /// `lseek(2)`: moves the descriptor's position to `offset` from `whence` (`SEEK_SET`, `SEEK_CUR`, `SEEK_END`) and
    /// returns the new position. Default: `SystemFileIO`'s.
    func seek(_ fd: Int32, to offset: Int64, from whence: Int32) throws(SystemError) -> Int64
    /// `fsync(2)`.
    func fsync(_ fd: Int32) throws(SystemError)
    /// `ftruncate(2)`.
    func ftruncate(_ fd: Int32, to size: Int64) throws(SystemError)
    /// `fstat(2)`'s `st_size`.
    func size(_ fd: Int32) throws(SystemError) -> Int64
    /// `rename(2)`.
    func rename(_ from: String, to: String) throws(SystemError)
    /// `unlink(2)`.
    func unlink(_ path: String) throws(SystemError)
    /// `openat(2)` of `name` (one path component) in the open directory `directory`; `SystemFileIO`'s is in FileIO+At.swift.
    func openAt(_ directory: Int32, _ name: String, flags: Int32, mode: mode_t) throws(SystemError) -> Int32
    /// `renameat(2)` of `from` to `to`, both names in the open directory `directory`.
    func renameAt(_ directory: Int32, _ from: String, to: String) throws(SystemError)
    /// `unlinkat(2)` of the file `name` in the open directory `directory`.
    func unlinkAt(_ directory: Int32, _ name: String) throws(SystemError)
    /// `fstatat(2)` without following a link: the device and inode `name` in `directory` names.
    func identityAt(_ directory: Int32, _ name: String) throws(SystemError) -> (device: UInt64, inode: UInt64)
    /// Copies the `user.*` extended attributes of the file `name` in `directory` (when it exists) to the open
    /// file `destination`, so an atomic replace keeps them (e.g. the container's exclude-from-backup flag).
    func copyUserAttributes(at directory: Int32, from name: String, to destination: Int32) throws(SystemError)
    /// Takes an exclusive OFD lock on the whole file without waiting (`fcntl(F_OFD_SETLK, F_WRLCK)`);
    /// false when another open file description holds a conflicting lock.
    /// The default implementation is in FileIO+Locks.swift.
    func tryLockExclusive(_ fd: Int32) throws(SystemError) -> Bool
    /// Drops every OFD lock held through `fd` (`fcntl(F_OFD_SETLK, F_UNLCK)`). Default in FileIO+Locks.swift.
    func unlock(_ fd: Int32)
    /// `fstat(2)`'s device and inode numbers: which file `fd` is. Default in FileIO+Locks.swift.
    func identity(_ fd: Int32) throws(SystemError) -> (device: UInt64, inode: UInt64)
    /// `fstat(2)`'s type, link count and owner: what the owned-file open checks. Default in FileIO+OwnedFile.swift.
    func status(_ fd: Int32) throws(SystemError) -> FileStatus
    /// `openat2(2)` of `path` relative to the open directory `directory`, `resolve` a `RESOLVE_*` mask; one call,
    /// `EINTR` and `EAGAIN` left to the caller. Default in FileIO+Beneath.swift (like the three calls below).
    func openat2(_ path: String, in directory: Int32, flags: Int32, mode: mode_t, resolve: UInt64) throws(SystemError) -> Int32
    /// `mkdirat(2)` of `name` in the open directory `directory`.
    func makeDirectory(_ name: String, in directory: Int32, mode: mode_t) throws(SystemError)
    /// `unlinkat(2)` of `name` in `directory` (`AT_REMOVEDIR` when `isDirectory`).
    func unlink(_ name: String, in directory: Int32, isDirectory: Bool) throws(SystemError)
    /// `renameat(2)`, or `renameat2(RENAME_NOREPLACE)` (`EEXIST` instead of replacing) unless `replacing`.
    func rename(_ name: String, in directory: Int32, to newName: String, in newDirectory: Int32, replacing: Bool) throws(SystemError)
    /// `syncfs(2)` of the file system holding `fd`. Default in FileIO+FileSystem.swift.
    func syncFileSystem(_ fd: Int32) throws(SystemError)
    /// The library's own error for `action` on `path` failing with `error` in one of the path calls above
    /// (`open`, `rename`, `unlink`), or nil for the plain errno report.
    ///
    /// The default is nil; a confined seam names what its confinement refused and the fix.
    func refusal(_ error: SystemError, _ action: String, _ path: String) -> (any Error)?
}

extension FileIO {
    public func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int {
        while true {
            let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if n >= 0 { return n }
            if errno != EINTR { throw SystemError(errno) }
        }
    }

    public func write(_ fd: Int32, from buffer: UnsafeRawBufferPointer) throws(SystemError) -> Int {
        while true {
            let n = Glibc.write(fd, buffer.baseAddress, buffer.count)
            if n >= 0 { return n }
            if errno != EINTR { throw SystemError(errno) }
        }
    }

    public func seek(_ fd: Int32, to offset: Int64, from whence: Int32) throws(SystemError) -> Int64 {
        let position = lseek(fd, off_t(offset), whence)
        guard position >= 0 else { throw SystemError(errno) }
        return Int64(position)
    }

    public func refusal(_ error: SystemError, _ action: String, _ path: String) -> (any Error)? { nil }
}

/// An errno from a system call: swift-system's `Errno`.
public typealias SystemError = Errno

extension Errno {
    /// The error for the C `errno` value `code`.
    @inline(__always)
    public init(_ code: Int32) { self.init(rawValue: code) }

    /// The C `errno` value.
    @inline(__always)
    public var errno: Int32 { rawValue }
}

/// The real system calls. `EINTR` is retried here, except on `close`.
public struct SystemFileIO: FileIO {
    public init() {}

    public func open(_ path: String, flags: Int32, mode: mode_t) throws(SystemError) -> Int32 {
        while true {
            let fd = Glibc.open(path, flags | O_CLOEXEC, mode)
            if fd >= 0 { return fd }
            if errno != EINTR { throw SystemError(errno) }
        }
    }

    public func close(_ fd: Int32) { _ = Glibc.close(fd) }

    public func pread(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(SystemError) -> Int {
        while true {
            let n = Glibc.pread(fd, buffer.baseAddress, buffer.count, off_t(offset))
            if n >= 0 { return n }
            if errno != EINTR { throw SystemError(errno) }
        }
    }

    public func pwrite(_ fd: Int32, from buffer: UnsafeRawBufferPointer, at offset: Int64) throws(SystemError) -> Int {
        while true {
            let n = Glibc.pwrite(fd, buffer.baseAddress, buffer.count, off_t(offset))
            if n >= 0 { return n }
            if errno != EINTR { throw SystemError(errno) }
        }
    }

    public func fsync(_ fd: Int32) throws(SystemError) {
        while Glibc.fsync(fd) != 0 { if errno != EINTR { throw SystemError(errno) } }
    }

    public func ftruncate(_ fd: Int32, to size: Int64) throws(SystemError) {
        while Glibc.ftruncate(fd, off_t(size)) != 0 { if errno != EINTR { throw SystemError(errno) } }
    }

    public func size(_ fd: Int32) throws(SystemError) -> Int64 {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw SystemError(errno) }
        return Int64(st.st_size)
    }

    public func rename(_ from: String, to: String) throws(SystemError) {
        guard Glibc.rename(from, to) == 0 else { throw SystemError(errno) }
    }

    public func unlink(_ path: String) throws(SystemError) {
        guard Glibc.unlink(path) == 0 else { throw SystemError(errno) }
    }
}

extension FileIO {
    /// Reads exactly `buffer.count` bytes unless end of file comes first; returns the count read.
    package func readFully(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(SystemError) -> Int {
        var done = 0
        while done < buffer.count {
            let n: Int
            do { n = try pread(fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]), at: offset + Int64(done)) } catch {
                if error.errno == EINTR { continue }  // a seam may pass EINTR up; retrying is always right for pread
                throw error
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// One `pread` into `buffer`, retried only on `EINTR`: may return fewer bytes than asked.
    package func readOnce(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(SystemError) -> Int {
        while true {
            do { return try pread(fd, into: buffer, at: offset) } catch {
                if error.errno != EINTR { throw error }
            }
        }
    }

    /// Writes all of `buffer`, looping over short writes.
    package func writeFully(_ fd: Int32, from buffer: UnsafeRawBufferPointer, at offset: Int64) throws(SystemError) {
        var done = 0
        while done < buffer.count {
            let n: Int
            do { n = try pwrite(fd, from: UnsafeRawBufferPointer(rebasing: buffer[done...]), at: offset + Int64(done)) } catch {
                if error.errno == EINTR { continue }
                throw error
            }
            if n == 0 { throw SystemError(EIO) }
            done += n
        }
    }

    /// fsyncs the directory holding `path`, so a rename or create in it is durable.
    package func syncDirectory(of path: String) throws(SystemError) {
        let dir = parentDirectory(of: path)
        let fd = try open(dir, flags: O_RDONLY | O_DIRECTORY, mode: 0)
        defer { close(fd) }
        try fsync(fd)
    }
}

/// The name of the directory entry `e` that `readdir` returned.
///
/// Reads `d_name` in place, up to its NUL. Copying the field (`e.pointee.d_name`) would read all
/// 256 bytes of it, but the kernel packs records to the length of their names (`d_reclen`), so for
/// an entry near the end of the directory buffer that copy reads past the buffer's end
/// (AddressSanitizer: heap-buffer-overflow).
package func entryName(_ e: UnsafePointer<dirent>) -> String {
    String(cString: (UnsafeRawPointer(e) + MemoryLayout<dirent>.offset(of: \dirent.d_name)!).assumingMemoryBound(to: CChar.self))
}
