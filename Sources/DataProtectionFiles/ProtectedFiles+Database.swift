import DataProtectionFormat
import DataProtectionKeys
import SystemLayer

#if canImport(Glibc)
import Glibc
#endif

// The protected-file operations a database VFS (DataProtectionSQLite) builds on: the same create and open as the
// public ones, on behalf of the database's own entry point, so the guarantee matrix sees a database as what it is.
extension ProtectedFiles {
    /// The same files with another chunk size (a database's pages and chunks line up), through the same keys and seam.
    ///
    /// - Parameter chunkSize: plaintext bytes per chunk of new files (checked at `create`).
    package func withChunkSize(_ chunkSize: Int) -> ProtectedFiles {
        if options.chunkSize == chunkSize { return self }
        return ProtectedFiles(keys: keys, options: ProtectedFileOptions(cipher: options.cipher, chunkSize: chunkSize), coordinator: coordinator, io: io)
    }

    /// The file-system seam these files go through (a database's other files, its locks and `-shm`, use it too).
    package var fileIO: any FileIO { io }

    /// Creates the protected file `path` for a database, or takes over the empty file there; nil when a protected file
    /// (non-empty) is there by the time the lock below is held, for the caller to open.
    ///
    /// A crash between a create's exclusive open and its header write leaves an empty file, which holds nothing (the
    /// file layer promises nothing for a file never synced), and several connections may create or open the same
    /// journal or WAL at once. So whoever writes a header does it holding an OFD lock of one byte far past any content
    /// (and past SQLite's lock bytes), and only while the file is still empty and still at `path`: the first one makes
    /// it a protected file, the others find it non-empty and open it. Nothing empty is removed that another connection
    /// might be opening.
    /// - Parameter exclusive: fail `.alreadyExists` when anything is at `path` (SQLite's `SQLITE_OPEN_EXCLUSIVE`).
    /// - Throws: as `create(_:protection:)`; `.untrustedFile` for a link, FIFO or directory at the name.
    package func createOrAdopt(
        _ path: String, protection: ProtectionClass, exclusive: Bool, via: ProtectedDataEntryPoint
    ) throws(ProtectionError) -> ProtectedFileHandle? {
        let (header, generation) = try newHeader(path, protection: protection, via: via)
        let adoption = Int64.max - 1
        while true {
            var created = true
            let fd: Int32
            do throws(OwnedFileFailure) {
                do throws(OwnedFileFailure) { fd = try io.createOwned(path, flags: O_RDWR, mode: 0o600) } catch .system(let e) where e.errno == EEXIST && !exclusive {
                    created = false
                    do throws(OwnedFileFailure) { fd = try io.openOwned(path, flags: O_RDWR) } catch .system(let e) where e.errno == ENOENT { continue }
                }
            } catch .system(let e) { throw io.failure(e, "create", path) } catch { throw error.error("create", path, at: path) }
            guard OFDLock.waitSet(fd: fd, .exclusive, start: adoption, length: 1) == .done else {
                io.close(fd)
                throw ProtectionError(.io(EIO), "unable to create '\(path)': its creation lock failed", path: path)
            }
            // An adopter checks that the file it locked is still the one at `path`: its creator removes it when its
            // header write fails (below), and the adopter must then start again. A file's creator is the only one that
            // removes it, so the creator makes no such check (four system calls fewer per rollback-mode transaction).
            guard created || (try? io.names(path, fd)) == true else {
                io.close(fd)
                continue
            }
            let size: Int64
            do throws(SystemError) { size = try io.size(fd) } catch {
                io.close(fd)
                throw ProtectionError.errno(error.errno, "create", path)
            }
            guard size == 0 else {
                io.close(fd)  // the lock goes with it
                return nil
            }
            let h = try newFile(fd, header: header, generation: generation, path: path, journaled: true, via: via) {
                if created { try? io.unlink(path) }  // still holding the lock: waiters find the name gone and start again
            }
            _ = OFDLock.trySet(fd: fd, nil, start: adoption, length: 1)
            return h
        }
    }

    /// `open(_:forWriting:)` on behalf of the entry point `via` (a writable open first finishes an interrupted change).
    ///
    /// - Throws: as `open(_:forWriting:)`.
    package func open(_ path: String, forWriting: Bool, on via: ProtectedDataEntryPoint) throws(ProtectionError) -> ProtectedFileHandle {
        try open(path, forWriting: forWriting, via: via)
    }
}
