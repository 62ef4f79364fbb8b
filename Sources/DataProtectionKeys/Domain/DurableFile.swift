import SystemLayer
import ProtectionCrypto

#if canImport(Glibc)
import Glibc
#endif
internal import PathSyntax

/// Small files written atomically and durably, through the one atomic replace (AtomicReplace.swift).
///
/// Readers see the old contents or the new, never a mix; after a crash one of
/// the two is on disk. Used for the keybag, the device secret and the rotation journal.
package enum DurableFile {
    /// Atomically replaces `path` with `bytes`, created with `mode`.
    ///
    /// The temporary file holds an exclusive OFD lock until it has been renamed, so `sweep` (run at the next
    /// open) removes only temporaries whose writer died; a crash leaves one behind.
    /// - Throws: `.io` naming the file; the temporary file is removed and `path` is untouched.
    package static func write(_ bytes: UnsafeRawBufferPointer, to path: String, mode: mode_t, io: any FileIO) throws(ProtectionError) {
        io.close(try writeHoldingLock(bytes, to: path, mode: mode, io: io))
    }

    /// `write`, returning a descriptor of the new file that still holds its exclusive OFD lock; close it to release the lock.
    ///
    /// The lock is taken before the file has a name anyone else looks at, so another process that
    /// finds `path` and gets its lock knows that the writer is gone (see `DeviceSecretRotation`).
    static func writeHoldingLock(_ bytes: UnsafeRawBufferPointer, to path: String, mode: mode_t, io: any FileIO) throws(ProtectionError) -> Int32 {
        let replace: AtomicReplace
        do throws(SystemError) { replace = try AtomicReplace(replacing: path, mode: mode, flags: O_WRONLY, io: io) } catch {
            throw .replace(error, "write", path, io: io)
        }
        do throws(SystemError) {
            try io.writeFully(replace.fd, from: bytes, at: 0)
            try replace.commit(syncingFile: true, syncingDirectory: true, keepingAttributes: false)
            return replace.fd
        } catch {
            replace.discard()
            io.close(replace.fd)
            throw ProtectionError.errno(error.errno, "write", path)
        }
    }

    /// Removes the temporaries a write left in `directory` for files named `name` when their writer died
    /// (a crash or power loss between creating and renaming one); those still being written are kept.
    ///
    /// Matches the one rule's names and those of versions before it (`.<name>.<hex>.tmp`), which users may still
    /// have on disk: every `.<name>.….tmp`. The directory is the domain's own, so only files of ours are removed.
    /// Best effort: what cannot be removed now is left for the next open.
    package static func sweep(_ directory: String, name: String, io: any FileIO) {
        AtomicReplace.sweep(directory: directory, owner: .us, io: io) { $0.hasPrefix(".\(name).") && $0.hasSuffix(".tmp") }
    }

    /// Takes the exclusive OFD lock of `fd` (waiting, or not) and checks that `path` still names it.
    /// - Returns: false when another holds the lock (no wait) or `path` now names another file or none.
    static func lockOwned(_ fd: Int32, at path: String, wait: Bool, io: any FileIO) throws(SystemError) -> Bool {
        locking: while true {
            switch wait ? OFDLock.waitSet(fd: fd, .exclusive, start: 0, length: 0) : OFDLock.trySet(fd: fd, .exclusive, start: 0, length: 0) {
            case .done: break locking
            case .wouldBlock: return false
            case .failed(EINTR): continue
            case .failed(let code): throw SystemError(code)
            }
        }
        let mine = try io.identity(fd)
        let named: stat
        do throws(SystemError) { named = try io.linkStatus(path) } catch { return false }
        return mine.device == UInt64(named.st_dev) && mine.inode == UInt64(named.st_ino)
    }

    /// Atomically replaces `path` with `bytes` (public bytes).
    package static func write(_ bytes: [UInt8], to path: String, mode: mode_t, io: any FileIO) throws(ProtectionError) {
        try bytes.span.bytes.withUnsafeBytes { (b) throws(ProtectionError) in try write(b, to: path, mode: mode, io: io) }
    }

    /// Reads all of `path` (public bytes), refusing files over `limit` bytes.
    /// - Throws: `.notFound`, `.io`; `tooLarge` when the file exceeds `limit`.
    package static func read(_ path: String, limit: Int, io: any FileIO, tooLarge: ProtectionError) throws(ProtectionError) -> [UInt8] {
        let fd: Int32
        do throws(SystemError) { fd = try io.open(path, flags: O_RDONLY, mode: 0) } catch { throw .errno(error.errno, "read", path) }
        defer { io.close(fd) }
        let size: Int64
        do throws(SystemError) { size = try io.size(fd) } catch { throw .errno(error.errno, "read", path) }
        guard size <= Int64(limit) else { throw tooLarge }
        var out = [UInt8](repeating: 0, count: Int(size))
        let r: Result<Int, SystemError> = out.withUnsafeMutableBytes { b in
            do throws(SystemError) { return .success(try io.readFully(fd, into: b, at: 0)) } catch { return .failure(error) }
        }
        do throws(SystemError) { out.removeSubrange(try r.get()...) } catch { throw .errno(error.errno, "read", path) }
        return out
    }

    /// Overwrites `path` with random bytes, fsyncs, unlinks it and fsyncs its directory; absent files are fine.
    ///
    /// On a journaling or copy-on-write file system, or an SSD, the old blocks
    /// may survive the overwrite; the unlink plus the loss of the matching
    /// secret is what the crypto-shred relies on.
    package static func shred(_ path: String, io: any FileIO) throws(ProtectionError) {
        guard try overwrite(path, io: io, action: "destroy") else { return }
        do throws(SystemError) {
            try io.unlink(path)
            try io.syncDirectory(of: path)
        } catch {
            throw ProtectionError.errno(error.errno, "destroy", path)
        }
    }

    /// Overwrites `path` in place with random bytes of its size and fsyncs it; false when there is no such file.
    ///
    /// Only a regular file of ours is overwritten (`openOwned`): never a link's target, nor a file with another name.
    static func overwrite(_ path: String, io: any FileIO, action: String = "overwrite") throws(ProtectionError) -> Bool {
        let fd: Int32
        // RDWR: a FileIO seam may read the old bytes.
        do throws(OwnedFileFailure) { fd = try io.openOwned(path, flags: O_RDWR) } catch .system(let e) where e.errno == ENOENT {
            return false
        } catch { throw error.error(action, path, at: path) }
        defer { io.close(fd) }
        do throws(SystemError) {
            let size = Int(try io.size(fd))
            if size > 0 {
                let noise = (try? SecureRandom.bytes(size)) ?? [UInt8](repeating: 0, count: size)
                try noise.span.bytes.withUnsafeBytes { (b) throws(SystemError) in try io.writeFully(fd, from: b, at: 0) }
                try io.fsync(fd)
            }
        } catch { throw ProtectionError.errno(error.errno, action, path) }
        return true
    }
}

