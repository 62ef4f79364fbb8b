// Reading another process's memory for key material (KeyResidueTests, ServiceLifecycleTests).
import Foundation
import DataProtectionFormat
import ProtectionCrypto
import XCTest

#if canImport(Glibc)
import Glibc
#endif

extension DpctlTestCase {
    /// Every readable mapping of process `pid`, read through /proc/PID/mem (root, or ptrace rights, needed).
    func memory(of pid: Int32) throws -> [[UInt8]] {
        // /proc files report size 0, and String(contentsOfFile:) stops early on them: read to the end.
        let maps = String(decoding: try FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/\(pid)/maps")).readToEnd() ?? Data(), as: UTF8.self)
        let fd = open("/proc/\(pid)/mem", O_RDONLY)
        guard fd >= 0 else { throw XCTSkip("cannot read /proc/\(pid)/mem (errno \(errno)): this test needs root or ptrace rights") }
        defer { close(fd) }
        var regions: [[UInt8]] = []
        for line in maps.split(separator: "\n") {
            let f = line.split(separator: " ", omittingEmptySubsequences: true)
            guard f.count >= 2, f[1].hasPrefix("r"), !line.contains("[vvar]"), !line.contains("[vsyscall]") else { continue }
            let range = f[0].split(separator: "-").compactMap { UInt64($0, radix: 16) }
            // Sanitizer builds (scripts/test) map gigabytes to terabytes of shadow and allocator space: reading it
            // would exhaust memory and outlast the workers, and it holds sanitizer metadata, not the process's data.
            // No mapping of a worker's own is that large.
            guard range.count == 2, range[1] - range[0] < 1 << 30 else { continue }
            var start = range[0]
            while start < range[1] {  // 1 MiB at a time; unreadable pages are skipped
                let n = Int(min(1 << 20, range[1] - start))
                var buf = [UInt8](repeating: 0, count: n)
                let got = buf.withUnsafeMutableBytes { pread(fd, $0.baseAddress, n, off_t(Int64(bitPattern: start))) }
                if got == n { regions.append(buf) } else if got > 0 { regions.append(Array(buf[0..<got])) }
                if start + UInt64(n) >= range[1] { break }
                start += UInt64(n) - 64  // the next piece overlaps this one by 64 bytes: a key across the seam is whole in one
            }
        }
        return regions
    }

    /// Which of `needles` occur anywhere in `regions` (each at least 8 bytes; indexed by their first 8 bytes).
    ///
    /// A bitmap of the needles' first two bytes is checked at each position first, and the index only where it hits
    /// (about one position in 500 for 120 needles): a dictionary look-up at every byte made a scan of a worker's memory
    /// take seconds in a debug build, 5–8 times this.
    func find(_ needles: [(String, [UInt8])], in regions: [[UInt8]]) -> Set<String> {
        var byPrefix: [UInt64: [(String, [UInt8])]] = [:]
        var firstTwo = [UInt64](repeating: 0, count: 65536 / 64)  // bit p: some needle starts with the bytes p & 0xFF, p >> 8
        for n in needles {
            precondition(n.1.count >= 8, "\(n.0): a needle of \(n.1.count) bytes; the scan needs at least 8")
            byPrefix[n.1.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }, default: []].append(n)
            let p = Int(n.1[0]) | Int(n.1[1]) << 8
            firstTwo[p >> 6] |= 1 << UInt64(p & 63)
        }
        var found = Set<String>()
        firstTwo.withUnsafeBufferPointer { table in
            let bits = table.baseAddress!
            for r in regions where r.count >= 8 {
                r.withUnsafeBufferPointer { region in
                    let base = region.baseAddress!
                    var i = 0
                    while i <= region.count - 8 {
                        let p = Int(base[i]) | Int(base[i + 1]) << 8
                        if bits[p >> 6] & (1 << UInt64(p & 63)) != 0,
                           let cands = byPrefix[UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self)] {
                            for (what, key) in cands where i + key.count <= region.count && memcmp(base + i, key, key.count) == 0 { found.insert(what) }
                        }
                        i += 1
                    }
                }
            }
        }
        return found
    }

    /// The AES-256 keys that chunks of the protected file at `path` are sealed under: its content key (AES-256-GCM with
    /// direct nonces) or the subkey of each chunk's key nonce (extended nonces, FORMAT.md §7); none for XChaCha20-Poly1305.
    func aesKeys(of path: String, content: borrowing SecretBytes) throws -> [[UInt8]] {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let header = try FileHeader.parse(Array(bytes[0..<FileHeader.size]))
        let layout = ChunkLayout(headerSize: FileHeader.size, chunkSize: header.chunkSize, overhead: header.cipher.overhead)
        switch header.cipher {
        case .xchacha20poly1305: return []
        case .aes256gcm: return [content.exposedForTest()]
        case .aes256gcmExtended:
            var keys: [[UInt8]] = []
            var offset = Int(layout.offset(ofChunk: 0))
            let keyNonce = UnsafeMutableRawBufferPointer.allocate(byteCount: AEADNonceMode.keyNonceSize, alignment: 1)
            defer { keyNonce.deallocate() }
            while offset + header.cipher.overhead <= bytes.count {
                keyNonce.copyBytes(from: bytes[offset..<offset + AEADNonceMode.keyNonceSize])
                let subkey = try AEADNonceMode.extendedSubkey(of: content, nonce: UnsafeRawBufferPointer(keyNonce)).exposedForTest()
                if !keys.contains(subkey) { keys.append(subkey) }
                offset += layout.stride
            }
            return keys
        }
    }
}
