// dp-aead: the bulk-AEAD candidates of issue 23, AES-256-GCM in memory on one core, side by side in one run.
//
//   dp-aead speed [--sizes 4,16,64] [--mib 64] [--rounds 7]
//       seal and open of one chunk, in-place buffers reused, contenders and sizes interleaved, order rotated each round:
//       libsodium 1.0.18 (expanded state precomputed, as the library used it until issue 23), swift-crypto 4.5.2's
//       Crypto.AES.GCM (BoringSSL; its only AES-GCM interface: a key setup per call, results in new Data), Debian's
//       OpenSSL 3.0 EVP interface with one EVP_CIPHER_CTX kept per key (only the nonce is set per chunk), and the
//       library's own chunk cipher (ProtectionCrypto's AEADKey, a session per chunk: the process's backend, VAES where the
//       CPU has it, or what DATAPROTECTION_AES_GCM_BACKEND=vaes|openssl names)
//   dp-aead residue
//       seals and opens a few chunks with each backend, drops every key object, then searches this process's writable
//       anonymous memory for round keys 2 and 3 of the AES-256 key schedule (bytes 32..<64, which only an expansion
//       holds): what each backend leaves behind that the caller cannot wipe
import BaselineOpenSSL
import BaselineSodium
import Crypto
import Foundation
import ProtectionCrypto

func now() -> Double { var t = timespec(); clock_gettime(CLOCK_MONOTONIC, &t); return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9 }
func median(_ x: [Double]) -> Double { let s = x.sorted(); return s[s.count / 2] }
func usage() -> Never {
    FileHandle.standardError.write(Data("usage: dp-aead speed|residue [options] (see Benchmarks/Drivers/dp-aead/main.swift)\n".utf8))
    exit(64)
}
func check(_ ok: Bool, _ what: String) { if !ok { FileHandle.standardError.write(Data("dp-aead: error: \(what)\n".utf8)); exit(1) } }

/// One chunk's buffers: text (sealed in place), a copy to open, an output, nonce, 25 bytes of associated data, tag.
struct Chunk {
    let size: Int
    let text, sealed, output: UnsafeMutableRawPointer
    let nonce = UnsafeMutableRawPointer.allocate(byteCount: 12, alignment: 16)
    let ad = UnsafeMutableRawBufferPointer.allocate(byteCount: 25, alignment: 16)
    let tag = UnsafeMutableRawPointer.allocate(byteCount: 16, alignment: 16), sealedTag = UnsafeMutableRawPointer.allocate(byteCount: 16, alignment: 16)
    init(size: Int) {
        self.size = size
        text = .allocate(byteCount: size, alignment: 64); sealed = .allocate(byteCount: size, alignment: 64); output = .allocate(byteCount: size, alignment: 64)
        for i in 0..<size { text.storeBytes(of: UInt8(truncatingIfNeeded: i &* 31), toByteOffset: i, as: UInt8.self) }
        for i in 0..<12 { nonce.storeBytes(of: UInt8(i), toByteOffset: i, as: UInt8.self) }
        ad.initializeMemory(as: UInt8.self, repeating: 9)
    }
    var adBytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(ad) }
}

/// A backend under test: seals `text` in place; opens `sealed` into `output`.
protocol Contender: AnyObject {
    var name: String { get }
    func seal(_ c: Chunk)
    func open(_ c: Chunk) -> Bool
}

/// libsodium 1.0.18 as the library used it before issue 23: the expanded state computed once (`beforenm`, locked memory).
final class Sodium: Contender {
    let name = "libsodium 1.0.18, state precomputed (beforenm/afternm)"
    let state = sodium_malloc(crypto_aead_aes256gcm_statebytes())!.assumingMemoryBound(to: crypto_aead_aes256gcm_state.self)
    init(_ k: borrowing SecretBytes) {
        k.withUnsafeBytes { _ = crypto_aead_aes256gcm_beforenm(state, $0.baseAddress!.assumingMemoryBound(to: UInt8.self)) }
    }
    deinit { sodium_free(state) }  // zeroes it
    func seal(_ c: Chunk) {
        let t = c.text.assumingMemoryBound(to: UInt8.self)
        _ = crypto_aead_aes256gcm_encrypt_detached_afternm(t, c.tag.assumingMemoryBound(to: UInt8.self), nil, t, UInt64(c.size),
            c.ad.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(c.ad.count), nil, c.nonce.assumingMemoryBound(to: UInt8.self), state)
    }
    func open(_ c: Chunk) -> Bool {
        crypto_aead_aes256gcm_decrypt_detached_afternm(c.output.assumingMemoryBound(to: UInt8.self), nil, c.sealed.assumingMemoryBound(to: UInt8.self),
            UInt64(c.size), c.sealedTag.assumingMemoryBound(to: UInt8.self), c.ad.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(c.ad.count),
            c.nonce.assumingMemoryBound(to: UInt8.self), state) == 0
    }
}

