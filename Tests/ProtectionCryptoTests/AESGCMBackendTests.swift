import Foundation
import ProtectionCrypto
import XCTest

/// The chunk cipher's AES-256-GCM backend against libsodium's, the one before issue 23: the same ciphertext and tag
/// for random keys, nonces, associated data and sizes, and each opens the other's. Against a backend that differed in
/// any byte (another nonce layout, another tag length, the AD dropped, a wrong counter or GHASH tail), these fail.
///
/// The backend is the process's (`AEADCipher.aesGCMBackend`): OpenSSL's libcrypto in a debug build, the project's
/// VAES code in an optimised one or where `DATAPROTECTION_AES_GCM_BACKEND=vaes` asks for it, as scripts/test's VAES
/// phase runs this suite (and under AddressSanitizer).
final class AESGCMBackendTests: XCTestCase {
    var rng = SystemRandomNumberGenerator()

    func bytes(_ n: Int) -> [UInt8] {
        var b = [UInt8](repeating: 0, count: n)
        b.withUnsafeMutableBytes { p in for i in stride(from: 0, to: n, by: 8) { withUnsafeBytes(of: rng.next()) { p[i..<min(i + 8, n)].copyBytes(from: $0.prefix(n - i)) } } }
        return b
    }

    /// A size from the edges a chunk cipher meets (empty, partial blocks, a default chunk, beyond int pieces) or at random.
    func size() -> Int {
        let edges = [0, 1, 15, 16, 17, 31, 4095, 4096, 4097, 16384, 65536, 65551]
        return Bool.random(using: &rng) ? edges.randomElement(using: &rng)! : Int.random(in: 0...70_000, using: &rng)
    }

    /// On this project's machines (OpenSSL 3.0's default provider) the chunk cipher calls the provider's AES-256-GCM
    /// functions directly, so the agreement test below covers that path; the EVP path stays for other providers.
    func testTheChunkCipherCallsTheProviderDirectly() throws {
        try XCTSkipUnless(AEADCipher.aes256gcm.isAvailable, "AES-256-GCM is not available on this CPU")
        XCTAssertTrue(AEADCipher.aesGCMCallsProviderDirectly, "libcrypto's provider does not list AES-256-GCM's functions, or they disagreed with EVP")
    }

    /// The backend is the one the environment asks for, where the CPU can run it: a phase that meant to test VAES
    /// and silently ran OpenSSL would prove nothing.
    func testTheBackendIsTheOneAskedFor() throws {
        try XCTSkipUnless(AEADCipher.aes256gcm.isAvailable, "AES-256-GCM is not available on this CPU")
        let asked = ProcessInfo.processInfo.environment[AESGCMBackend.environmentVariable].flatMap(AESGCMBackend.init(rawValue:))
        print("AES-256-GCM backend: \(AEADCipher.aesGCMBackend) (\(AESGCMBackend.environmentVariable)=\(asked?.rawValue ?? "unset"))")
        if asked == .openssl { XCTAssertEqual(AEADCipher.aesGCMBackend, .openssl) }
        if asked == .vaes, AEADCipher.aesGCMVAESRunsHere { XCTAssertEqual(AEADCipher.aesGCMBackend, .vaes) }
    }

