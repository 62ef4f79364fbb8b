// What extended nonces cost per 4 KiB chunk (FORMAT.md §7, §8): AES-256-GCM sealing and opening in memory, direct
// nonces against extended nonces whose key nonce stays the same (a handle's appends, random reads of a file written in
// one session: the key's cached subkey), changes every 16 chunks, or changes every chunk (random reads of a file
// written in many sessions), interleaved rounds, one thread, one run.
import DataProtection
import Foundation
import ProtectionCrypto

func sealCost(_ argv: [String]) throws {
    var chunks = 32768, rounds = 7
    var args = argv.makeIterator()
    while let a = args.next() {
        switch a {
        case "--chunks": chunks = Int(args.next() ?? "") ?? chunks
        case "--rounds": rounds = Int(args.next() ?? "") ?? rounds
        default: usage()
        }
    }
    let size = ProtectedFileOptions.defaultChunkSize
    let master = try SecretBytes.random(count: 32)
    let direct = try AEADKey(.aes256gcm, key: master)
    let extended = try AEADKey(.aes256gcm, key: master, nonceMode: .extended)
    // Two sealed chunks (A, B) under different key nonces, a scratch chunk to seal in place, an output to open into.
    let stride = size + 16 + 24
    let mem = UnsafeMutableRawBufferPointer.allocate(byteCount: 4 * stride + 25, alignment: 64)
    defer { mem.deallocate() }
    mem.initializeMemory(as: UInt8.self, repeating: 7)
    let base = mem.baseAddress!, ad = UnsafeRawBufferPointer(start: base + 4 * stride, count: 25)
    func text(_ k: Int) -> UnsafeMutableRawPointer { base + k * stride }  // 0: A, 1: B, 2: scratch, 3: output
    func tag(_ k: Int) -> UnsafeMutableRawPointer { text(k) + size }
    func nonce(_ k: Int) -> UnsafeMutableRawPointer { text(k) + size + 16 }

    /// ns per chunk over `chunks` chunks, switching between the nonces of A and B (whose key nonces differ) every `run`
    /// chunks, in one session per chunk (as an append or a random read has) or one for all; opens A or B when
    /// `opening`, else seals the scratch chunk.
    func measure(_ key: borrowing AEADKey, run: Int, sessionPerChunk: Bool, opening: Bool) throws -> Double {
        for k in 0..<2 {
            try key.fillNonces(nonce(k), count: 1, stride: stride)
            if k == 1, key.nonceMode == .extended { nonce(1).storeBytes(of: ~nonce(0).load(as: UInt8.self), as: UInt8.self) }  // another key nonce
            key.seal(text(k), count: size, into: text(k), nonce: nonce(k), ad: ad, tag: tag(k))
        }
        func one(_ s: inout AEADSession, _ i: Int) throws(CryptoError) {
            let k = (i / run) & 1
            if opening {
                try s.open(text(k), count: size, into: text(3), nonce: nonce(k), ad: ad, tag: tag(k))
            } else {
                s.seal(text(2), count: size, into: text(2), nonce: nonce(k), ad: ad, tag: tag(2))
            }
        }
        let t0 = now()
        if sessionPerChunk {
            for i in 0..<chunks { try key.withSession { (s) throws(CryptoError) in try one(&s, i) } }
        } else {
            try key.withSession { (s) throws(CryptoError) in for i in 0..<chunks { try one(&s, i) } }
        }
        return (now() - t0) / Double(chunks) * 1e9
    }

    // (name, extended, key nonce changes every `run` chunks, a session per chunk)
    let rows: [(String, Bool, Int, Bool)] = [
        ("direct 12-byte nonces (format 1), a session per chunk", false, Int.max, true),
        ("extended, one key nonce, a session per chunk (a handle's appends; random reads of a file written in one session)", true, Int.max, true),
        ("extended, key nonce changes every 16 chunks, one session (a 64 KiB read piece of a file written in batches)", true, 16, false),
        ("extended, key nonce changes every chunk, a session per chunk (random reads of a file written in many sessions)", true, 1, true),
    ]
    var seal = [[Double]](repeating: [], count: rows.count), open = seal
    for r in 0..<rounds {
        for k in 0..<rows.count {
            let i = (k + r) % rows.count  // rotate the order from round to round
            let (_, ext, run, perChunk) = rows[i]
            seal[i].append(try ext ? measure(extended, run: run, sessionPerChunk: perChunk, opening: false) : measure(direct, run: run, sessionPerChunk: perChunk, opening: false))
            open[i].append(try ext ? measure(extended, run: run, sessionPerChunk: perChunk, opening: true) : measure(direct, run: run, sessionPerChunk: perChunk, opening: true))
        }
    }
    print("| AES-256-GCM, 4 KiB chunks, \(chunks) per measurement, \(rounds) interleaved rounds (median) | seal ns/chunk | ratio | open ns/chunk | ratio |")
    print("|---|---:|---:|---:|---:|")
    let s0 = median(seal[0]), o0 = median(open[0])
    for (i, row) in rows.enumerated() {
        let s = median(seal[i]), o = median(open[i])
        print("| \(row.0) | \(Int(s.rounded())) | \(String(format: "%.3f", s / s0))× | \(Int(o.rounded())) | \(String(format: "%.3f", o / o0))× |")
    }
}
