import DataProtectionKeys
import DataProtectionFormat
import SystemLayer
import Dispatch
import FileCoordination
import Locking
import ProtectionCrypto
import struct Foundation.URL

#if canImport(Glibc)
import Glibc
#endif

/// Settings for new protected files.
public struct ProtectedFileOptions: Sendable, Equatable {
    /// Cipher for new files. Default: AES-256-GCM where the CPU supports it, else XChaCha20-Poly1305.
    /// New files use AES-256-GCM with extended nonces (format version 2, FORMAT.md §7).
    public var cipher: AEADCipher
    /// Plaintext bytes per chunk: a power of two from 4 KiB to 16 MiB. Default 4 KiB (FORMAT.md §8).
    public var chunkSize: Int

    /// 4 KiB: a random 4 KiB read or write opens (and re-seals) one page-sized chunk, and an append re-seals at
    /// most 4 KiB, while sequential transfers, which two cores pipeline, run as fast as with 16 KiB with AES-GCM
    /// (FORMAT.md §8 has the measurements). Files keep the chunk size they were created with.
    public static let defaultChunkSize = 4 * 1024

    /// Options for new files.
    /// - Parameters:
    ///   - cipher: the AEAD; `.preferred` is AES-256-GCM where the CPU has AES instructions, else XChaCha20-Poly1305.
    ///   - chunkSize: plaintext bytes per chunk, a power of two from 4 KiB to 16 MiB (checked at `create`).
    public init(cipher: AEADCipher = .preferred, chunkSize: Int = ProtectedFileOptions.defaultChunkSize) {
        self.cipher = cipher
        self.chunkSize = chunkSize
    }

    var chunkShift: UInt8? {
        guard chunkSize > 0, chunkSize & (chunkSize - 1) == 0 else { return nil }
        let shift = UInt8(chunkSize.trailingZeroBitCount)
        return (FileHeader.minChunkShift...FileHeader.maxChunkShift).contains(shift) ? shift : nil
    }
}

/// What a protected file's header says, readable without any key.
public struct ProtectedFileInfo: Sendable, Equatable {
    /// The class whose key wraps the file's key.
    public let protectionClass: ProtectionClass
    /// The file's AEAD.
    public let cipher: AEADCipher
    /// Plaintext bytes per chunk.
    public let chunkSize: Int
    /// Plaintext size implied by the file size (authenticated only when the file is opened).
    public let plaintextSize: Int64
    /// The class-key generation the per-file key is wrapped with.
    public let classKeyGeneration: UInt32
    /// The format version: 2 for files written since extended nonces; 1 for older files, which keep it
    /// until a whole-file write replaces them (an AES-256-GCM file of version 1 has a budget of 2^32 chunk
    /// seals, FORMAT.md §7).
    public let formatVersion: UInt8
}

/// Creates, opens, reads and atomically writes protected files.
///
/// The main path: make a per-file key, wrap it with the class key through
/// the `ClassKeyProvider`, write the authenticated header, then stream the
/// plaintext through the chunk sealer. All file I/O goes through `io`.
public final class ProtectedFiles: Sendable {
    /// Where class keys come from, with the lock that revokes them (`ProtectionDomain.keys` or `InMemoryClassKeys`).
    public let keys: ClassKeys
    /// Cipher and chunk size for new files (existing files keep theirs).
    public let options: ProtectedFileOptions
    /// When set, whole-file writes take a coordinated `forReplacing` write of the file and
    /// whole-file reads a coordinated read, so other coordinated readers and writers (in any
    /// process) never see a half-done replacement.
    public let coordinator: FileCoordinator?
    let io: any FileIO
    /// Seals under one extended key nonce per set of file keys: 2^32 (FORMAT.md §6.1); smaller only in tests.
    let sealsPerKeyNonce: UInt64

    /// Protected files whose keys come from `keys`: usually `domain.files` instead of one made here.
    ///
    /// - Parameters:
    ///   - keys: the domain's keys (`domain.keys`), or the explicit in-process store `InMemoryClassKeys`; either
    ///     way its lock revokes every handle opened here (in every process, for a domain).
    ///   - options: cipher and chunk size for new files.
    ///   - coordinator: coordinates whole-file reads and writes with other readers and writers.
    public convenience init(keys: ClassKeys, options: ProtectedFileOptions = .init(), coordinator: FileCoordinator? = nil) {
        self.init(keys: keys, options: options, coordinator: coordinator, io: SystemFileIO(), sealsPerKeyNonce: AEADNonceMode.maxSealsPerKeyNonce)
    }

