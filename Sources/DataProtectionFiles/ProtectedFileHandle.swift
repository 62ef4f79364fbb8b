import DataProtectionKeys
import DataProtectionFormat
import SystemLayer
import ProtectionCrypto
import Locking
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// An open protected file: random-access reads and writes of its plaintext.
///
/// Every read is authenticated chunk by chunk; every write re-seals the
/// chunks it touches with fresh random nonces and writes them before it
/// returns (no write-back cache: a returned `write` is in the page cache, and
/// `sync()` makes it durable). Memory stays O(chunks per batch) whatever the
/// file size. Calls on one handle are serialised; a handle may be shared
/// between threads.
///
/// Crash safety (FORMAT.md §6.7): once the file has been committed (opened, or
/// created and synced), a writable handle keeps a rollback journal beside it,
/// so a crash or I/O failure leaves the file as of the last `sync()` (or with
/// the whole of the change). `sync()` and `close()` commit; a change that failed
/// half-way makes the handle refuse further writes until it is reopened.
public final class ProtectedFileHandle: Sendable, KeyHolder {
    /// The path the handle was opened with.
    public let path: String
    /// The file's protection class.
    public let protectionClass: ProtectionClass
    /// The file's cipher (AES-256-GCM also for format-1 files with 96-bit nonces: see `header.cipher`).
    public let cipher: AEADCipher
    /// Plaintext bytes per chunk.
    public var chunkSize: Int { layout.chunkSize }

    let header: FileHeader
    package let layout: ChunkLayout
    let writable: Bool
    let io: any FileIO
    /// The file layer that opened the handle: its keys re-derive the handle's keys after an unlock.
    let files: ProtectedFiles
    /// The public entry point that opened the handle (it asks for keys again after an unlock).
    let entryPoint: ProtectedDataEntryPoint
    /// Everything that changes, behind one lock (ProtectedFileHandle+Staging.swift).
    let state: Locked<State>
    /// The handle's slot in its files' revocation registry, or -1 once it left it (or before it entered).
    private let registration = Atomic<Int>(-1)

    /// - Parameters:
    ///   - journaled: keep a rollback journal (writable handles on the file's real name).
    ///   - committed: the file as opened is its committed state (false for a file just created).
    init(
        path: String, fd: Int32, header: FileHeader, keys: FileKeys, plaintextSize: Int64, writable: Bool, files: ProtectedFiles, epoch: UInt64,
        journaled: Bool = false, committed: Bool = true, via: ProtectedDataEntryPoint
    ) {
        self.entryPoint = via
        self.path = path
        self.protectionClass = header.protectionClass
        self.cipher = header.cipher.algorithm
        self.header = header
        self.layout = ChunkLayout(headerSize: FileHeader.size, chunkSize: header.chunkSize, overhead: header.cipher.overhead)
        self.writable = writable
        self.io = files.io
        self.files = files
        // The tail slot, and for a writer one batch slot: a small file's write then needs no larger buffer.
        let staging = UnsafeMutableRawBufferPointer.allocate(byteCount: layout.stride * (writable ? 2 : 1), alignment: 16)
        self.state = Locked(State(
            fd: fd, size: plaintextSize, sealer: ChunkSealer(fileID: header.fileID, keys: keys), revokedBy: nil, epoch: epoch, staging: staging,
            journal: writable && journaled ? WriteJournal(dataPath: path) : nil,
            committedSize: committed ? plaintextSize : nil))
    }

    deinit {
        state.withLock { st in finish(&st) }
        unregisterFromRevocation()
    }

    /// Enters the handle in its files' revocation registry, so a lock reaches its keys (`ProtectedFiles.makeHandle`).
    func registerForRevocation() { registration.store(files.revocation.register(self), ordering: .releasing) }

    /// Leaves the registry; the first of `close`, `abandon` and `deinit` does, the others find nothing to do.
    private func unregisterFromRevocation() { files.revocation.unregister(slot: registration.exchange(-1, ordering: .acquiringAndReleasing)) }

    // MARK: - Public API

    /// The plaintext size in bytes.
    public var size: Int64 {
        get throws(ProtectionError) { try state.withLock { (st) throws(ProtectionError) in _ = try live(&st, "read the size of"); return st.size } }
    }

    /// Reads up to `count` bytes at `offset`; fewer only at end of file.
    /// - Parameters:
    ///   - offset: the plaintext offset to start at.
    ///   - count: how many bytes to read at most.
    /// - Returns: the plaintext, every chunk of it authenticated.
    /// - Throws: `.authenticationFailed` if any chunk read does not authenticate
    ///   (no byte of it is returned); `.locked` once the class key was withdrawn.
    public func read(at offset: Int64, count: Int) throws(ProtectionError) -> [UInt8] {
        guard count >= 0 else { throw invalid("a negative count") }
        var out = [UInt8](repeating: 0, count: count)
        let r: Result<Int, ProtectionError> = out.withUnsafeMutableBytes { b in
            do throws(ProtectionError) { return .success(try read(into: b, at: offset)) } catch { return .failure(error) }
        }
        out.removeSubrange(try r.get()...)
        return out
    }

