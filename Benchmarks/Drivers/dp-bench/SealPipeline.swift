// The shortest path from plaintext to a file's page cache on two cores that the format allows, with no library
// around it: the measured ceiling for the protected write in `dp-bench throughput`.
internal import BaselineSodium
import DataProtection
import Foundation
import Synchronization

/// Two threads take pieces of `pieceChunks` chunks in turn, seal each chunk with raw libsodium AES-256-GCM into a
/// ring of `ring` pieces (stride: nonce, ciphertext, tag, as on disk), and whichever thread finds the token free
/// writes the sealed pieces in file order, one `pwrite` per run of them: the library's pipeline for a sequential
/// write, without its calls, batches, plans, nonces, locks or error paths. No thread runs more than `ring` pieces
/// ahead of the writes, so memory stays one ring (1 MiB by default, the library's staging for one call).
///
/// It has no calls: a handle's write returns only when its bytes are in the page cache, so its two threads meet at
/// the end of every call, while this pipeline never stops. (A variant that stopped every 1 MiB, as a handle's calls
/// do, ran at 0.98–1.01× one raw core on 2026-11-23, slower than the library's own 1.16–1.18× in the same runs: no
/// ceiling for it, so it was dropped.)
final class SealPipeline: @unchecked Sendable {  // the ring and the flags are shared by the two threads through the atomic words
    let chunk: Int, stride: Int, pieceChunks: Int, ring: Int
    private let out: UnsafeMutableRawBufferPointer
    private let source: UnsafeRawBufferPointer
    private let state: UnsafeMutablePointer<crypto_aead_aes256gcm_state>
    /// Nonce and associated data for every chunk (fixed, as in the raw loops: the cipher's cost does not depend on them).
    private let zeros = UnsafeMutablePointer<UInt8>.allocate(capacity: 32)

    /// - Parameters:
    ///   - source: plaintext, read cyclically chunk by chunk (a whole number of chunks).
    ///   - state: an expanded AES-256-GCM key, only read.
    init(source: UnsafeRawBufferPointer, chunk: Int, state: UnsafeMutablePointer<crypto_aead_aes256gcm_state>, pieceBytes: Int = 128 * 1024, ring: Int = 8) {
        self.source = source
        self.chunk = chunk
        self.stride = chunk + 28  // 12-byte nonce, 16-byte tag
        self.pieceChunks = max(1, pieceBytes / chunk)
        self.ring = ring
        self.state = state
        out = .allocate(byteCount: ring * pieceChunks * stride, alignment: 64)
        out.initializeMemory(as: UInt8.self, repeating: 0)
        zeros.initialize(repeating: 0, count: 32)
    }

    deinit {
        out.deallocate()
        zeros.deallocate()
    }

    /// Seals `total` plaintext bytes (a whole number of pieces) into a new file at `path` on two threads; returns GB/s
    /// of plaintext, from the first seal to the last `pwrite` (the file is written back and removed afterwards).
    func write(total: Int, to path: String) throws -> Double {
        let pieceDisk = pieceChunks * stride
        let pieces = total / (pieceChunks * chunk)
        unlink(path)
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw ProtectionError(.io(errno), "cannot create '\(path)'") }
        defer { close(fd); unlink(path) }
        // [0]: next piece to take; [1]: first piece not yet written; [2]: token (1 while held); [3]: a write failed;
        // [4 + p]: piece p sealed.
        // Shared by the two threads only through the atomic calls (the ring: each slot by one thread at a time).
        nonisolated(unsafe) let words = UnsafeMutablePointer<Atomic<UInt64>>.allocate(capacity: pieces + 4)
        for i in 0..<(pieces + 4) { (words + i).initialize(to: Atomic(0)) }
        defer { words.deinitialize(count: pieces + 4); words.deallocate() }
        let ring = ring
        nonisolated(unsafe) let out = out
        nonisolated(unsafe) let next = words, cursor = words + 1, token = words + 2, failed = words + 3
        @Sendable func sealed(_ p: Int) -> Bool { p < pieces && load(words + 4 + p) != 0 }

        @Sendable func drain() {
            // Reads first, and takes the token only when there is something to write: a thread waiting at a call's
            // end must not keep taking the line that the writing thread updates.
            while sealed(Int(load(cursor))), load(token) == 0, exchange(token, 0, 1) {
                var c = Int(load(cursor))
                while sealed(c) {
                    // One pwrite for the sealed pieces from c on, up to the end of the ring.
                    var end = c + 1
                    while end % ring != 0, sealed(end) { end += 1 }
                    let bytes = (end - c) * pieceDisk
                    if pwrite(fd, out.baseAddress! + (c % ring) * pieceDisk, bytes, off_t(c * pieceDisk)) != bytes {
                        store(failed, 1)
                    }
                    c = end
                    store(cursor, UInt64(c))
                }
                store(token, 0)
                // Look again after letting go: a piece sealed while the token was held must not be left unwritten.
                guard sealed(Int(load(cursor))) else { return }
            }
        }
        @Sendable func work() {
            while case let p = Int(fetchAdd(next, 1)), p < pieces {
                while p - Int(load(cursor)) >= ring { drain(); baseline_cpu_relax() }  // within the ring
                seal(piece: p, into: out.baseAddress! + (p % ring) * pieceDisk)
                store(words + 4 + p, 1)
                drain()
            }
        }
        let done = DispatchSemaphore(value: 0)
        let t0 = now()
        Thread { work(); done.signal() }.start()
        work()
        done.wait()
        drain()
        let t1 = now()
        guard load(failed) == 0, Int(load(cursor)) == pieces else {
            throw ProtectionError(.io(EIO), "the pipeline wrote \(load(cursor)) of \(pieces) pieces to '\(path)'")
        }
        fsync(fd)  // written back outside the timing, as for the protected write
        return Double(pieces * pieceChunks * chunk) / (t1 - t0) / 1e9
    }

    private func seal(piece p: Int, into slot: UnsafeMutableRawPointer) {
        let sourceChunks = source.count / chunk
        for c in 0..<pieceChunks {
            let m = source.baseAddress!.assumingMemoryBound(to: UInt8.self) + ((p * pieceChunks + c) % sourceChunks) * chunk
            let o = (slot + c * stride).assumingMemoryBound(to: UInt8.self)
            _ = crypto_aead_aes256gcm_encrypt_detached_afternm(o + 12, o + 12 + chunk, nil, m, UInt64(chunk), zeros, 25, nil, zeros, state)
        }
    }
}

// The shared words, sequentially consistent (as the C __atomic calls this pipeline was first measured with).
private func load(_ word: UnsafeMutablePointer<Atomic<UInt64>>) -> UInt64 { word.pointee.load(ordering: .sequentiallyConsistent) }
private func store(_ word: UnsafeMutablePointer<Atomic<UInt64>>, _ value: UInt64) {
    word.pointee.store(value, ordering: .sequentiallyConsistent)
}
private func fetchAdd(_ word: UnsafeMutablePointer<Atomic<UInt64>>, _ value: UInt64) -> UInt64 {
    word.pointee.wrappingAdd(value, ordering: .sequentiallyConsistent).oldValue
}
/// Whether `word` held `expected` and now holds `desired`.
private func exchange(_ word: UnsafeMutablePointer<Atomic<UInt64>>, _ expected: UInt64, _ desired: UInt64) -> Bool {
    word.pointee.compareExchange(expected: expected, desired: desired, ordering: .sequentiallyConsistent).exchanged
}