    /// Test hook: the fault-injection seam; every file-system call of these files goes through `io` (testing SPI, for
    /// tests and rigs that simulate failures and power loss or hold a file in memory, as swift-system's mocking hook is).
    @_spi(Testing) public convenience init(keys: ClassKeys, options: ProtectedFileOptions = .init(), coordinator: FileCoordinator? = nil, io: any FileIO) {
        self.init(keys: keys, options: options, coordinator: coordinator, io: io, sealsPerKeyNonce: AEADNonceMode.maxSealsPerKeyNonce)
    }

    /// The seam through which tests make handles change key nonce after `sealsPerKeyNonce` seals (1 through 2^32).
    package init(keys: ClassKeys, options: ProtectedFileOptions = .init(), coordinator: FileCoordinator? = nil, io: any FileIO = SystemFileIO(), sealsPerKeyNonce: UInt64) {
        self.keys = keys
        self.options = options
        self.coordinator = coordinator
        self.io = io
        self.sealsPerKeyNonce = sealsPerKeyNonce
    }

    /// The lock state and key-holder registry of `keys`.
    var revocation: Revocation { keys.revocation }

    /// Runs `body` under a coordinated read (or `forReplacing` write) of `path` when a coordinator is set.
    func coordinated<R>(_ path: String, writing: Bool, _ body: () throws(ProtectionError) -> R) throws(ProtectionError) -> R {
        guard let coordinator else { return try body() }
        do {
            return try coordinator.coordinateBlocking(with: [Self.intent(path, writing: writing)]) { _ in try body() }
        } catch {
            throw Self.coordinationFailure(error, path, writing: writing)
        }
    }

    /// The async form of `coordinated(_:writing:_:)`: the wait for coordination holds no thread, then `body` (the
    /// synchronous call, whose own coordination nests in this one) runs on `threads`.
    /// - Throws: as the synchronous form (the same `.coordinationFailed` on a time-out), what `body` throws, or
    ///   `CancellationError` when the task is cancelled before `body` starts (nothing done).
    package func coordinated<R: Sendable>(
        _ path: String, writing: Bool, on threads: BlockingThreads, _ body: @escaping @Sendable () throws -> R
    ) async throws -> R {
        guard let coordinator else { return try await threads.perform(body) }
        do {
            return try await coordinator.coordinate(with: [Self.intent(path, writing: writing)], on: threads, body)
        } catch let e as CoordinationError where e.code == .cancelled && Task.isCancelled {
            throw CancellationError()
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw Self.coordinationFailure(error, path, writing: writing)
        }
    }

    /// What a whole-file read or write of `path` coordinates: a read, or a `forReplacing` write.
    private static func intent(_ path: String, writing: Bool) -> FileAccessIntent {
        let url = URL(fileURLWithPath: path)
        return writing ? .writingIntent(with: url, options: .forReplacing) : .readingIntent(with: url)
    }

    /// The `ProtectionError` for a failure of a coordinated whole-file call (a `ProtectionError` passes unchanged).
    private static func coordinationFailure(_ error: any Error, _ path: String, writing: Bool) -> ProtectionError {
        switch error {
        case let e as ProtectionError: return e
        case let e as CoordinationError:
            return ProtectionError(.coordinationFailed, "unable to \(writing ? "write" : "read") '\(path)': \(e.message)", path: path, underlying: e)
        default:
            return ProtectionError(.io(EIO), "unable to \(writing ? "write" : "read") '\(path)': \(error)", path: path)
        }
    }