/// The library's chunk cipher as it is: ProtectionCrypto's AEADKey, one session per chunk (OpenSSL since issue 23).
final class Library: Contender {
    let name = "ProtectionCrypto AEADKey, a session per chunk (the library's chunk cipher, on \(AEADCipher.aesGCMBackend))"
    let key: AEADKey
    init(_ k: borrowing SecretBytes) throws { key = try AEADKey(.aes256gcm, key: k) }
    func seal(_ c: Chunk) { key.withSession { $0.seal(c.text, count: c.size, into: c.text, nonce: c.nonce, ad: c.adBytes, tag: c.tag) } }
    func open(_ c: Chunk) -> Bool {
        (try? key.withSession { (s) throws(ProtectionCrypto.CryptoError) in try s.open(c.sealed, count: c.size, into: c.output, nonce: c.nonce, ad: c.adBytes, tag: c.sealedTag) }) != nil
    }
}

final class SwiftCrypto: Contender {
    let name = "swift-crypto 4.5.2, AES.GCM (key setup per call, new Data)"
    let key: SymmetricKey
    init(_ k: borrowing SecretBytes) { key = k.withUnsafeBytes { SymmetricKey(data: $0) } }
    func seal(_ c: Chunk) {
        // What a caller with raw buffers must do: the result comes back as new Data, copied into place.
        let box = try! AES.GCM.seal(UnsafeRawBufferPointer(start: c.text, count: c.size), using: key,
                                    nonce: try! AES.GCM.Nonce(data: UnsafeRawBufferPointer(start: c.nonce, count: 12)), authenticating: c.adBytes)
        box.ciphertext.withUnsafeBytes { c.text.copyMemory(from: $0.baseAddress!, byteCount: c.size) }
        box.tag.withUnsafeBytes { c.tag.copyMemory(from: $0.baseAddress!, byteCount: 16) }
    }
    func open(_ c: Chunk) -> Bool {
        guard let box = try? AES.GCM.SealedBox(nonce: AES.GCM.Nonce(data: UnsafeRawBufferPointer(start: c.nonce, count: 12)),
                                               ciphertext: Data(bytes: c.sealed, count: c.size), tag: Data(bytes: c.sealedTag, count: 16)),
              let plain = try? AES.GCM.open(box, using: key, authenticating: c.adBytes) else { return false }
        plain.withUnsafeBytes { c.output.copyMemory(from: $0.baseAddress!, byteCount: c.size) }
        return true
    }
}

/// One EVP_CIPHER_CTX keyed once; each chunk sets only its nonce (and the direction).
final class OpenSSL: Contender {
    let name = "OpenSSL 3.0.19 EVP, one EVP_CIPHER_CTX kept per key"
    let ctx = EVP_CIPHER_CTX_new()!
    nonisolated(unsafe) static let cipher = EVP_CIPHER_fetch(nil, "AES-256-GCM", nil)!
    init(_ k: borrowing SecretBytes) {
        k.withUnsafeBytes { k in check(EVP_CipherInit_ex(ctx, Self.cipher, nil, k.baseAddress!.assumingMemoryBound(to: UInt8.self), nil, 1) == 1, "EVP init") }
    }
    deinit { EVP_CIPHER_CTX_free(ctx) }
    func seal(_ c: Chunk) {
        var n: Int32 = 0
        check(EVP_CipherInit_ex(ctx, nil, nil, nil, c.nonce.assumingMemoryBound(to: UInt8.self), 1) == 1, "iv")
        check(EVP_CipherUpdate(ctx, nil, &n, c.ad.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(c.ad.count)) == 1, "ad")
        let t = c.text.assumingMemoryBound(to: UInt8.self)
        check(EVP_CipherUpdate(ctx, t, &n, t, Int32(c.size)) == 1, "update")
        check(EVP_CipherFinal_ex(ctx, t + Int(n), &n) == 1, "final")
        check(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, c.tag) == 1, "tag")
    }
    func open(_ c: Chunk) -> Bool {
        var n: Int32 = 0
        check(EVP_CipherInit_ex(ctx, nil, nil, nil, c.nonce.assumingMemoryBound(to: UInt8.self), 0) == 1, "iv")
        check(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, c.sealedTag) == 1, "tag")
        check(EVP_CipherUpdate(ctx, nil, &n, c.ad.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(c.ad.count)) == 1, "ad")
        let o = c.output.assumingMemoryBound(to: UInt8.self)
        check(EVP_CipherUpdate(ctx, o, &n, c.sealed.assumingMemoryBound(to: UInt8.self), Int32(c.size)) == 1, "update")
        return EVP_CipherFinal_ex(ctx, o + Int(n), &n) == 1
    }
}

