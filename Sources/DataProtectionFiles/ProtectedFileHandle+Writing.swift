import DataProtectionKeys
import DataProtectionFormat
import SystemLayer
import ProtectionCrypto
import Locking

#if canImport(Glibc)
import Glibc
#endif

/// Writing: chunks re-sealed batch by batch with fresh nonces, the whole batch in one `pwrite`, appends without
/// re-reading the tail, and truncation. Every function runs with the state lock held.
extension ProtectedFileHandle {
    /// Writes a new file's header and its single empty last chunk, in one `pwrite` from offset 0.
    func writeHeaderAndEmptyChunk(_ header: [UInt8]) throws(ProtectionError) {
        try state.withLock { (st) throws(ProtectionError) in try writeHeaderAndEmptyChunk(&st, header) }
    }

    /// Holds back a replace's temporary file's header until its first write (see `State.pendingHeader`).
    func deferHeader(_ header: [UInt8]) { state.withLock { $0.pendingHeader = header } }

    /// Makes a replace's temporary file a valid protected file before it is synced and renamed: writes the header and
    /// the empty chunk if nothing wrote the header yet (an empty file: its only chunk is the empty one).
    func completeCreation() throws(ProtectionError) {
        try state.withLock { (st) throws(ProtectionError) in
            guard let header = st.pendingHeader else { return }
            try writeHeaderAndEmptyChunk(&st, header)
        }
    }

    private func writeHeaderAndEmptyChunk(_ st: inout State, _ header: [UInt8]) throws(ProtectionError) {
        let sealer = try live(&st, "create")
        st.forgetTail()
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
        st.pendingHeader = nil
    }

    /// Writes a replace's held-back header (before the first chunk it precedes: the file is invisible under its
    /// temporary name until `completeCreation` and the rename, and discarded if anything fails before).
    @inline(__always)
    private func writePendingHeader(_ st: inout State) throws(ProtectionError) {
        guard let header = st.pendingHeader else { return }
        do throws(SystemError) {
            try header.span.bytes.withUnsafeBytes { (b) throws(SystemError) in try io.writeFully(st.fd, from: b, at: 0) }
        } catch { throw ioError(error, "create") }
        st.pendingHeader = nil
    }