    /// Builds a handle for keys obtained inside `keys.admit` and registers it before the keys are used.
    func makeHandle(
        path: String, fd: Int32, header: FileHeader, keys fk: FileKeys, size: Int64, writable: Bool, epoch: UInt64, journaled: Bool, committed: Bool,
        via: ProtectedDataEntryPoint
    ) -> ProtectedFileHandle {
        let h = ProtectedFileHandle(
            path: path, fd: fd, header: header, keys: fk, plaintextSize: size, writable: writable, files: self, epoch: epoch,
            journaled: journaled, committed: committed, via: via)
        AdmissionPoint.keysObtained(header.protectionClass)
        h.registerForRevocation()
        reportOpened(h, generation: header.classKeyGeneration, created: !committed, via: via)
        return h
    }

    // MARK: Whole files

    /// `write(_:to:protection:)` (DataProtection.swift) on behalf of the entry point `via`: the atomic replace.
    package func write(_ bytes: UnsafeRawBufferPointer, to path: String, protection: ProtectionClass, via: ProtectedDataEntryPoint) throws(ProtectionError) {
        try replace(path, protection: protection, via: via) { (h) throws(ProtectionError) in try h.write(bytes, at: 0) }
    }

    /// `write(_:to:protection:)` on behalf of the entry point `via`.
    package func write(_ bytes: [UInt8], to path: String, protection: ProtectionClass, via: ProtectedDataEntryPoint) throws(ProtectionError) {
        try bytes.span.bytes.withUnsafeBytes { (b) throws(ProtectionError) in try write(b, to: path, protection: protection, via: via) }
    }

    /// Atomically replaces `path` with a protected copy of everything readable from `source`
    /// (a file descriptor: a plain file, a pipe, standard input), in O(chunk) memory.
    ///
    /// - Parameters:
    ///   - source: the descriptor to read to its end (from its current offset).
    ///   - path: the file to replace or create.
    ///   - protection: the class whose key wraps the new file's key.
    ///   - durable: fsync the new file and its directory before returning (the default).
    ///     With `false` the replacement is still atomic for readers, but a power failure soon after
    ///     may leave the old file, or a new one that fails authentication (never wrong plaintext);
    ///     for bulk imports that sync later, and for comparisons with tools that do not fsync.
    /// - Throws: `.locked`; `.io` reading `source` or writing (the temporary file is removed and `path` is untouched).
    public func write(contentsOf source: FileDescriptor, to path: String, protection: ProtectionClass, durable: Bool = true) throws(ProtectionError) {
        try write(contentsOf: source.rawValue, to: path, protection: protection, durable: durable, via: .filesWriteStream)
    }

    /// `write(contentsOf:to:protection:durable:)` on behalf of the entry point `via`.
    package func write(contentsOf source: Int32, to path: String, protection: ProtectionClass, durable: Bool = true, via: ProtectedDataEntryPoint) throws(ProtectionError) {
        try replace(path, protection: protection, durable: durable, via: via) { (h) throws(ProtectionError) in
            let cap = h.useStreamingBatches()
            var offset: Int64 = 0
            // A regular file of a batch or more is read in place by the threads that seal it (pread). What it grows
            // by meanwhile, smaller files (among them pseudo-files whose stated size is not their content) and any
            // other input (a pipe, a terminal) are read in batches below.
            let position = (try? io.seek(source, to: 0, from: SEEK_CUR)) ?? -1
            if position >= 0, (try? io.status(source))?.type == S_IFREG, let size = try? io.size(source), size - position >= Int64(cap) {
                let count = size - position
                try h.write(fromFile: source, at: position, count: Int(count), to: 0)
                offset = count
                do throws(SystemError) { _ = try io.seek(source, to: position + count, from: SEEK_SET) } catch {
                    throw ProtectionError.errno(error.errno, "read the input for", path)
                }
            }
            let buf = UnsafeMutableRawBufferPointer.allocate(byteCount: cap, alignment: 64)
            var used = 0  // bytes that have held the input's plaintext
            defer {
                wipeMemory(UnsafeMutableRawBufferPointer(rebasing: buf[..<used]))
                buf.deallocate()
            }
            while true {
                var filled = 0
                defer { used = max(used, filled) }
                while filled < cap {  // fill whole batches so appends stay chunk-aligned
                    let n: Int
                    do throws(SystemError) { n = try io.read(source, into: UnsafeMutableRawBufferPointer(rebasing: buf[filled...])) } catch {
                        if error.errno == EINTR { continue }
                        throw ProtectionError.errno(error.errno, "read the input for", path)
                    }
                    if n == 0 { break }
                    filled += n
                }
                if filled == 0 { break }
                try h.write(UnsafeRawBufferPointer(start: buf.baseAddress, count: filled), at: offset)
                offset += Int64(filled)
                if filled < cap { break }
            }
        }
    }