    /// Every message length from 0 to 1,100 bytes, so that every path of the VAES code meets libsodium's bytes: the
    /// 16-block loop (256 bytes), the 8-block group, single blocks and the partial last block, each after every other,
    /// with associated data of 0 to 40 bytes (whole blocks and partial), in place and into another buffer.
    func testEveryLengthUpToElevenHundredBytesAgreesWithLibsodium() throws {
        try XCTSkipUnless(AEADCipher.aes256gcm.isAvailable, "AES-256-GCM is not available on this CPU")
        let key = try SecretBytes.random(count: 32)
        let aead = try AEADKey(.aes256gcm, key: key)
        let plainAll = bytes(1100), adAll = bytes(40)
        let one = UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 1)
        defer { one.deallocate() }
        let ro = UnsafeRawPointer(one)
        for n in 0...1100 {
            let plain = Array(plainAll[0..<n]), ad = Array(adAll[0..<(n % 41)]), nonce = bytes(12)
            var theirs = [UInt8](repeating: 0, count: n), theirTag = [UInt8](repeating: 0, count: 16)
            nonce.withUnsafeBytes { nb in ad.withUnsafeBytes { a in plain.withUnsafeBytes { p in theirs.withUnsafeMutableBytes { c in theirTag.withUnsafeMutableBytes { t in
                ReferenceAESGCM.seal(key: key, nonce: nb, ad: a, plaintext: p, into: c, tag: t)
            } } } } }
            // Into another buffer, then in place.
            var ours = [UInt8](repeating: 0, count: n), ourTag = [UInt8](repeating: 0, count: 16)
            plain.withUnsafeBytes { p in ours.withUnsafeMutableBytes { o in ad.withUnsafeBytes { a in ourTag.withUnsafeMutableBytes { t in
                aead.seal(p.baseAddress ?? ro, count: n, into: o.baseAddress ?? one, nonce: nonce, ad: a, tag: t.baseAddress!)
            } } } }
            XCTAssertEqual(ours, theirs, "\(n) bytes, \(ad.count) bytes of AD: ciphertext differs")
            XCTAssertEqual(ourTag, theirTag, "\(n) bytes, \(ad.count) bytes of AD: tag differs")
            var inPlace = plain, inPlaceTag = [UInt8](repeating: 0, count: 16)
            inPlace.withUnsafeMutableBytes { o in ad.withUnsafeBytes { a in inPlaceTag.withUnsafeMutableBytes { t in
                aead.sealInPlace(o.baseAddress ?? one, count: n, nonce: nonce, ad: a, tag: t.baseAddress!)
            } } }
            XCTAssertEqual(inPlace, theirs, "\(n) bytes in place: ciphertext differs")
            XCTAssertEqual(inPlaceTag, theirTag, "\(n) bytes in place: tag differs")
            var back = [UInt8](repeating: 0, count: n)
            XCTAssertNoThrow(try theirs.withUnsafeBytes { c in try back.withUnsafeMutableBytes { o in try ad.withUnsafeBytes { a in try theirTag.withUnsafeBytes { t in
                try aead.open(c.baseAddress ?? ro, count: n, into: o.baseAddress ?? one, nonce: nonce, ad: a, tag: t.baseAddress!)
            } } } }, "\(n) bytes: libsodium's message does not open")
            XCTAssertEqual(back, plain, "\(n) bytes: opened to other bytes")
            // A changed byte of the AD, or of the ciphertext's last (possibly partial) block: refused, the output zeroed.
            var badAD = ad, forged = theirs
            if !badAD.isEmpty { badAD[badAD.count - 1] ^= 0x80 } else if !forged.isEmpty { forged[forged.count - 1] ^= 0x01 } else { continue }
            var out = [UInt8](repeating: 0x5a, count: n)
            XCTAssertThrowsError(try forged.withUnsafeBytes { c in try out.withUnsafeMutableBytes { o in try badAD.withUnsafeBytes { a in try theirTag.withUnsafeBytes { t in
                try aead.open(c.baseAddress ?? ro, count: n, into: o.baseAddress ?? one, nonce: nonce, ad: a, tag: t.baseAddress!)
            } } } }, "\(n) bytes: a forged message opened")
            XCTAssertTrue(out.allSatisfy { $0 == 0 }, "\(n) bytes: unauthenticated plaintext left behind")
        }
        print("AES-256-GCM backend (\(AEADCipher.aesGCMBackend)) against libsodium: every length 0-1,100 bytes, in place and not, forgeries refused")
    }

    func testTheBackendAndLibsodiumAgreeAndOpenEachOther() throws {
        try XCTSkipUnless(AEADCipher.aes256gcm.isAvailable, "AES-256-GCM is not available on this CPU")
        var bytesChecked = 0
        for round in 0..<300 {
            let key = try SecretBytes.random(count: 32)
            let aead = try AEADKey(.aes256gcm, key: key)
            let nonce = bytes(12), ad = bytes(Int.random(in: 0...64, using: &rng)), plain = bytes(size())
            var ours = plain, ourTag = [UInt8](repeating: 0, count: 16)
            var theirs = [UInt8](repeating: 0, count: plain.count), theirTag = [UInt8](repeating: 0, count: 16)
            let one = UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 1)
            defer { one.deallocate() }
            ours.withUnsafeMutableBytes { o in
                ad.withUnsafeBytes { a in ourTag.withUnsafeMutableBytes { t in aead.sealInPlace(o.baseAddress ?? one, count: o.count, nonce: nonce, ad: a, tag: t.baseAddress!) } }
            }
            nonce.withUnsafeBytes { n in ad.withUnsafeBytes { a in plain.withUnsafeBytes { p in theirs.withUnsafeMutableBytes { c in theirTag.withUnsafeMutableBytes { t in
                ReferenceAESGCM.seal(key: key, nonce: n, ad: a, plaintext: p, into: c, tag: t)
            } } } } }
            XCTAssertEqual(ours, theirs, "round \(round), \(plain.count) bytes: ciphertext differs")
            XCTAssertEqual(ourTag, theirTag, "round \(round), \(plain.count) bytes: tag differs")

            // The backend opens libsodium's; libsodium opens the backend's.
            var opened = theirs
            XCTAssertNoThrow(try opened.withUnsafeMutableBytes { o in
                try ad.withUnsafeBytes { a in try theirTag.withUnsafeBytes { t in try aead.openInPlace(o.baseAddress ?? one, count: o.count, nonce: nonce, ad: a, tag: t.baseAddress!) } }
            })
            XCTAssertEqual(opened, plain, "round \(round): the backend does not open libsodium's ciphertext")
            var back = [UInt8](repeating: 0, count: plain.count)
            let ok = nonce.withUnsafeBytes { n in ad.withUnsafeBytes { a in ours.withUnsafeBytes { c in ourTag.withUnsafeBytes { t in back.withUnsafeMutableBytes { p in
                ReferenceAESGCM.open(key: key, nonce: n, ad: a, ciphertext: c, tag: t, into: p)
            } } } } }
            XCTAssertTrue(ok, "round \(round): libsodium does not open the backend's ciphertext")
            XCTAssertEqual(back, plain)

            // A flipped tag bit: refused, and the output zeroed.
            if !plain.isEmpty {
                var forged = ours, badTag = ourTag
                badTag[Int.random(in: 0..<16, using: &rng)] ^= 1 << UInt8.random(in: 0...7, using: &rng)
                XCTAssertThrowsError(try forged.withUnsafeMutableBytes { o in
                    try ad.withUnsafeBytes { a in try badTag.withUnsafeBytes { t in try aead.openInPlace(o.baseAddress!, count: o.count, nonce: nonce, ad: a, tag: t.baseAddress!) } }
                })
                XCTAssertTrue(forged.allSatisfy { $0 == 0 }, "round \(round): unauthenticated plaintext left behind")
            }
            bytesChecked += plain.count
        }
        print("AES-256-GCM backend against libsodium: 300 random keys, nonces and sizes, \(bytesChecked) bytes, identical and mutually opened")
    }

    /// Extended nonces: each chunk is AES-256-GCM under the subkey of its key nonce, as libsodium computes it, in a
    /// session that shares its subkeys through the key and in one that keeps its own (a small file's open).
    func testExtendedNoncesMatchLibsodiumUnderTheSubkey() throws {
        try XCTSkipUnless(AEADCipher.aes256gcm.isAvailable, "AES-256-GCM is not available on this CPU")
        for sharing in [true, false] { try checkExtended(sharingSubkeys: sharing) }
    }

    func checkExtended(sharingSubkeys: Bool) throws {
        let master = try SecretBytes.random(count: 32)
        let aead = try AEADKey(.aes256gcm, key: try master.duplicate(), nonceMode: .extended, sealsPerKeyNonce: 4)  // a new key nonce every 4 seals
        var nonces = [UInt8](repeating: 0, count: 24 * 20)
        try nonces.withUnsafeMutableBytes { try aead.fillNonces($0.baseAddress!, count: 20, stride: 24) }
        let ad = bytes(9)
        try aead.withSession(sharingSubkeys: sharingSubkeys) { (s) throws(CryptoError) in
            for i in 0..<20 {
                let nonce = Array(nonces[i * 24..<(i + 1) * 24]), plain = bytes(size())
                var ours = plain, ourTag = [UInt8](repeating: 0, count: 16)
                var theirs = [UInt8](repeating: 0, count: plain.count), theirTag = [UInt8](repeating: 0, count: 16)
                let sub = try subkey(of: master, nonce: nonce)
                ours.withUnsafeMutableBytes { o in ad.withUnsafeBytes { a in ourTag.withUnsafeMutableBytes { t in
                    s.seal(o.baseAddress ?? t.baseAddress!, count: o.count, into: o.baseAddress ?? t.baseAddress!, nonce: nonce, ad: a, tag: t.baseAddress!)
                } } }
                Array(nonce[12...]).withUnsafeBytes { n in ad.withUnsafeBytes { a in plain.withUnsafeBytes { p in theirs.withUnsafeMutableBytes { c in theirTag.withUnsafeMutableBytes { t in
                    ReferenceAESGCM.seal(key: sub, nonce: n, ad: a, plaintext: p, into: c, tag: t)
                } } } } }
                XCTAssertEqual(ours, theirs, "seal \(i), sharing subkeys \(sharingSubkeys): ciphertext differs")
                XCTAssertEqual(ourTag, theirTag, "seal \(i), sharing subkeys \(sharingSubkeys): tag differs")
            }
        }
    }

    /// The subkey of `nonce`'s key nonce under `master`.
    func subkey(of master: borrowing SecretBytes, nonce: [UInt8]) throws(CryptoError) -> SecretBytes {
        let n = UnsafeMutableRawBufferPointer.allocate(byteCount: nonce.count, alignment: 1)
        defer { n.deallocate() }
        n.copyBytes(from: nonce)
        return try AEADNonceMode.extendedSubkey(of: master, nonce: UnsafeRawBufferPointer(n))
    }

    /// Threads sealing under one key at once each get a context of their own (copies of the key's): every result matches libsodium's.
    func testConcurrentSessionsUnderOneKeyAgreeWithLibsodium() throws {
        try XCTSkipUnless(AEADCipher.aes256gcm.isAvailable, "AES-256-GCM is not available on this CPU")
        let key = try SecretBytes.random(count: 32)
        let aead = try AEADKey(.aes256gcm, key: key)
        let threads = 4, perThread = 200, size = 4096
        let plain = bytes(size), ad = bytes(16)
        var made = [[UInt8]](), expected = [[UInt8]]()
        for _ in 0..<threads * perThread {
            let n = bytes(12)
            var c = [UInt8](repeating: 0, count: size + 16)
            n.withUnsafeBytes { nb in ad.withUnsafeBytes { a in plain.withUnsafeBytes { p in c.withUnsafeMutableBytes { cb in
                ReferenceAESGCM.seal(key: key, nonce: nb, ad: a, plaintext: p, into: UnsafeMutableRawBufferPointer(rebasing: cb[0..<size]),
                                     tag: UnsafeMutableRawBufferPointer(rebasing: cb[size...]))
            } } } }
            made.append(n)
            expected.append(c)
        }
        let nonces = made
        nonisolated(unsafe) let results = UnsafeMutableBufferPointer<[UInt8]>.allocate(capacity: threads * perThread)
        results.initialize(repeating: [])
        defer { _ = results.deinitialize(); results.deallocate() }  // the arrays stored in it too (LeakSanitizer)
        DispatchQueue.concurrentPerform(iterations: threads) { t in
            for i in t * perThread..<(t + 1) * perThread {
                var c = plain + [UInt8](repeating: 0, count: 16)
                aead.withSession { s in
                    c.withUnsafeMutableBytes { cb in ad.withUnsafeBytes { a in
                        s.seal(cb.baseAddress!, count: size, into: cb.baseAddress!, nonce: nonces[i], ad: a, tag: cb.baseAddress! + size)
                    } }
                }
                results[i] = c
            }
        }
        XCTAssertEqual(Array(results), expected)
    }
}
