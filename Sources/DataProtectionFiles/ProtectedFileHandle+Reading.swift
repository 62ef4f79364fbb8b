import DataProtectionKeys
import DataProtectionFormat
import SystemLayer
import ProtectionCrypto
import Locking

#if canImport(Glibc)
import Glibc
#endif

/// Reading: chunks read, authenticated and opened batch by batch (the last chunk once at open). Every function runs
/// with the state lock held.
extension ProtectedFileHandle {
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
            st.forgetTail()
            st.tail = last
        }
    }

    /// Disk bytes of chunks `first..<first+n` in a file of `size` plaintext bytes.
    func diskLength(first: Int64, n: Int, size: Int64) -> Int {
        var total = 0
        for j in first..<(first + Int64(n)) { total += layout.plaintextLength(ofChunk: j, plaintextSize: size) + layout.overhead }
        return total
    }

    /// Reads and opens chunks covering plaintext `[from, to)` into `out` (which receives `to - from` bytes).
    func readRange(_ st: inout State, _ sealer: ChunkSealer, from: Int64, to: Int64, into out: UnsafeMutableRawPointer) throws(ProtectionError) {
        let cs = Int64(layout.chunkSize)
        let tail = st.usableTail
        if tail >= 0, layout.chunkIndex(containing: from) == tail, layout.chunkIndex(containing: to - 1) == tail {
            // Served from the chunk authenticated at open.
            out.copyMemory(from: st.staging.baseAddress! + header.cipher.nonceSize + Int(from - tail * cs), byteCount: Int(to - from))
            return
        }
        if st.keepsFirstChunk, to <= cs {
            try readFirstChunk(&st, sealer, from: from, to: to, into: out)
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

    /// Reads plaintext `[from, to)` of chunk 0 for a handle that keeps it between reads: its disk bytes are read every
    /// time, and opened only when they differ from the bytes last opened (or the length or "last" flag it is opened
    /// with changed).
    ///
    /// Why skipping the open is safe: the same disk bytes, under the same key, index, flag and length, open to the
    /// same plaintext, so the kept plaintext is exactly what opening them again would return; any other bytes (a
    /// re-seal by any writer draws a fresh nonce; tampering) are opened, and fail as any read would. The kept
    /// plaintext is staged memory: wiped on close and when a lock revokes the handle (`dropPlaintext`).
    func readFirstChunk(_ st: inout State, _ sealer: ChunkSealer, from: Int64, to: Int64, into out: UnsafeMutableRawPointer) throws(ProtectionError) {
        let stride = layout.stride
        let plen = layout.plaintextLength(ofChunk: 0, plaintextSize: st.size)
        let last = layout.chunkCount(forPlaintextSize: st.size) == 1
        let len = plen + layout.overhead
        let disk = st.reserve(1, stride: stride)
        try readSealedChunk(&st, 0, length: len, into: disk)
        if st.firstChunk == nil { st.firstChunk = .allocate(byteCount: 2 * stride, alignment: 16) }
        let kept = st.firstChunk!.baseAddress!, plain = kept + stride
        if !(st.firstChunkLength == plen && st.firstChunkLast == last && memcmp(disk, kept, len) == 0) {
            st.firstChunkLength = -1
            do throws(CryptoError) {
                try sealer.withSession { (session) throws(CryptoError) in try sealer.open(slot: disk, count: plen, into: plain, index: 0, last: last, in: &session) }
            } catch {
                wipeMemory(UnsafeMutableRawBufferPointer(start: plain, count: plen))  // nothing unauthenticated stays
                throw authFailure(error, chunk: 0)
            }
            kept.copyMemory(from: disk, byteCount: len)
            st.firstChunkLength = plen
            st.firstChunkLast = last
        }
        out.copyMemory(from: plain + Int(from), byteCount: Int(to - from))
    }

    /// Reads the `length` disk bytes of chunk `j` into `slot`; a file that ends before them fails authentication.
    func readSealedChunk(_ st: inout State, _ j: Int64, length: Int, into slot: UnsafeMutableRawPointer) throws(ProtectionError) {
        let got: Int
        do throws(SystemError) {
            got = try io.readFully(st.fd, into: UnsafeMutableRawBufferPointer(start: slot, count: length), at: layout.offset(ofChunk: j))
        } catch { throw ioError(error, "read") }
        guard got == length else {
            throw ProtectionError(.authenticationFailed, "unable to read '\(path)': the file is shorter than its chunks; restore it from a backup", path: path)
        }
    }

    /// Reads and opens chunk `j` (of a file of `size` bytes) into its staging slot; returns the plaintext pointer.
    func loadChunk(_ st: inout State, _ sealer: ChunkSealer, _ j: Int64, size: Int64, slot: UnsafeMutableRawPointer) throws(ProtectionError) -> UnsafeMutableRawPointer {
        try readSealedChunk(&st, j, length: layout.plaintextLength(ofChunk: j, plaintextSize: size) + layout.overhead, into: slot)
        return try openChunk(sealer, j, size: size, slot: slot)
    }

    /// Opens chunk `j` (of a file of `size` bytes), sealed as on disk in `slot`, in place; returns the plaintext pointer.
    func openChunk(_ sealer: ChunkSealer, _ j: Int64, size: Int64, slot: UnsafeMutableRawPointer) throws(ProtectionError) -> UnsafeMutableRawPointer {
        let plen = layout.plaintextLength(ofChunk: j, plaintextSize: size)
        let plain = slot + sealer.nonceSize
        let last = j == layout.chunkCount(forPlaintextSize: size) - 1
        do throws(CryptoError) {
            try sealer.withSession { (session) throws(CryptoError) in try sealer.open(slot: slot, count: plen, into: plain, index: j, last: last, in: &session) }
        } catch { throw authFailure(error, chunk: j) }
        return plain
    }
}
