import DataProtectionFormat
import SystemLayer

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

    /// `create(_:protection:)` on behalf of the entry point `via`: a new, empty, journaled protected file.
    ///
    /// - Throws: as `create(_:protection:)`.
    package func create(_ path: String, protection: ProtectionClass, via: ProtectedDataEntryPoint) throws(ProtectionError) -> ProtectedFileHandle {
        try create(path, protection: protection, reportedAs: path, journaled: true, via: via)
    }

    /// `open(_:forWriting:)` on behalf of the entry point `via` (a writable open first finishes an interrupted change).
    ///
    /// - Throws: as `open(_:forWriting:)`.
    package func open(_ path: String, forWriting: Bool, on via: ProtectedDataEntryPoint) throws(ProtectionError) -> ProtectedFileHandle {
        try open(path, forWriting: forWriting, via: via)
    }
}
