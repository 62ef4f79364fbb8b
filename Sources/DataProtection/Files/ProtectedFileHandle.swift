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
    let layout: ChunkLayout
    let writable: Bool
    let io: any FileIO
    /// The file layer that opened the handle: its keys re-derive the handle's keys after an unlock.
    let files: ProtectedFiles
    /// The public entry point that opened the handle (it asks for keys again after an unlock).
    let entryPoint: ProtectedDataEntryPoint
    private let state: Locked<State>
    /// The handle's slot in its files' revocation registry, or -1 once it left it (or before it entered).
    private let registration = Atomic<Int>(-1)

    struct State: ~Copyable, @unchecked Sendable {  // only touched under `state`'s lock
        var fd: Int32
        var size: Int64
        var sealer: ChunkSealer?  // nil once closed or revoked
        var revokedBy: ProtectionError?
        /// The live-lock epoch the keys were obtained under.
        var epoch: UInt64
        /// The file's last chunk while its authenticated plaintext sits in the tail slot (after its nonce), or -1.
        /// Set when open authenticates the last chunk, so the first read of a small file costs nothing more, and by
        /// every write that seals the last chunk, so the next append re-seals it without reading and opening it.
        var tail: Int64 = -1
        /// The tail slot, then one slot per chunk of a batch (grown on demand up to a full batch).
        var staging: UnsafeMutableRawBufferPointer
        /// The rollback journal; nil for read-only handles and a replace's temporary file.
        var journal: WriteJournal?
        /// The plaintext size as of the last commit; nil for a created file never synced (nothing to roll back to).
        var committedSize: Int64?
        /// A journaled change that failed half-way: the file no longer matches this handle, so writes stop.
        var failed: ProtectionError?
        /// Plaintext bytes per batch (`batchBytes`, or `streamingBatchBytes` behind a whole-file stream).
        var batchBytes = ProtectedFileHandle.batchBytes

        deinit { staging.deallocate() }  // wiped by `finish`, which every handle's deinit runs first

        /// Forgets the kept last chunk and zeroes the staging buffer: no plaintext outlives the keys or the handle.
        mutating func dropPlaintext() {
            tail = -1
            wipeMemory(staging)
        }

        /// The tail slot: nonce-sized gap, then the plaintext of chunk `tail`.
        var tailSlot: UnsafeMutableRawPointer { staging.baseAddress! }

        /// Makes room for `chunks` batch slots of `stride` bytes after the tail slot, which keeps its bytes; returns
        /// the first batch slot (small files never pay for a full batch).
        @inline(__always)
        mutating func reserve(_ chunks: Int, stride: Int) -> UnsafeMutableRawPointer {
            let need = (chunks + 1) * stride
            if staging.count < need {
                let grown = UnsafeMutableRawBufferPointer.allocate(byteCount: need, alignment: 16)  // malloc's own alignment: no memalign
                if tail >= 0 { grown.baseAddress!.copyMemory(from: staging.baseAddress!, byteCount: stride) }
                wipeMemory(staging)  // it held plaintext
                staging.deallocate()
                staging = grown
            }
            return staging.baseAddress! + stride
        }
    }

    /// Plaintext bytes sealed or opened per batch: a large call is done batch by batch, in a staging buffer the
    /// handle keeps (and zeroes when a lock revokes it), so memory is O(batch).
    static let batchBytes = 1 << 20
    /// The batch of the handles behind whole-file streams (`ProtectedFiles.write(contentsOf:)`, `read(_:into:)`),
    /// which nobody else holds and which close when the stream ends. The cores meet at the end of every batch (one
    /// waits while the other finishes the last piece), and four times fewer meetings made `dpctl put` of 1 GiB
    /// 5–8 % faster (interleaved runs; 8 MiB gained nothing more). Handles given to callers keep 1 MiB: their
    /// buffer outlives the call, and `lock` zeroes it.
    static let streamingBatchBytes = 4 << 20

    /// Chunks in a batch of `bytes` plaintext bytes (at least one).
    static func batchChunks(_ bytes: Int, chunkSize: Int) -> Int { max(1, bytes / chunkSize) }

    /// Makes this handle work in `streamingBatchBytes` batches; returns the plaintext bytes of one such batch
    /// (whole chunks), the size in which a stream should hand data to it.
    func useStreamingBatches() -> Int {
        state.withLock { $0.batchBytes = Self.streamingBatchBytes }
        return Self.batchChunks(Self.streamingBatchBytes, chunkSize: chunkSize) * chunkSize
    }

    /// Bytes of the staging buffer the handle keeps between calls (what a lock or a close zeroes).
    var stagingBytes: Int { state.withLock { $0.staging.count } }
    /// Whether the handle holds keys right now (false once closed or revoked).
    package var holdsKeys: Bool { state.withLock { $0.sealer != nil } }
    /// Whether the staging buffer holds only zero bytes (for tests: no plaintext left behind).
    var stagingIsZeroed: Bool { state.withLock { $0.staging.allSatisfy { $0 == 0 } } }

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
            journal: writable && journaled ? WriteJournal(path: journalPath(for: path), dataPath: path) : nil,
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
            var attempt = 0
            func once(_ st: inout State) throws(ProtectionError) -> Int {
                attempt += 1
                if attempt > 1 { try refreshSize(&st) }
                let sealer = try live(&st, "read")
                let end = min(offset + Int64(buffer.count), st.size)
                guard end > offset else { return 0 }
                try readRange(&st, sealer, from: offset, to: end, into: buffer.baseAddress!)
                return Int(end - offset)
            }
            // A reader that meets a torn chunk finishes an interrupted write, then tries once more.
            if writable { return try once(&st) }
            return try files.retryingAfterRecovery(path) { () throws(ProtectionError) in try once(&st) }
        }
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
    private func finish(_ st: inout State) {
        if st.fd >= 0, st.failed == nil, st.journal?.hot == true { try? commit(&st) }
        st.journal?.close(io)
        if st.fd >= 0 { io.close(st.fd); st.fd = -1 }
        st.sealer = nil
        st.dropPlaintext()
    }

    /// Withdraws the handle's keys if its class is now locked (`KeyHolder`): later calls throw `.locked`.
    ///
    /// The descriptor stays open so `close()` behaves as usual; the keys are
    /// dropped here, under the handle's lock, so no operation is half done.
    func revoke(where locked: (ProtectionClass) -> Bool) {
        guard locked(protectionClass) else { return }
        state.withLock { st in Self.drop(&st, .locked(protectionClass)) }
    }

    /// Drops the keys and the staged plaintext; later calls throw `error` (until an unlock, for `.locked`).
    private static func drop(_ st: inout State, _ error: ProtectionError) {
        st.sealer = nil
        st.revokedBy = error
        st.dropPlaintext()
    }

    /// Writes a new file's header and its single empty last chunk, in one `pwrite` from offset 0.
    func writeHeaderAndEmptyChunk(_ header: [UInt8]) throws(ProtectionError) {
        try state.withLock { (st) throws(ProtectionError) in
            let sealer = try live(&st, "create")
            st.tail = -1
            let slot = st.tailSlot  // scratch: the empty chunk has no plaintext to keep
            do throws(CryptoError) { try sealer.fillNonces(slot, count: 1, stride: layout.stride) } catch {
                throw ProtectionError(.io(EIO), "unable to create '\(path)': \(error.message)", path: path, underlying: error)
            }
            sealer.withSession { sealer.seal(slot, count: 0, intoSlot: slot, index: 0, last: true, in: &$0) }
            let chunkAt = Int(layout.offset(ofChunk: 0)), total = chunkAt + layout.overhead
            assert(header.count == chunkAt, "the header ends where chunk 0 starts")
            try withUnsafeTemporaryAllocation(byteCount: total, alignment: 16) { (b) throws(ProtectionError) in
                header.withUnsafeBytes { b.copyMemory(from: $0) }
                (b.baseAddress! + chunkAt).copyMemory(from: slot, byteCount: layout.overhead)
                do throws(SystemError) { try io.writeFully(st.fd, from: UnsafeRawBufferPointer(b), at: 0) } catch { throw ioError(error, "create") }
            }
        }
    }

    /// Authenticates the last chunk, so the size derived from the file size can be trusted.
    ///
    /// `prefix` holds the file's first bytes as read at open; when the last chunk
    /// lies inside it, no further read is made. The plaintext is kept for the next read.
    func verifyLastChunk(prefix: [UInt8]) throws(ProtectionError) {
        try state.withLock { (st) throws(ProtectionError) in
            let sealer = try live(&st, "open")
            let last = layout.chunkCount(forPlaintextSize: st.size) - 1
            let plen = layout.plaintextLength(ofChunk: last, plaintextSize: st.size)
            let start = Int(layout.offset(ofChunk: last)), len = plen + layout.overhead
            let slot = st.tailSlot
            if start + len <= prefix.count {
                // Opened straight from the bytes read at open into the slot's plaintext place.
                let r: Result<Void, CryptoError> = prefix.withUnsafeBytes { p in
                    do throws(CryptoError) {
                        // A file of one chunk: its plaintext stays in the tail slot and every read is served from
                        // there, so no later session needs this subkey (a write seals under the handle's own key nonce).
                        try sealer.withSession(sharingSubkeys: last > 0) { (session) throws(CryptoError) in
                            try sealer.open(slot: p.baseAddress! + start, count: plen, into: slot + sealer.nonceSize, index: last, last: true, in: &session)
                        }
                        return .success(())
                    } catch { return .failure(error) }
                }
                if case .failure(let error) = r { throw authFailure(error, chunk: last) }
            } else {
                _ = try loadChunk(&st, sealer, last, size: st.size, slot: slot)
            }
            st.tail = last
        }
    }

    // MARK: - Internals (called with the state lock held)

    /// The keys for the next operation, after the lock check (one atomic load when attached to a live lock).
    ///
    /// If the domain locked since the keys were obtained and this class locks
    /// with it, the keys are dropped (wiped) and `.locked` is thrown. A handle
    /// whose keys were dropped gets them again from the key provider once the
    /// class is unlocked, so work resumes on the same handle.
    ///
    /// The check never applies a lock itself (that would revoke this very handle, whose lock is held here): a passed
    /// auto-lock deadline counts as locked (`Revocation.revokes`), and the listener applies it.
    @inline(__always)
    private func live(_ st: inout State, _ action: String) throws(ProtectionError) -> ChunkSealer {
        let r = files.revocation
        let e = r.epoch
        let revoked = r.revokes(protectionClass)
        if revoked {
            Self.drop(&st, .locked(protectionClass))
        } else if e != st.epoch, st.sealer != nil {
            st.epoch = e
        }
        if st.sealer == nil, st.fd >= 0, st.revokedBy?.code == .locked, !revoked {
            do throws(ProtectionError) {
                // Keys again after an unlock: through the same admission as an open, so a lock cannot miss them.
                try files.keys.admit(protectionClass, via: entryPoint) { (access, epoch) throws(ProtectionError) in
                    st.sealer = ChunkSealer(fileID: header.fileID, keys: try files.fileKeys(for: header, access))
                    st.revokedBy = nil
                    st.epoch = epoch
                }
            } catch { throw error.about(path, action) }
        }
        if let s = st.sealer { return s }
        if let e = st.revokedBy { throw e.about(path, action) }
        throw ProtectionError(.badHandle, "unable to \(action) '\(path)': the handle is closed; open the file again", path: path)
    }

    private func invalid(_ what: String) -> ProtectionError {
        ProtectionError(.invalidArgument, "invalid request on '\(path)': \(what)", path: path)
    }

    private func authFailure(_ e: CryptoError, chunk: Int64) -> ProtectionError {
        ProtectionError(
            .authenticationFailed,
            "unable to read '\(path)': chunk \(chunk) failed authentication; the file was modified, truncated or damaged; restore it from a backup",
            path: path, underlying: e)
    }

    func ioError(_ e: SystemError, _ action: String) -> ProtectionError { .errno(e.errno, action, path) }

    /// Disk bytes of chunks `first..<first+n` in a file of `size` plaintext bytes.
    private func diskLength(first: Int64, n: Int, size: Int64) -> Int {
        var total = 0
        for j in first..<(first + Int64(n)) { total += layout.plaintextLength(ofChunk: j, plaintextSize: size) + layout.overhead }
        return total
    }

    /// Reads and opens chunks covering plaintext `[from, to)` into `out` (which receives `to - from` bytes).
    private func readRange(_ st: inout State, _ sealer: ChunkSealer, from: Int64, to: Int64, into out: UnsafeMutableRawPointer) throws(ProtectionError) {
        let cs = Int64(layout.chunkSize)
        if st.tail >= 0, layout.chunkIndex(containing: from) == st.tail, layout.chunkIndex(containing: to - 1) == st.tail {
            // Served from the chunk authenticated at open.
            out.copyMemory(from: st.staging.baseAddress! + header.cipher.nonceSize + Int(from - st.tail * cs), byteCount: Int(to - from))
            return
        }
        let lastOfFile = layout.chunkCount(forPlaintextSize: st.size) - 1
        let batch = Self.batchChunks(st.batchBytes, chunkSize: layout.chunkSize)
        var i = layout.chunkIndex(containing: from)
        let lastWanted = layout.chunkIndex(containing: to - 1)
        while i <= lastWanted {
            let n = Int(min(Int64(batch), lastWanted - i + 1))
            let staging = st.reserve(n, stride: layout.stride)
            // Every chunk of a batch is full except possibly the file's last, so slot k is at k·stride.
            // Each part reads its chunks and opens them, so one core's read overlaps the other's decryption.
            let size = st.size, stride = layout.stride, first = i, fd = st.fd
            try ChunkParallelism.forEachPart(count: n, chunkSize: layout.chunkSize) { (part) throws(ProtectionError) in
                let len = diskLength(first: first + Int64(part.lowerBound), n: part.count, size: size)
                let got: Int
                do throws(SystemError) {
                    got = try io.readFully(fd, into: UnsafeMutableRawBufferPointer(start: staging + part.lowerBound * stride, count: len),
                                           at: layout.offset(ofChunk: first + Int64(part.lowerBound)))
                } catch { throw ioError(error, "read") }
                guard got == len else {
                    throw ProtectionError(.authenticationFailed, "unable to read '\(path)': the file is shorter than its chunks (truncated while open?); restore it from a backup", path: path)
                }
                try sealer.withSession { (session) throws(ProtectionError) in
                    for k in part {
                        let j = first + Int64(k)
                        let plen = layout.plaintextLength(ofChunk: j, plaintextSize: size)
                        let slot = staging + k * stride
                        let cStart = j * cs
                        let wantFrom = max(from, cStart), wantTo = min(to, cStart + Int64(plen))
                        do throws(CryptoError) {
                            if wantFrom == cStart && wantTo == cStart + Int64(plen) {
                                try sealer.open(slot: slot, count: plen, into: out + Int(cStart - from), index: j, last: j == lastOfFile, in: &session)
                            } else {
                                let plain = slot + sealer.nonceSize
                                try sealer.open(slot: slot, count: plen, into: plain, index: j, last: j == lastOfFile, in: &session)
                                (out + Int(wantFrom - from)).copyMemory(from: plain + Int(wantFrom - cStart), byteCount: Int(wantTo - wantFrom))
                            }
                        } catch { throw authFailure(error, chunk: j) }
                    }
                }
            }
            i += Int64(n)
        }
    }

    /// Reads and opens chunk `j` (of a file of `size` bytes) into its staging slot; returns the plaintext pointer.
    private func loadChunk(_ st: inout State, _ sealer: ChunkSealer, _ j: Int64, size: Int64, slot: UnsafeMutableRawPointer) throws(ProtectionError) -> UnsafeMutableRawPointer {
        let plen = layout.plaintextLength(ofChunk: j, plaintextSize: size)
        let len = plen + layout.overhead
        let got: Int
        do throws(SystemError) {
            got = try io.readFully(st.fd, into: UnsafeMutableRawBufferPointer(start: slot, count: len), at: layout.offset(ofChunk: j))
        } catch { throw ioError(error, "read") }
        guard got == len else {
            throw ProtectionError(.authenticationFailed, "unable to read '\(path)': the file is shorter than its chunks; restore it from a backup", path: path)
        }
        let plain = slot + sealer.nonceSize
        let last = j == layout.chunkCount(forPlaintextSize: size) - 1
        do throws(CryptoError) {
            try sealer.withSession { (session) throws(CryptoError) in try sealer.open(slot: slot, count: plen, into: plain, index: j, last: last, in: &session) }
        } catch { throw authFailure(error, chunk: j) }
        return plain
    }

    /// Writes `count` bytes from `src` at plaintext `offset`, re-sealing every touched chunk.
    private func writeRange(_ st: inout State, _ sealer: ChunkSealer, _ src: WriteSource, count: Int, at offset: Int64) throws(ProtectionError) {
        let oldSize = st.size
        let end = offset + Int64(count)
        guard end <= ChunkLayout.maxPlaintextSize else {
            throw ProtectionError(.fileTooLarge, "unable to write '\(path)': a protected file holds at most 256 TiB", path: path)
        }
        let newSize = max(oldSize, end)
        let cs = Int64(layout.chunkSize)
        let oldLast = layout.chunkCount(forPlaintextSize: oldSize) - 1
        let newLast = layout.chunkCount(forPlaintextSize: newSize) - 1
        // Chunks from the old last one (its flag or length changes) or the first written, whichever is lower.
        var i = layout.chunkIndex(containing: min(offset, oldSize))
        if newSize > oldSize { i = min(i, oldLast) }
        let lastTouched = layout.chunkIndex(containing: end - 1)
        let batch = Self.batchChunks(st.batchBytes, chunkSize: layout.chunkSize)
        let stride = layout.stride, nonce = sealer.nonceSize
        let zeros = if case .zeros = src { true } else { false }
        // The tail slot: read below for the old last chunk, rewritten with the new last chunk; what it holds when the
        // call ends is decided here (nothing, if the call fails part-way).
        let keptTail = st.tail
        var tailAfter: Int64 = -1
        defer { st.tail = tailAfter }
        while i <= lastTouched {
            let n = Int(min(Int64(batch), lastTouched - i + 1))
            let staging = st.reserve(n, stride: stride)
            // Pass 1: put each chunk's new plaintext in its slot, unless it comes whole from `src` (pass 2 takes it).
            var pos = 0
            for j in i..<(i + Int64(n)) {
                let c = plan(j, oldSize: oldSize, oldLast: oldLast, newSize: newSize, offset: offset, end: end)
                if !(c.whole && !zeros) {
                    let plain = staging + pos + nonce
                    var keep = 0
                    if c.needsOld {
                        keep = layout.plaintextLength(ofChunk: j, plaintextSize: oldSize)
                        if j == keptTail {
                            plain.copyMemory(from: st.tailSlot + nonce, byteCount: keep)  // an append: no read, no open
                        } else {
                            _ = try loadChunk(&st, sealer, j, size: oldSize, slot: staging + pos)
                        }
                    }
                    if keep < c.length { (plain + keep).initializeMemory(as: UInt8.self, repeating: 0, count: c.length - keep) }
                    if c.writeTo > c.writeFrom, !zeros {
                        try copy(src, c.writeFrom - offset, count: Int(c.writeTo - c.writeFrom), to: plain + Int(c.writeFrom - j * cs))
                    }
                }
                pos += c.length + layout.overhead
            }
            // Before the batch overwrites chunks that existed at the last commit, their old bytes go to the journal.
            try journalChunks(&st, i..<(i + Int64(n)))
            // Pass 2: nonces for the whole batch in one CSPRNG call, then seal every chunk.
            do throws(CryptoError) { try sealer.fillNonces(staging, count: n, stride: stride) } catch {
                throw ProtectionError(.io(EIO), "unable to write '\(path)': \(error.message)", path: path, underlying: error)
            }
            // Both cores seal pieces of the batch; whichever is free writes the sealed pieces, in order, in one
            // `pwrite` per run of them (the file's inode lock admits one writer at a time anyway).
            let first = i, fd = st.fd, tailPlain = st.tailSlot + nonce
            try ChunkParallelism.forEachPart(count: n, chunkSize: layout.chunkSize) { (part) throws(ProtectionError) in
                try sealer.withSession { (session) throws(ProtectionError) in
                    for k in part {
                        let j = first + Int64(k)
                        let c = plan(j, oldSize: oldSize, oldLast: oldLast, newSize: newSize, offset: offset, end: end)
                        let slot = staging + k * stride  // all but the file's last chunk are full
                        var from = UnsafeRawPointer(slot + nonce)
                        if c.whole {
                            switch src {
                            case .memory(let p): from = p + Int(j * cs - offset)  // sealed straight from the caller's buffer
                            case .file: try copy(src, j * cs - offset, count: c.length, to: slot + nonce)  // read by the core that seals it
                            case .zeros: break
                            }
                        }
                        if j == newLast {
                            // Kept for the next append, and sealed from the kept copy: the two cannot differ.
                            tailPlain.copyMemory(from: from, byteCount: c.length)
                            from = UnsafeRawPointer(tailPlain)
                        }
                        sealer.seal(from, count: c.length, intoSlot: slot, index: j, last: j == newLast, in: &session)
                    }
                }
            } thenInOrder: { (run) throws(ProtectionError) in
                let bytes = diskLength(first: first + Int64(run.lowerBound), n: run.count, size: newSize)
                do throws(SystemError) {
                    try io.writeFully(fd, from: UnsafeRawBufferPointer(start: staging + run.lowerBound * stride, count: bytes),
                                      at: layout.offset(ofChunk: first + Int64(run.lowerBound)))
                } catch { throw ioError(error, "write") }
            }
            i += Int64(n)
        }
        st.size = newSize
        tailAfter = lastTouched == newLast ? newLast : keptTail  // an untouched last chunk is still the one kept
    }

    /// Copies bytes `k..<k+count` of a write from `src`; a file source that ends early is an error.
    private func copy(_ src: WriteSource, _ k: Int64, count: Int, to destination: UnsafeMutableRawPointer) throws(ProtectionError) {
        let got: Int
        do throws(SystemError) { got = try src.copy(k, count: count, to: destination) } catch {
            throw ProtectionError.errno(error.errno, "read the input for", path)
        }
        guard got == count else {
            throw ProtectionError(.io(EIO), "unable to write '\(path)': its input file became shorter while it was being read; write it again once the input is complete", path: path)
        }
    }

    /// What a write of plaintext `[offset, end)` does to chunk `j`.
    private struct ChunkPlan {
        var length: Int  // plaintext bytes after the write
        var needsOld: Bool  // some old bytes survive: read and open the old chunk first
        var whole: Bool  // every byte comes from the write
        var writeFrom: Int64, writeTo: Int64  // the written part, in file plaintext offsets
    }

    @inline(__always)
    private func plan(_ j: Int64, oldSize: Int64, oldLast: Int64, newSize: Int64, offset: Int64, end: Int64) -> ChunkPlan {
        let rs = j * Int64(layout.chunkSize)
        let length = layout.plaintextLength(ofChunk: j, plaintextSize: newSize)
        let re = rs + Int64(length)
        let needsOld = rs < oldSize && j <= oldLast && (rs < offset || (re > end && end < oldSize))
        let wFrom = max(rs, offset), wTo = min(re, end)
        return ChunkPlan(length: length, needsOld: needsOld, whole: !needsOld && wFrom == rs && wTo == re, writeFrom: wFrom, writeTo: max(wFrom, wTo))
    }

    /// Cuts the file to `newSize` (< current size): re-seals the new last chunk, then drops the rest.
    ///
    /// With a journal, pending changes are committed first and the truncate is
    /// journaled with both versions of the new last chunk, then committed at once
    /// (FORMAT.md §6.7): bytes past the new end are gone, so only rolling forward
    /// or back by the file's size can finish it.
    private func shrink(_ st: inout State, _ sealer: ChunkSealer, to newSize: Int64) throws(ProtectionError) {
        let last = layout.chunkCount(forPlaintextSize: newSize) - 1
        let journaled = st.journal != nil && st.committedSize != nil
        var old: [UInt8] = []
        if journaled {
            try commit(&st)
            old = try rawChunk(&st, last, size: st.size)
        }
        st.tail = -1
        let slot = st.tailSlot  // scratch: sealed in place below
        let plain = try loadChunk(&st, sealer, last, size: st.size, slot: slot)
        let newLen = layout.plaintextLength(ofChunk: last, plaintextSize: newSize)
        do throws(CryptoError) { try sealer.fillNonces(slot, count: 1, stride: layout.stride) } catch {
            throw ProtectionError(.io(EIO), "unable to truncate '\(path)': \(error.message)", path: path, underlying: error)
        }
        sealer.withSession { sealer.seal(plain, count: newLen, intoSlot: slot, index: last, last: true, in: &$0) }
        let sealed = UnsafeRawBufferPointer(start: slot, count: newLen + layout.overhead)
        if journaled {
            try st.journal!.begin(
                io, kind: .truncate, committedSize: layout.fileSize(forPlaintextSize: st.size), targetSize: layout.fileSize(forPlaintextSize: newSize),
                dataHeader: try diskHeader(&st))
            try old.span.bytes.withUnsafeBytes { (b) throws(ProtectionError) in try st.journal!.append(io, .undo, offset: layout.offset(ofChunk: last), b) }
            try st.journal!.append(io, .redo, offset: layout.offset(ofChunk: last), sealed)
            try st.journal!.flush(io)
        }
        do throws(SystemError) {
            try io.ftruncate(st.fd, to: layout.fileSize(forPlaintextSize: newSize))
            try io.writeFully(st.fd, from: sealed, at: layout.offset(ofChunk: last))
        } catch { throw ioError(error, "truncate") }
        st.size = newSize
        if journaled { try commit(&st) }
    }
}