/// Seals a fresh copy of the plaintext with `c`, then checks every contender produced the same bytes and opens them.
func crossCheck(_ all: [Contender], _ chunk: Chunk) {
    let plain = Array(UnsafeRawBufferPointer(start: chunk.text, count: chunk.size))
    var results: [[UInt8]] = []
    for b in all {
        plain.withUnsafeBytes { chunk.text.copyMemory(from: $0.baseAddress!, byteCount: chunk.size) }
        b.seal(chunk)
        results.append(Array(UnsafeRawBufferPointer(start: chunk.text, count: chunk.size)) + Array(UnsafeRawBufferPointer(start: chunk.tag, count: 16)))
    }
    check(Set(results).count == 1, "the backends disagree on ciphertext and tag at \(chunk.size) bytes")
    chunk.sealed.copyMemory(from: chunk.text, byteCount: chunk.size)
    chunk.sealedTag.copyMemory(from: chunk.tag, byteCount: 16)
    for b in all { check(b.open(chunk) && memcmp(chunk.output, plain, chunk.size) == 0, "\(b.name) does not open the common result") }
}

func speed(_ argv: [String]) throws {
    var sizes = [4, 16, 64], mib = 64, rounds = 7
    var args = argv.makeIterator()
    while let a = args.next() {
        switch a {
        case "--sizes": sizes = (args.next() ?? "").split(separator: ",").compactMap { Int($0) }
        case "--mib": mib = Int(args.next() ?? "") ?? mib
        case "--rounds": rounds = Int(args.next() ?? "") ?? rounds
        default: usage()
        }
    }
    let key = try SecretBytes.random(count: 32)
    let all: [Contender] = [Sodium(key), SwiftCrypto(key), OpenSSL(key), try Library(key)]
    let chunks = sizes.map { Chunk(size: $0 * 1024) }
    for c in chunks { crossCheck(all, c) }
    // rate[size][contender][0 seal, 1 open]: GB/s per measurement
    var rate: [[[[Double]]]] = Array(repeating: Array(repeating: [[], []], count: all.count), count: sizes.count)
    let cells = sizes.indices.flatMap { s in all.indices.flatMap { b in [(s, b, 0), (s, b, 1)] } }
    for r in 0..<rounds {
        for k in cells.indices {
            let (s, b, op) = cells[(k + r * 3) % cells.count]
            let c = chunks[s], n = max(1, mib * 1024 * 1024 / c.size)
            let t0 = now()
            if op == 0 { for _ in 0..<n { all[b].seal(c) } } else { for _ in 0..<n { check(all[b].open(c), "open failed") } }
            rate[s][b][op].append(Double(n * c.size) / (now() - t0) / 1e9)
        }
    }
    print("AES-256-GCM in memory, one thread, \(mib) MiB per measurement, \(rounds) interleaved rounds, median GB/s (ratio to libsodium)")
    print("| backend | " + sizes.map { "seal \($0) KiB | open \($0) KiB" }.joined(separator: " | ") + " |")
    print("|---|" + String(repeating: "---:|", count: 2 * sizes.count))
    for b in all.indices {
        var row = "| \(all[b].name) |"
        for s in sizes.indices {
            for op in 0..<2 {
                let m = median(rate[s][b][op]), base = median(rate[s][0][op])
                row += String(format: " %.2f (%.2f×) |", m, m / base)
            }
        }
        print(row)
    }
}

// MARK: residue