/// Owner-only directories and files for secrets: creation with 0700 and checks that refuse looser modes.
package enum PrivatePath {
    /// Creates `path` and any missing parents with mode 0700; existing directories are left as they are.
    package static func makeDirectory(_ path: String) throws(ProtectionError) {
        var prefix = isAbsolutePath(path) ? "" : "."
        for part in pathComponents(of: path) {
            prefix += "/" + part
            do throws(SystemError) { try io.makeDirectory(atPath: prefix, mode: 0o700) } catch where error.errno != EEXIST {
                throw ProtectionError.errno(error.errno, "create the directory", prefix)
            } catch {}
        }
    }

    /// Checks that `path` is owned by this user and not accessible to group or others.
    /// - Throws: `.insecurePermissions` naming the path and the `chmod` fix; `.notFound`; `.io`.
    static func checkPrivate(_ path: String, directory: Bool) throws(ProtectionError) {
        let st: stat
        do throws(SystemError) { st = try io.linkStatus(path) } catch { throw ProtectionError.errno(error.errno, "inspect", path) }
        let isDir = (st.st_mode & S_IFMT) == S_IFDIR, isReg = (st.st_mode & S_IFMT) == S_IFREG
        guard directory ? isDir : isReg else {
            throw ProtectionError(.insecurePermissions, "'\(path)' is not a \(directory ? "directory" : "regular file"); remove it and run the command again", path: path)
        }
        guard st.st_uid == geteuid() else {
            throw ProtectionError(.insecurePermissions, "'\(path)' is owned by uid \(st.st_uid), not by you (uid \(geteuid())); it must be yours: `chown \(geteuid()) '\(path)'`", path: path)
        }
        guard st.st_mode & 0o077 == 0 else {
            let want = directory ? "700" : "600"
            throw ProtectionError(.insecurePermissions, "'\(path)' is accessible to other users (mode \(String(st.st_mode & 0o777, radix: 8))); it holds a device secret, so fix it with `chmod \(want) '\(path)'`", path: path)
        }
    }

    /// The real calls: the domain's private directories are made before any seam is chosen.
    private static let io = SystemFileIO()
}
