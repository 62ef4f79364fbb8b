// Sequential write and read of a protected file, measured side by side with raw
// libsodium AEAD over the same buffers, interleaved, in one run.
internal import BaselineSodium
import DataProtection
import Foundation
import ProtectionCrypto


func throughput(_ argv: [String]) throws {
var sizeMiB = 256, rounds = 7, dir = NSTemporaryDirectory(), cipher = AEADCipher.preferred
var args = argv.makeIterator()
while let a = args.next() {
    switch a {
    case "--size-mib": sizeMiB = Int(args.next() ?? "") ?? sizeMiB
    case "--rounds": rounds = Int(args.next() ?? "") ?? rounds
    case "--dir": dir = args.next() ?? dir
    case "--cipher": cipher = (args.next() == "xchacha") ? .xchacha20poly1305 : .aes256gcm
    default: usage()
    }
}

let chunk = ProtectedFileOptions.defaultChunkSize
let bufSize = 1 << 20
let total = sizeMiB << 20
let key: [UInt8] = {
    var k = [UInt8](repeating: 0, count: 32)
    randombytes_buf(&k, 32)
    return k
}()
let aesState = UnsafeMutableRawPointer.allocate(byteCount: crypto_aead_aes256gcm_statebytes(), alignment: 16)
key.withUnsafeBufferPointer { _ = crypto_aead_aes256gcm_beforenm(aesState.assumingMemoryBound(to: crypto_aead_aes256gcm_state.self), $0.baseAddress!) }
let nonce = [UInt8](repeating: 0, count: 24), ad = [UInt8](repeating: 0, count: 25)

/// A raw libsodium loop over a 1 MiB buffer of its own: `run(bytes, decrypt)` seals (or opens) `bytes` as chunks of
/// `chunk`, reusing the buffer. The key, its AES-GCM state, nonce and associated data are shared and only read.
struct RawLoop {
    let plain: UnsafeMutableRawBufferPointer
    let work: UnsafeMutableRawBufferPointer
    let run: (Int, Bool) -> Void
}
func makeRawLoop() -> RawLoop {
    let plain = UnsafeMutableRawBufferPointer.allocate(byteCount: bufSize, alignment: 64)
    let work = UnsafeMutableRawBufferPointer.allocate(byteCount: bufSize + (bufSize / chunk) * 64, alignment: 64)
    for i in 0..<bufSize { plain[i] = UInt8(truncatingIfNeeded: i &* 31) }
    var tags = [UInt8](repeating: 0, count: 16 * (bufSize / chunk))
    return RawLoop(plain: plain, work: work) { bytes, decrypt in
        var done = 0
        while done < bytes {
            for c in 0..<(bufSize / chunk) {
                let m = plain.baseAddress!.assumingMemoryBound(to: UInt8.self) + c * chunk
                let out = work.baseAddress!.assumingMemoryBound(to: UInt8.self) + c * chunk
                tags.withUnsafeMutableBufferPointer { t in
                    let tag = t.baseAddress! + 16 * c
                    switch (cipher, decrypt) {
                    case (.aes256gcm, false): _ = crypto_aead_aes256gcm_encrypt_detached_afternm(out, tag, nil, m, UInt64(chunk), ad, 25, nil, nonce, aesState.assumingMemoryBound(to: crypto_aead_aes256gcm_state.self))
                    case (.aes256gcm, true): _ = crypto_aead_aes256gcm_decrypt_detached_afternm(m, nil, out, UInt64(chunk), tag, ad, 25, nonce, aesState.assumingMemoryBound(to: crypto_aead_aes256gcm_state.self))
                    case (_, false): _ = crypto_aead_xchacha20poly1305_ietf_encrypt_detached(out, tag, nil, m, UInt64(chunk), ad, 25, nil, nonce, key)
                    case (_, true): _ = crypto_aead_xchacha20poly1305_ietf_decrypt_detached(m, nil, out, UInt64(chunk), tag, ad, 25, nonce, key)
                    }
                }
            }
            done += bufSize
        }
    }
}
/// Holds the key the backend loop seals under (a non-copyable key shared by the loop's closure).
final class KeyBox: Sendable {
    let key: AEADKey
    init(_ key: consuming AEADKey) { self.key = key }
}

/// The library's chunk cipher alone (`AEADKey`, one session per 1 MiB: OpenSSL for AES-256-GCM since issue 23) over a
/// buffer of its own, as `makeRawLoop`: the backend's raw rate, beside the libsodium yardstick.
func makeBackendLoop() throws -> RawLoop {
    let plain = UnsafeMutableRawBufferPointer.allocate(byteCount: bufSize, alignment: 64)
    let work = UnsafeMutableRawBufferPointer.allocate(byteCount: bufSize, alignment: 64)
    for i in 0..<bufSize { plain[i] = UInt8(truncatingIfNeeded: i &* 31) }
    let tags = UnsafeMutableRawPointer.allocate(byteCount: 16 * (bufSize / chunk), alignment: 16)
    let box = try key.withUnsafeBytes { (k) throws(CryptoError) in try KeyBox(AEADKey(cipher, key: try SecretBytes(copying: k))) }
    return RawLoop(plain: plain, work: work) { bytes, decrypt in
        var done = 0
        while done < bytes {
            ad.withUnsafeBytes { a in
                try? box.key.withSession { (s) throws(CryptoError) in
                    for c in 0..<(bufSize / chunk) {
                        let m = plain.baseAddress! + c * chunk, out = work.baseAddress! + c * chunk, tag = tags + 16 * c
                        if decrypt { try s.open(out, count: chunk, into: m, nonce: nonce, ad: a, tag: tag) } else { s.seal(m, count: chunk, into: out, nonce: nonce, ad: a, tag: tag) }
                    }
                }
            }
            done += bufSize
        }
    }
}
let loops = [makeRawLoop(), makeRawLoop()]
let backend = cipher == .aes256gcm ? [try makeBackendLoop(), try makeBackendLoop()] : []
let plain = loops[0].plain, work = loops[0].work
// The same seal and in-order writes on two threads with raw libsodium and no library (AES-256-GCM only).
let pipeline = cipher == .aes256gcm
    ? SealPipeline(source: UnsafeRawBufferPointer(plain), chunk: chunk, state: aesState.assumingMemoryBound(to: crypto_aead_aes256gcm_state.self))
    : nil

/// Raw libsodium (or, given `backend`, the library's cipher) on one core: `total` bytes through one loop; GB/s.
func raw(decrypt: Bool, _ loops: [RawLoop] = loops) -> Double {
    let t0 = now()
    loops[0].run(total, decrypt)
    return Double(total) / (now() - t0) / 1e9
}

/// Raw libsodium (or the library's cipher) on both cores at once: half of `total` through each loop, on its own
/// thread; GB/s of the pair. What two cores can seal (or open) when both are busy: the cipher's share of the two-core ceiling.
func rawBothCores(decrypt: Bool, _ loops: [RawLoop] = loops) -> Double {
    let done = DispatchSemaphore(value: 0)
    let t0 = now()
    nonisolated(unsafe) let second = loops[1]  // used by the thread alone until `done`
    Thread { second.run(total / 2, decrypt); done.signal() }.start()
    loops[0].run(total / 2, decrypt)
    done.wait()
    return Double(total / 2 * 2) / (now() - t0) / 1e9
}

// Prime the raw decrypts so the tags they check are the ones sealed from each loop's `plain`.
for l in loops + backend { l.run(bufSize, false) }

let keys = try InMemoryClassKeys.random()
let files = ProtectedFiles(keys: keys, options: .init(cipher: cipher))
let path = "\(dir)/dp-throughput-\(getpid()).dpf"
defer { try? FileManager.default.removeItem(atPath: path) }

func protectedWrite() throws -> Double {
    try? FileManager.default.removeItem(atPath: path)
    let t0 = now()
    let h = try files.create(path, protection: .complete)
    var off: Int64 = 0
    while off < Int64(total) {
        try h.write(UnsafeRawBufferPointer(plain), at: off)
        off += Int64(bufSize)
    }
    h.close()
    let t1 = now()
    // Written back before anything else is timed: the kernel's write-back of 1 GiB would otherwise take a core
    // from the next measurement (the raw open, or the protected read).
    let fd = open(path, O_RDONLY)
    fsync(fd)
    close(fd)
    return Double(total) / (t1 - t0) / 1e9
}

/// The same bytes the protected write puts on disk (1 MiB of chunks plus their nonces and tags per call) written
/// to a fresh plain file: the page-cache write cost that the protected write pays on top of sealing.
func plainWrite() throws -> Double {
    let plainPath = path + ".plain"
    defer { unlink(plainPath) }
    unlink(plainPath)
    let diskBytes = bufSize + (bufSize / chunk) * cipher.overhead
    let t0 = now()
    let fd = open(plainPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw ProtectionError(.io(errno), "cannot create '\(plainPath)'") }
    var off = 0
    while off < total / bufSize * diskBytes {
        guard pwrite(fd, work.baseAddress, diskBytes, off_t(off)) == diskBytes else { throw ProtectionError(.io(errno), "short write to '\(plainPath)'") }
        off += diskBytes
    }
    let t1 = now()
    fsync(fd)  // written back outside the timing, as for the protected write
    close(fd)
    return Double(total) / (t1 - t0) / 1e9
}

func protectedRead() throws -> Double {
    let t0 = now()
    let h = try files.open(path)
    var off: Int64 = 0
    while true {
        let n = try h.read(into: work, at: off)
        if n == 0 { break }
        off += Int64(n)
    }
    h.close()
    guard off == Int64(total) else { throw ProtectionError(.io(EIO), "the benchmark read \(off) of \(total) bytes back") }
    return Double(total) / (now() - t0) / 1e9
}

/// The protected file's own bytes (chunks with their nonces and tags, as they lie in the page cache) read with plain
/// `pread`s of one protected call's worth, on one core or split in halves over both at once: the copy out of the page
/// cache that every protected read pays before it opens a chunk. GB/s of plaintext, so it compares with the read rows.
func plainRead(bothCores: Bool) throws -> Double {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw ProtectionError(.io(errno), "cannot open '\(path)'") }
    defer { close(fd) }
    let diskBytes = bufSize + (bufSize / chunk) * cipher.overhead
    let calls = total / bufSize
    var st = stat()
    guard fstat(fd, &st) == 0 else { throw ProtectionError(.io(errno), "cannot stat '\(path)'") }
    let header = Int(st.st_size) - calls * diskBytes  // the bytes before the first chunk
    /// Reads calls `from..<to` into `buffer`; false on a short read.
    @Sendable func readCalls(_ from: Int, _ to: Int, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
        for c in from..<to where pread(fd, buffer.baseAddress, diskBytes, off_t(header + c * diskBytes)) != diskBytes { return false }
        return true
    }
    let t0 = now()
    var ok: Bool
    if bothCores {
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var secondOK = false
        nonisolated(unsafe) let secondBuffer = loops[1].work  // used by the thread alone until `done`
        Thread { secondOK = readCalls(calls / 2, calls, into: secondBuffer); done.signal() }.start()
        ok = readCalls(0, calls / 2, into: loops[0].work)
        done.wait()
        ok = ok && secondOK
    } else {
        ok = readCalls(0, calls, into: loops[0].work)
    }
    let t1 = now()
    guard ok else { throw ProtectionError(.io(EIO), "short plain read of '\(path)'") }
    return Double(total) / (t1 - t0) / 1e9
}