    /// `read(_:)` (DataProtection.swift) on behalf of the entry point `via`: a coordinated whole-file read.
    package func read(_ path: String, via: ProtectedDataEntryPoint) throws(ProtectionError) -> [UInt8] {
        try coordinated(path, writing: false) { () throws(ProtectionError) in try readWhole(path, via: via) }
    }

    private func readWhole(_ path: String, via: ProtectedDataEntryPoint) throws(ProtectionError) -> [UInt8] {
        let h = try open(path, forWriting: false, via: via)
        defer { h.close() }
        let size = try h.size
        guard size <= Int64(Int.max) else { throw ProtectionError(.fileTooLarge, "unable to read '\(path)' into memory: use a handle and read it in pieces", path: path) }
        return try h.read(at: 0, count: Int(size))
    }

    /// Reads the whole plaintext of `path` and writes it to `destination` (a file descriptor), in O(chunk) memory.
    ///
    /// - Parameters:
    ///   - path: the protected file.
    ///   - destination: where the plaintext goes (a file, a pipe, standard output).
    /// - Throws: `.locked`, `.authenticationFailed` (what was written before the bad chunk stays written; nothing
    ///   after it), `.notProtected`, `.notFound`, `.io`.
    public func read(_ path: String, into destination: FileDescriptor) throws(ProtectionError) {
        try read(path, into: destination.rawValue, via: .filesReadStream)
    }

    /// `read(_:into:)` on behalf of the entry point `via`.
    package func read(_ path: String, into destination: Int32, via: ProtectedDataEntryPoint) throws(ProtectionError) {
        try coordinated(path, writing: false) { () throws(ProtectionError) in try stream(path, into: destination, via: via) }
    }

    /// Reads batch k+1 (both cores) while a writer thread writes batch k to `destination`:
    /// two buffers, at most one write in flight, memory O(batch).
    private func stream(_ path: String, into destination: Int32, via: ProtectedDataEntryPoint) throws(ProtectionError) {
        let h = try open(path, forWriting: false, via: via)
        defer { h.close() }
        // A batch, or the whole file when it is smaller (one that grows meanwhile is read in more rounds).
        let cap = Int(min(Int64(h.useStreamingBatches()), max(1, try h.size)))
        let buffers = (0..<2).map { _ in UnsafeMutableRawBufferPointer.allocate(byteCount: cap, alignment: 64) }
        var used = [0, 0]  // bytes of each buffer that have held plaintext
        let writer = DispatchQueue(label: "dataprotection.stream-writer")
        let idle = DispatchSemaphore(value: 1)  // taken while a write is in flight
        let failed = Locked<Int32>(0)  // errno of a failed write
        defer {
            idle.wait()  // the last write is done (or failed) before its buffer goes
            idle.signal()  // libdispatch traps when a semaphore is freed below its initial value
            for (b, u) in zip(buffers, used) {  // no plaintext left in freed memory; pages never touched stay untouched
                wipeMemory(UnsafeMutableRawBufferPointer(rebasing: b[..<u]))
                b.deallocate()
            }
        }
        var offset: Int64 = 0
        for k in 0... {
            let buf = buffers[k & 1]  // free: its write (batch k-2) finished before batch k-1's started
            let n: Int
            do throws(ProtectionError) { n = try h.read(into: buf, at: offset) } catch {
                used[k & 1] = cap  // a read that failed part-way may have left plaintext anywhere in the buffer
                throw error
            }
            used[k & 1] = max(used[k & 1], n)
            idle.wait()
            if case let e = failed.withLock({ $0 }), e != 0 { idle.signal(); throw ProtectionError.errno(e, "write the output of", path) }
            if n == 0 { idle.signal(); break }
            nonisolated(unsafe) let chunk = UnsafeRawBufferPointer(start: buf.baseAddress, count: n)
            writer.async { [io] in
                defer { idle.signal() }
                var done = 0
                while done < chunk.count {
                    do throws(SystemError) { done += try io.write(destination, from: UnsafeRawBufferPointer(rebasing: chunk[done...])) } catch {
                        if error.errno == EINTR { continue }
                        failed.withLock { $0 = error.errno }
                        return
                    }
                }
            }
            offset += Int64(n)
        }
    }