    /// Reads into `buffer` from `offset`; returns the number of bytes read (less than
    /// `buffer.count` only at end of file).
    /// - Parameters:
    ///   - buffer: receives the plaintext (it is the caller's to wipe).
    ///   - offset: the plaintext offset to start at.
    /// - Throws: `.authenticationFailed` (nothing of the bad chunk is copied), `.locked`, `.badHandle` once closed, `.io`.
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(ProtectionError) -> Int {
        guard offset >= 0 else { throw invalid("a negative offset") }
        return try state.withLock { (st) throws(ProtectionError) -> Int in
            // A reader that meets a torn chunk finishes an interrupted write, then tries once more.
            if writable { return try readOnce(&st, into: buffer, at: offset, again: false) }
            var again = false
            return try files.retryingAfterRecovery(path, class: protectionClass) { () throws(ProtectionError) -> Int in
                defer { again = true }
                return try readOnce(&st, into: buffer, at: offset, again: again)
            }
        }
    }

    /// One attempt of `read(into:at:)`; `again` for the one after a recovery, which reads the size anew.
    ///
    /// A method, not a local function: a local function's captured counter was a heap box allocated on every read.
    private func readOnce(_ st: inout State, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64, again: Bool) throws(ProtectionError) -> Int {
        if again { try refreshSize(&st) }
        let sealer = try live(&st, "read")
        let end = min(offset + Int64(buffer.count), st.size)
        guard end > offset else { return 0 }
        try readRange(&st, sealer, from: offset, to: end, into: buffer.baseAddress!)
        st.bytesOpened &+= end - offset  // reported once, at close (no metric call per read)
        return Int(end - offset)
    }

    /// Writes `bytes` at `offset`, extending the file (with zeros in any gap) if needed.
    ///
    /// The touched chunks are re-sealed with fresh nonces and written before this returns; `sync()` makes them durable.
    /// - Parameters:
    ///   - bytes: the plaintext.
    ///   - offset: the plaintext offset to write at.
    /// - Throws: `.locked`, `.badHandle` (read-only, closed, or after a failed change), `.fileTooLarge`, `.io`.
    public func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(ProtectionError) {
        guard offset >= 0 else { throw invalid("a negative offset") }
        guard bytes.count > 0 else { return }
        try write(.memory(bytes.baseAddress!), count: bytes.count, at: offset)
    }

    /// Writes `bytes` at `offset` (see `write(_:at:)`).
    /// - Parameters:
    ///   - bytes: the plaintext.
    ///   - offset: the plaintext offset to write at.
    /// - Throws: `.locked`, `.badHandle`, `.fileTooLarge`, `.io`.
    public func write(_ bytes: [UInt8], at offset: Int64) throws(ProtectionError) {
        try bytes.span.bytes.withUnsafeBytes { (b) throws(ProtectionError) in try write(b, at: offset) }
    }

    /// Writes `count` bytes of the regular file `source`, from its offset `sourceOffset`, at `offset`:
    /// the threads sealing each batch read their own pieces of it, so reading the input overlaps the cipher.
    func write(fromFile source: Int32, at sourceOffset: Int64, count: Int, to offset: Int64) throws(ProtectionError) {
        guard count > 0 else { return }
        try write(.file(source, base: sourceOffset), count: count, at: offset)
    }

    private func write(_ src: WriteSource, count: Int, at offset: Int64) throws(ProtectionError) {
        try state.withLock { (st) throws(ProtectionError) in
            let sealer = try live(&st, "write")
            guard writable else { throw ProtectionError(.badHandle, "unable to write '\(path)': the handle was opened read-only; open it for writing", path: path) }
            try guardingChange(&st, "write") { (st) throws(ProtectionError) in try writeRange(&st, sealer, src, count: count, at: offset) }
        }
    }

    /// Appends `bytes` at the end of the file.
    /// - Parameter bytes: the plaintext.
    /// - Throws: `.locked`, `.badHandle`, `.fileTooLarge`, `.io`.
    public func append(_ bytes: [UInt8]) throws(ProtectionError) {
        try bytes.span.bytes.withUnsafeBytes { (b) throws(ProtectionError) in try append(b) }
    }