var r: [String: [Double]] = [:]
// The file writes take turns at going first: on this VM a write's speed depends on what ran just before it
// (BENCHMARKS.md, "Side by side"), so a fixed order would favour one of them.
var writes: [(String, () throws -> Double)] = [("protected write", protectedWrite), ("plain write", plainWrite)]
if let pipeline { writes.append(("pipeline write", { try pipeline.write(total: total, to: path + ".pipeline") })) }
let reads: [(String, () throws -> Double)] = [
    ("protected read", protectedRead), ("plain read", { try plainRead(bothCores: false) }), ("plain read both", { try plainRead(bothCores: true) }),
]
for round in 0..<rounds {
    r["raw seal", default: []].append(raw(decrypt: false))
    r["raw seal both", default: []].append(rawBothCores(decrypt: false))
    for k in 0..<writes.count {
        let (name, write) = writes[(round + k) % writes.count]
        r[name, default: []].append(try write())
    }
    r["raw open", default: []].append(raw(decrypt: true))
    r["raw open both", default: []].append(rawBothCores(decrypt: true))
    // Reads take turns at going first too: the first read after a write moves the pages to the active list.
    for k in 0..<reads.count {
        let (name, read) = reads[(round + k) % reads.count]
        r[name, default: []].append(try read())
    }
    if !backend.isEmpty {
        r["backend seal", default: []].append(raw(decrypt: false, backend))
        r["backend seal both", default: []].append(rawBothCores(decrypt: false, backend))
        r["backend open", default: []].append(raw(decrypt: true, backend))
        r["backend open both", default: []].append(rawBothCores(decrypt: true, backend))
    }
}
var ru = rusage()
getrusage(RUSAGE_SELF.rawValue, &ru)
var m = r.mapValues(median)
if let open = m["backend open both"], let copy = m["plain read both"] { m["read model"] = 1 / (1 / open + 1 / copy) }
func row(_ label: String, _ key: String, over base: String?) -> String {
    let ratio = base.map { String(format: "%.2f×", m[key]! / m[$0]!) } ?? "—"
    return "| \(label) | \(String(format: "%.2f", m[key]!)) | \(ratio) |"
}
print("""
| \(sizeMiB) MiB, \(cipher), \(chunk / 1024) KiB chunks, 1 MiB calls, \(rounds) interleaved rounds (median) | GB/s | ratio |
|---|---:|---:|
\(row("raw libsodium seal (1 core)", "raw seal", over: "raw seal"))
\(row("protected file write (page cache, no fsync)", "protected write", over: "raw seal"))
\(row("plain file write of the same bytes (page cache, no fsync)", "plain write", over: nil))
\(row("both cores at once, raw libsodium seal, each core its own buffer", "raw seal both", over: "raw seal"))
\(pipeline == nil ? "" : row("two-core write without the library: raw libsodium seal on two threads, in-order pwrite, no call ends", "pipeline write", over: "raw seal") + "\n")\
\(row("raw libsodium open (1 core)", "raw open", over: "raw open"))
\(row("protected file read (page cache)", "protected read", over: "raw open"))
\(row("both cores at once, raw libsodium open, each core its own buffer", "raw open both", over: "raw open"))
\(row("plain read of the protected file's bytes (page cache), 1 core", "plain read", over: "raw open"))
\(row("plain read of the protected file's bytes, both cores at once (a half each)", "plain read both", over: "raw open"))
\(backend.isEmpty ? "" : """
\(row("the library's cipher alone (AEADKey on \(AEADCipher.aesGCMBackend)), seal, 1 core", "backend seal", over: "raw seal"))
\(row("the library's cipher alone, seal, both cores at once", "backend seal both", over: "raw seal"))
\(row("the library's cipher alone, open, 1 core", "backend open", over: "raw open"))
\(row("the library's cipher alone, open, both cores at once", "backend open both", over: "raw open"))
\(row("two-core read model: 1 ÷ (1/cipher open both + 1/plain read both), each byte copied out of the page cache, then opened", "read model", over: "raw open"))

""")\

peak RSS: \(ru.ru_maxrss / 1024) MiB
""")
}