    // MARK: Handles

    /// `create`, with errors about the file attributed to `shown` (the destination of an atomic replace, not its temporary name).
    package func create(
        _ path: String, protection: ProtectionClass, reportedAs shown: String, journaled: Bool, via: ProtectedDataEntryPoint
    ) throws(ProtectionError) -> ProtectedFileHandle {
        do throws(ProtectionError) {
            let (header, generation) = try newHeader(path, protection: protection, via: via)
            let fd: Int32
            do throws(OwnedFileFailure) { fd = try io.createOwned(path, flags: O_RDWR, mode: 0o600) } catch .system(let e) {
                throw io.failure(e, "create", path)
            } catch { throw error.error("create", path, at: path) }
            return try newFile(fd, header: header, generation: generation, path: path, journaled: journaled, via: via) { try? io.unlink(path) }
        } catch {
            throw error.about(shown, "create")
        }
    }

    /// The header of a new file of class `protection` (its file ID still to be drawn and its key to be wrapped, by
    /// `newFile`), and the class key's generation.
    ///
    /// Refused before anything is created when the options are invalid or the class is locked already; `admit` checks again.
    func newHeader(_ path: String, protection: ProtectionClass, via: ProtectedDataEntryPoint) throws(ProtectionError) -> (FileHeader, UInt32) {
        guard let shift = options.chunkShift else {
            throw ProtectionError(.invalidArgument, "unable to create '\(path)': chunk size \(options.chunkSize) is not a power of two from 4 KiB to 16 MiB", path: path)
        }
        guard options.cipher.isAvailable else {
            throw ProtectionError(.unsupportedCipher, "unable to create '\(path)': \(options.cipher) is not supported on this CPU; use XChaCha20-Poly1305", path: path)
        }
        try revocation.refuseIfLocked(protection, via: via)
        let generation = try keys.currentGeneration(of: protection)
        let header = FileHeader(
            version: FileHeader.currentVersion, protectionClass: protection, cipher: ChunkCipher.forNewFiles(options.cipher), chunkShift: shift,
            // No placeholder identifier or MAC: `newFile` sets both before anything reads them (two allocations less
            // per create); the wrapped key's placeholder gives the fixed fields its length.
            classKeyGeneration: generation, fileID: [], wrappedKey: [UInt8](repeating: 0, count: FileHeader.wrappedKeyLength(for: protection)), mac: [])
        return (header, generation)
    }

    /// Bytes of a header's file identifier (FORMAT.md §3.1, offset 24).
    static let fileIDBytes = 16

    /// CSPRNG bytes a new file takes in one call: its 32-byte key, its file ID, and its first key nonce and `R`.
    static let newFileRandomBytes = 32 + ProtectedFiles.fileIDBytes + AEADNonceMode.extendedNonceSize