    /// Writes `count` bytes from `src` at plaintext `offset`, re-sealing every touched chunk.
    func writeRange(_ st: inout State, _ sealer: ChunkSealer, _ src: WriteSource, count: Int, at offset: Int64) throws(ProtectionError) {
        let oldSize = st.size
        let end = offset + Int64(count)
        guard end <= ChunkLayout.maxPlaintextSize else {
            throw ProtectionError(.fileTooLarge, "unable to write '\(path)': a protected file holds at most 256 TiB", path: path)
        }
        let newSize = max(oldSize, end)
        try writePendingHeader(&st)
        let cs = Int64(layout.chunkSize)
        let oldLast = layout.chunkCount(forPlaintextSize: oldSize) - 1
        let newLast = layout.chunkCount(forPlaintextSize: newSize) - 1
        // Chunks from the old last one (its flag or length changes) or the first written, whichever is lower.
        var i = layout.chunkIndex(containing: min(offset, oldSize))
        if newSize > oldSize { i = min(i, oldLast) }
        let lastTouched = layout.chunkIndex(containing: end - 1)
        let firstWhole = (offset + cs - 1) / cs  // the chunks in firstWhole..<end / cs are written whole
        let batch = Self.batchChunks(st.batchBytes, chunkSize: layout.chunkSize)
        let stride = layout.stride, nonce = sealer.nonceSize
        let zeros = if case .zeros = src { true } else { false }
        // The tail slot: read below for the old last chunk, rewritten with the new last chunk; what it holds when the
        // call ends is decided here (nothing, if the call fails part-way).
        let keptTail = st.usableTail
        let keptSealed = keptTail >= 0 && st.tailSealedChunk == keptTail ? keptTail : -1
        var tailAfter: Int64 = -1, sealedAfter: Int64 = -1
        defer {
            st.tail = tailAfter
            st.tailSealedChunk = tailAfter >= 0 ? sealedAfter : -1
            st.keptMayBeStale = false
        }
        while i <= lastTouched {
            let n = Int(min(Int64(batch), lastTouched - i + 1))
            let staging = st.reserve(n, stride: stride)
            // Pass 1: put each chunk's new plaintext in its slot, unless it comes whole from `src` (pass 2 takes it).
            // The chunks it reads are kept as read for the journal, which records them before they are overwritten,
            // when no other writer can change them before that: the journal's lock is held since the change began, or
            // the caller's lock keeps every other writer out (a database's seal lock).
            var read: [(chunk: Int64, sealed: [UInt8])] = []
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
                            if j == keptSealed, st.journal != nil, st.callerExcludesOtherWriters || st.journal!.hot {
                                read.append((j, st.tailSealed))  // as this handle wrote it, and no writer has since
                            }
                        } else {
                            let sealed = staging + pos
                            try readSealedChunk(&st, j, length: keep + layout.overhead, into: sealed)
                            if st.journal != nil, st.callerExcludesOtherWriters || st.journal!.hot {
                                read.append((j, Array(UnsafeRawBufferPointer(start: sealed, count: keep + layout.overhead))))
                            }
                            _ = try openChunk(sealer, j, size: oldSize, slot: sealed)
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
            try journalChunks(&st, i..<(i + Int64(n)), whole: firstWhole..<max(firstWhole, end / cs), read: read)
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
            if st.logsCommits, newLast >= first, newLast < first + Int64(n) {
                // A log's next commit re-seals this chunk and journals it first: its disk bytes are kept for that record.
                let sealed = UnsafeRawBufferPointer(
                    start: staging + Int(newLast - first) * stride, count: layout.plaintextLength(ofChunk: newLast, plaintextSize: newSize) + layout.overhead)
                st.tailSealed.removeAll(keepingCapacity: true)
                st.tailSealed.append(contentsOf: sealed)
                sealedAfter = newLast
            }
            i += Int64(n)
        }
        st.size = newSize
        st.bytesSealed &+= Int64(count)  // reported once, at close (no metric call per write)
        if lastTouched != newLast {  // an untouched last chunk is still the one kept
            tailAfter = keptTail
            sealedAfter = keptSealed
        } else {
            tailAfter = newLast
        }
    }

    /// Copies bytes `k..<k+count` of a write from `src`; a file source that ends early is an error.
    func copy(_ src: WriteSource, _ k: Int64, count: Int, to destination: UnsafeMutableRawPointer) throws(ProtectionError) {
        let got: Int
        do throws(SystemError) { got = try src.copy(k, count: count, to: destination) } catch {
            throw ProtectionError.errno(error.errno, "read the input for", path)
        }
        guard got == count else {
            throw ProtectionError(.io(EIO), "unable to write '\(path)': its input file became shorter while it was being read; write it again once the input is complete", path: path)
        }
    }

    /// What a write of plaintext `[offset, end)` does to chunk `j`.
    struct ChunkPlan {
        var length: Int  // plaintext bytes after the write
        var needsOld: Bool  // some old bytes survive: read and open the old chunk first
        var whole: Bool  // every byte comes from the write
        var writeFrom: Int64, writeTo: Int64  // the written part, in file plaintext offsets
    }

    @inline(__always)
    func plan(_ j: Int64, oldSize: Int64, oldLast: Int64, newSize: Int64, offset: Int64, end: Int64) -> ChunkPlan {
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
    func shrink(_ st: inout State, _ sealer: ChunkSealer, to newSize: Int64) throws(ProtectionError) {
        let last = layout.chunkCount(forPlaintextSize: newSize) - 1
        let journaled = st.journal != nil && st.committedSize != nil
        var old: [UInt8] = []
        if journaled {
            try commit(&st)
            old = try rawChunk(&st, last, size: st.size)
        }
        st.forgetTail()
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