    /// Appends `bytes` at the end of the file (atomically with respect to other calls on this handle).
    /// - Parameter bytes: the plaintext.
    /// - Throws: `.locked`, `.badHandle`, `.fileTooLarge`, `.io`.
    public func append(_ bytes: UnsafeRawBufferPointer) throws(ProtectionError) {
        guard bytes.count > 0 else { return }
        try state.withLock { (st) throws(ProtectionError) in
            let sealer = try live(&st, "append to")
            guard writable else { throw ProtectionError(.badHandle, "unable to append to '\(path)': the handle was opened read-only", path: path) }
            try guardingChange(&st, "append to") { (st) throws(ProtectionError) in try writeRange(&st, sealer, .memory(bytes.baseAddress!), count: bytes.count, at: st.size) }
        }
    }

    /// Sets the plaintext size: cuts the end off, or extends with zeros.
    /// - Parameter newSize: the new plaintext size in bytes.
    /// - Throws: `.locked`, `.badHandle`, `.invalidArgument` for a negative size, `.io`.
    public func truncate(to newSize: Int64) throws(ProtectionError) {
        guard newSize >= 0 else { throw invalid("a negative size") }
        try state.withLock { (st) throws(ProtectionError) in
            let sealer = try live(&st, "truncate")
            guard writable else { throw ProtectionError(.badHandle, "unable to truncate '\(path)': the handle was opened read-only", path: path) }
            try guardingChange(&st, "truncate") { (st) throws(ProtectionError) in
                if newSize > st.size {
                    try writeRange(&st, sealer, .zeros, count: Int(newSize - st.size), at: st.size)
                } else if newSize < st.size {
                    try shrink(&st, sealer, to: newSize)
                }
            }
        }
    }

    /// Makes every completed write durable (`fsync`) and commits it: a crash no longer rolls it back.
    ///
    /// - Throws: `.io` when the data or the journal cannot be made durable (the
    ///   handle then refuses further writes; reopening rolls back to the previous
    ///   commit); `.badHandle` after an earlier failed change.
    public func sync() throws(ProtectionError) {
        try state.withLock { (st) throws(ProtectionError) in
            _ = try live(&st, "sync")
            if let failed = st.failed { throw failedChange(failed, "sync") }
            try commit(&st)
        }
    }

    /// The file descriptor (-1 once closed): a replace locks its temporary file through it.
    var descriptor: Int32 { state.withLock { $0.fd } }

    /// Closes the file and wipes its keys and the plaintext it staged; later calls fail with `.badHandle`.
    ///
    /// A handle that changed a committed file commits first (as `sync()` does),
    /// because its journal can be removed only once the data it protects is
    /// durable. If that fails, or an earlier change failed, the journal stays and
    /// the next writable open (or `ProtectedFiles.recover`) rolls the file back to
    /// its last commit; call `sync()` before `close()` to see such a failure.
    public func close() {
        state.withLock { st in finish(&st) }
        unregisterFromRevocation()
    }

    /// Closes the descriptors without committing, as a killed process would: a hot journal stays for recovery.
    ///
    /// For crash tests and harnesses; an application calls `close()`.
    func abandon() {
        state.withLock { st in
            st.journal?.abandon(io)
            if st.fd >= 0 { io.close(st.fd); st.fd = -1 }
            st.sealer = nil
            st.dropPlaintext()
        }
        unregisterFromRevocation()
    }

    /// Commits outstanding journaled changes (when possible), closes the journal and the file, drops the keys.
    ///
    /// A handle already closed (or abandoned) has no descriptor, no keys and a zeroed staging buffer, and nothing can
    /// put plaintext there again (every operation needs `live`, which never readmits keys without a descriptor), so
    /// `deinit` after `close()` does not wipe the 4–8 KiB a second time.
    func finish(_ st: inout State) {
        if st.fd >= 0, st.failed == nil, st.journal?.hot == true { try? commit(&st) }
        st.journal?.close(io)
        guard st.fd >= 0 else { return }
        io.close(st.fd)
        st.fd = -1
        reportClosed(st)
        st.sealer = nil
        st.dropPlaintext()
    }

    // MARK: - Errors (reading, writing, revocation and the journal: the ProtectedFileHandle+*.swift files)

    func invalid(_ what: String) -> ProtectionError {
        ProtectionError(.invalidArgument, "invalid request on '\(path)': \(what)", path: path)
    }

    func authFailure(_ e: CryptoError, chunk: Int64) -> ProtectionError {
        ProtectionError(
            .authenticationFailed,
            "unable to read '\(path)': chunk \(chunk) failed authentication; the file was modified, truncated or damaged; restore it from a backup",
            path: path, underlying: e)
    }

    func ioError(_ e: SystemError, _ action: String) -> ProtectionError { .errno(e.errno, action, path) }
}