    /// Makes the new empty file open as `fd` (made by the caller, at `path`) a protected file with `header`: wraps a new
    /// per-file key inside one admission, hands it to a registered handle, and writes the header and the empty chunk.
    ///
    /// - Parameters:
    ///   - remove: removes the new file; called on failure, before `fd` is closed (a replace's lock goes with it).
    ///   - deferringHeader: a replace's temporary file, which nobody opens by its name and which is renamed only after
    ///     `completeCreation`: its header waits for the first write, so a file written whole seals its first chunk
    ///     once (not empty first). A file created at its real name gets both now: from the moment `create` returns
    ///     (and after a crash) it is a valid empty protected file.
    /// A replace's temporary file is not `journaled`: the rename makes it atomic.
    func newFile(
        _ fd: Int32, header: FileHeader, generation: UInt32, path: String, journaled: Bool, deferringHeader: Bool = false, via: ProtectedDataEntryPoint,
        remove: () -> Void
    ) throws(ProtectionError) -> ProtectedFileHandle {
        var header = header
        let protection = header.protectionClass, cipher = header.cipher
        let h: ProtectedFileHandle
        var encoded: [UInt8] = []  // the header's 176 bytes, encoded once: the MAC's input, then what is written
        do throws(ProtectionError) {
            // The per-file key is made, wrapped and handed to a registered handle inside one admission.
            h = try keys.admit(protection, via: via) { (access, epoch) throws(ProtectionError) -> ProtectedFileHandle in
                // One CSPRNG call (one `getrandom`) for the file key, the file ID and the first key nonce.
                let drawn = try crypto { () throws(CryptoError) in try SecretBytes.random(count: Self.newFileRandomBytes) }
                let fileKey = try crypto { () throws(CryptoError) in try drawn.withUnsafeBytes { (r) throws(CryptoError) in try SecretBytes(copying: UnsafeRawBufferPointer(rebasing: r[0..<32])) } }
                header.fileID = drawn.withUnsafeBytes { Array($0[32..<32 + Self.fileIDBytes]) }
                let fixed = header.fixedBytes()
                header.wrappedKey = try fixed.span.bytes.withUnsafeBytes { (ad) throws(ProtectionError) in
                    try access.wrapFileKey(fileKey, for: protection, generation: generation, ad: ad)
                }
                guard header.wrappedKey.count == FileHeader.wrappedKeyLength(for: protection) else {
                    throw ProtectionError(.invalidArgument, "the class key provider returned a wrapped key of \(header.wrappedKey.count) bytes for class \(protection)")
                }
                let fk = try crypto { () throws(CryptoError) in try FileKeys(fileKey: fileKey, cipher: cipher, sealsPerKeyNonce: sealsPerKeyNonce) }
                drawn.withUnsafeBytes { fk.content.seedKeyNonce(UnsafeRawBufferPointer(rebasing: $0[(32 + Self.fileIDBytes)...])) }
                encoded = header.encoded()
                header.mac = try crypto { () throws(CryptoError) in try encoded.span.bytes.withUnsafeBytes { (b) throws(CryptoError) in try fk.headerMAC(of: b) } }
                encoded.replaceSubrange((FileHeader.fixedSize + FileHeader.wrappedKeySlot)..<FileHeader.size, with: header.mac)
                return makeHandle(
                    path: path, fd: fd, header: header, keys: fk, size: 0, writable: true, epoch: epoch, journaled: journaled, committed: false, via: via)
            }
        } catch {
            remove()
            io.close(fd)
            throw error
        }
        if deferringHeader {
            h.deferHeader(encoded)
            return h
        }
        do throws(ProtectionError) {
            try h.writeHeaderAndEmptyChunk(encoded)
        } catch {
            remove()
            h.close()
            throw error
        }
        return h
    }

    /// `open(_:forWriting:)` (DataProtection.swift) on behalf of the entry point `via`.
    package func open(_ path: String, forWriting: Bool, via: ProtectedDataEntryPoint) throws(ProtectionError) -> ProtectedFileHandle {
        if forWriting {
            try recoverBeforeWriting(path)
            do throws(ProtectionError) { return try openNow(path, forWriting: true, via: via) } catch where error.code == .authenticationFailed {
                reportTampered(error, path: path, class: nil, operation: "open for writing")
                throw error
            }
        }
        return try retryingAfterRecovery(path) { () throws(ProtectionError) in try openNow(path, forWriting: false, via: via) }
    }

    /// Opens `path` from one `pread` of its prefix when that read stops short (see `readPrefix`): every local
    /// file system returns less than asked only at the end of the file. A file system that may return short reads
    /// before the end (some network and FUSE ones) could make a good file look truncated, so a failure after such a
    /// read is tried once more with the end confirmed by a read that returns 0.
    private func openNow(_ path: String, forWriting: Bool, via: ProtectedDataEntryPoint) throws(ProtectionError) -> ProtectedFileHandle {
        var endUnconfirmed = false
        do throws(ProtectionError) {
            return try openNow(path, forWriting: forWriting, confirmingEnd: false, endUnconfirmed: &endUnconfirmed, via: via)
        } catch where endUnconfirmed && error.code != .locked {  // a refusal does not depend on the read (and counts once)
            return try openNow(path, forWriting: forWriting, confirmingEnd: true, endUnconfirmed: &endUnconfirmed, via: via)
        }
    }