/// Round keys 2 and 3 (schedule bytes 32..<64) of the AES-256 key `key` (FIPS-197 §5.2), computed into `out`.
func roundKeys2and3(of key: UnsafeRawPointer, into out: UnsafeMutablePointer<UInt8>) {
    var sbox = [UInt8](repeating: 0, count: 256)
    var p: UInt8 = 1, q: UInt8 = 1
    repeat {  // the S-box from the multiplicative inverse (p·3 walks the group, q = p⁻¹) and the affine map
        p = p ^ (p << 1) ^ (p & 0x80 != 0 ? 0x1B : 0)
        q ^= q << 1; q ^= q << 2; q ^= q << 4; if q & 0x80 != 0 { q ^= 0x09 }
        let x = q ^ (q << 1 | q >> 7) ^ (q << 2 | q >> 6) ^ (q << 3 | q >> 5) ^ (q << 4 | q >> 4)
        sbox[Int(p)] = x ^ 0x63
    } while p != 1
    sbox[0] = 0x63
    var w = [UInt8](repeating: 0, count: 64)
    for i in 0..<32 { w[i] = key.load(fromByteOffset: i, as: UInt8.self) }
    for i in 8..<16 {
        var t = Array(w[(i - 1) * 4..<i * 4])
        if i == 8 { t = [sbox[Int(t[1])] ^ 0x01, sbox[Int(t[2])], sbox[Int(t[3])], sbox[Int(t[0])]] }
        if i == 12 { t = t.map { sbox[Int($0)] } }
        for j in 0..<4 { w[i * 4 + j] = w[(i - 8) * 4 + j] ^ t[j] }
    }
    for i in 0..<32 { out[i] = w[32 + i] }
    w.withUnsafeMutableBytes { OPENSSL_cleanse($0.baseAddress, 64) }
}

/// Counts where the 32 bytes at `needle`, stored XOR 0x5A so that the needle itself is not found, occur in this
/// process's writable anonymous memory (heap, stacks, anonymous maps).
func occurrences(ofMasked needle: UnsafePointer<UInt8>) -> Int {
    let maps = (try? String(contentsOfFile: "/proc/self/maps", encoding: .utf8)) ?? ""
    let first = UnsafeRawPointer(needle).loadUnaligned(as: UInt64.self) ^ 0x5A5A_5A5A_5A5A_5A5A  // the first 8 bytes, unmasked
    var found = 0
    for line in maps.split(separator: "\n") {
        let f = line.split(separator: " ", omittingEmptySubsequences: true)
        guard f.count >= 5, f[1].hasPrefix("rw"), f.count == 5 || f[5].hasPrefix("[heap]") || f[5].hasPrefix("[stack") else { continue }
        let range = f[0].split(separator: "-").map { UInt(String($0), radix: 16)! }
        let base = UnsafeRawPointer(bitPattern: range[0])!, count = Int(range[1] - range[0])
        var i = 0
        while i + 32 <= count {
            if base.loadUnaligned(fromByteOffset: i, as: UInt64.self) == first {
                var same = true
                for j in 8..<32 where base.load(fromByteOffset: i + j, as: UInt8.self) != needle[j] ^ 0x5A { same = false; break }
                if same { found += 1 }
            }
            i += 1
        }
    }
    return found
}

func residue() throws {
    print("| backend | round keys 2–3 found while the key is in use | after every key object is dropped |")
    print("|---|---:|---:|")
    let needle = UnsafeMutablePointer<UInt8>.allocate(capacity: 32)
    for which in 0..<4 {
        let key = try SecretBytes.random(count: 32)
        key.withUnsafeBytes { roundKeys2and3(of: $0.baseAddress!, into: needle) }
        for i in 0..<32 { needle[i] ^= 0x5A }
        let chunk = Chunk(size: 4096)
        var during = 0, name = ""
        do {
            let b: Contender
            switch which {
            case 0: b = Sodium(key)
            case 1: b = SwiftCrypto(key)
            case 2: b = OpenSSL(key)
            default: b = try Library(key)
            }
            name = b.name
            for _ in 0..<8 { crossCheck([b], chunk) }
            during = occurrences(ofMasked: needle)
        }
        _ = consume key
        print("| \(name) | \(during) | \(occurrences(ofMasked: needle)) |")
    }
}

let argv = Array(CommandLine.arguments.dropFirst())
do {
    switch argv.first {
    case "speed": try speed(Array(argv.dropFirst()))
    case "residue": try residue()
    default: usage()
    }
} catch {
    FileHandle.standardError.write(Data("dp-aead: error: \(error)\n".utf8))
    exit(1)
}