    private func openNow(
        _ path: String, forWriting: Bool, confirmingEnd: Bool, endUnconfirmed: inout Bool, via: ProtectedDataEntryPoint
    ) throws(ProtectionError) -> ProtectedFileHandle {
        let fd: Int32
        do throws(SystemError) { fd = try io.open(path, flags: forWriting ? O_RDWR : O_RDONLY, mode: 0) } catch {
            throw io.failure(error, "open", path)
        }
        let h: ProtectedFileHandle, prefix: [UInt8]
        do throws(ProtectionError) {
            let (header, fileSize, bytes) = try readPrefix(fd, path, confirmingEnd: confirmingEnd, endUnconfirmed: &endUnconfirmed)
            prefix = bytes
            let layout = ChunkLayout(headerSize: FileHeader.size, chunkSize: header.chunkSize, overhead: header.cipher.overhead)
            guard let size = layout.plaintextSize(forFileSize: fileSize) else {
                throw ProtectionError(.authenticationFailed, "its size (\(fileSize) bytes) fits no valid file: it was truncated or extended; restore it from a backup")
            }
            // The per-file key is unwrapped and handed to a registered handle inside one admission.
            h = try keys.admit(header.protectionClass, via: via) { (access, epoch) throws(ProtectionError) -> ProtectedFileHandle in
                let fk = try fileKeys(for: header, raw: prefix, access)
                return makeHandle(
                    path: path, fd: fd, header: header, keys: fk, size: size, writable: forWriting, epoch: epoch, journaled: true, committed: true, via: via)
            }
        } catch {
            io.close(fd)
            throw error.about(path, "open")
        }
        do throws(ProtectionError) { try h.verifyLastChunk(prefix: prefix) } catch {
            h.close()  // the handle owns the descriptor now: it closes it, once
            throw error.about(path, "open")
        }
        return h
    }

    /// The header facts of `path`, without any key.
    public func info(_ path: String) throws(ProtectionError) -> ProtectedFileInfo {
        let fd: Int32
        do throws(SystemError) { fd = try io.open(path, flags: O_RDONLY, mode: 0) } catch { throw io.failure(error, "inspect", path) }
        defer { io.close(fd) }
        do throws(ProtectionError) {
            let (h, fileSize, _) = try readPrefix(fd, path)
            let layout = ChunkLayout(headerSize: FileHeader.size, chunkSize: h.chunkSize, overhead: h.cipher.overhead)
            guard let size = layout.plaintextSize(forFileSize: fileSize) else {
                throw ProtectionError(.authenticationFailed, "its size (\(fileSize) bytes) fits no valid file: it was truncated or extended; restore it from a backup")
            }
            return ProtectedFileInfo(
                protectionClass: h.protectionClass, cipher: h.cipher.algorithm, chunkSize: h.chunkSize, plaintextSize: size,
                classKeyGeneration: h.classKeyGeneration, formatVersion: h.version)
        } catch { throw error.about(path, "inspect") }
    }

    // MARK: Internals

    /// Unwraps the per-file key of `header`, derives its keys and checks the header MAC.
    ///
    /// - Parameter raw: the header's bytes as read from disk, when at hand: they are
    ///   authenticated as they are instead of being encoded again (`parse` has
    ///   already checked that they encode `header`).
    func fileKeys(for header: FileHeader, raw: [UInt8]? = nil, _ access: borrowing KeyAccess) throws(ProtectionError) -> FileKeys {
        let bytes = raw.flatMap { $0.count >= FileHeader.size ? $0 : nil } ?? header.encoded()
        let fileKey = try unwrapFileKey(header, raw: bytes, access)
        let fk = try crypto { () throws(CryptoError) in try FileKeys(fileKey: fileKey, cipher: header.cipher, sealsPerKeyNonce: sealsPerKeyNonce) }
        try checkMAC(raw: bytes, fk)
        return fk
    }

    /// Bytes read at open beyond the header: 16 KiB, so a file of up to about 16 KiB takes one `pread`, whatever
    /// its chunk size (the default was 16 KiB until 2026-11-23, and files keep theirs).
    static let prefixSize = FileHeader.size + 16 * 1024 + 64

    /// Reads and parses the header, plus as much of the file as fits in `prefixSize`, in one `pread`.
    ///
    /// When the read stops short of `prefixSize` the file size is what was read; otherwise it comes from `fstat`.
    /// Unless `confirmingEnd`, a short read is taken as the end of the file without the read that would return 0
    /// (true of every local file system), and `endUnconfirmed` says so: see `openNow`.
    func readPrefix(
        _ fd: Int32, _ path: String, confirmingEnd: Bool, endUnconfirmed: inout Bool
    ) throws(ProtectionError) -> (FileHeader, Int64, [UInt8]) {
        var failure: SystemError?
        let bytes = [UInt8](unsafeUninitializedCapacity: Self.prefixSize) { b, count in
            let buffer = UnsafeMutableRawBufferPointer(b)
            do throws(SystemError) {
                count = try confirmingEnd ? io.readFully(fd, into: buffer, at: 0) : io.readOnce(fd, into: buffer, at: 0)
            } catch {
                failure = error
                count = 0
            }
        }
        if let failure { throw ProtectionError.errno(failure.errno, "read", path) }
        endUnconfirmed = !confirmingEnd && bytes.count > 0 && bytes.count < Self.prefixSize
        let size: Int64
        do throws(SystemError) { size = bytes.count < Self.prefixSize ? Int64(bytes.count) : try io.size(fd) } catch {
            throw ProtectionError.errno(error.errno, "read", path)
        }
        return (try FileHeader.parse(bytes), size, bytes)
    }

    /// `readPrefix`, confirming the end of the file.
    func readPrefix(_ fd: Int32, _ path: String) throws(ProtectionError) -> (FileHeader, Int64, [UInt8]) {
        var unused = false
        return try readPrefix(fd, path, confirmingEnd: true, endUnconfirmed: &unused)
    }

    /// Writes a new protected file to a temporary name beside `path`, then renames it over `path`.
    func replace(
        _ path: String, protection: ProtectionClass, durable: Bool = true, via: ProtectedDataEntryPoint,
        fill: (ProtectedFileHandle) throws(ProtectionError) -> Void
    ) throws(ProtectionError) {
        try coordinated(path, writing: true) { () throws(ProtectionError) in try replaceNow(path, protection: protection, durable: durable, via: via, fill: fill) }
    }

    /// Fills a new protected file in the one atomic replace (AtomicReplace.swift), fsyncs it, renames it over `path`
    /// (still holding the temporary file's lock), fsyncs the directory (the two fsyncs only when `durable`).
    private func replaceNow(
        _ path: String, protection: ProtectionClass, durable: Bool, via: ProtectedDataEntryPoint, fill: (ProtectedFileHandle) throws(ProtectionError) -> Void
    ) throws(ProtectionError) {
        do throws(ProtectionError) {
            // A refusal before anything exists says "create", as a new file's would (a locked class, an unsupported cipher).
            let header: FileHeader, generation: UInt32
            do throws(ProtectionError) { (header, generation) = try newHeader(path, protection: protection, via: via) } catch {
                throw error.about(path, "create")
            }
            let replace: AtomicReplace
            do throws(SystemError) { replace = try AtomicReplace(replacing: path, mode: 0o600, io: io) } catch { throw .replace(error, "write", path, io: io) }
            let h = try newFile(
                replace.fd, header: header, generation: generation, path: replace.temporaryPath, journaled: false, deferringHeader: true, via: via
            ) { replace.discard() }
            do throws(ProtectionError) {
                try fill(h)
                try h.completeCreation()  // the header (and, for an empty file, its empty chunk) before the sync and the rename
                if durable { try h.sync() }
                do throws(SystemError) { try replace.commit(syncingFile: false, syncingDirectory: durable, keepingAttributes: true) } catch {
                    throw io.failure(error, "replace", path)
                }
            } catch {
                replace.discard()  // still ours unless renamed: we hold its lock, so nobody else can have changed the name
                h.close()  // the lock goes with the descriptor
                throw error
            }
            h.close()
            // A journal left by an interrupted change of the old file is about that file (its identifier): drop it.
            _ = try? JournalRecoverer(io: io, dataPath: path).run()
        } catch {
            throw error.retargeted(path, "write").about(path, "write")
        }
    }
}
