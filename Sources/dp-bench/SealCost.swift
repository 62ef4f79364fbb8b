// What extended nonces cost per 4 KiB chunk (FORMAT.md §7, §8): AES-256-GCM sealing and opening in memory,
// direct nonces against extended nonces with a key nonce shared by a run of chunks (a write batch's piece, a read
// piece) or drawn for every chunk (an append, a random 4 KiB read), interleaved rounds, one thread, one run.
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

    /// ns per chunk over `chunks` chunks, switching between the nonces of A and B every `run` chunks (0: direct nonces,
    /// every chunk); opens A or B when `opening`, else seals the scratch chunk.
    func measure(_ key: borrowing AEADKey, run: Int, opening: Bool) throws -> Double {
        for k in 0..<2 {
            try key.fillNonces(nonce(k), count: 1, stride: stride)
            key.seal(text(k), count: size, into: text(k), nonce: nonce(k), ad: ad, tag: tag(k))
        }
        let every = max(run, 1)
        let t0 = now()
        try key.withSession { (s) throws(CryptoError) in
            for i in 0..<chunks {
                let k = (i / every) & 1
                if opening {
                    try s.open(text(k), count: size, into: text(3), nonce: nonce(k), ad: ad, tag: tag(k))
                } else {
                    s.seal(text(2), count: size, into: text(2), nonce: nonce(k), ad: ad, tag: tag(2))
                }
            }
        }
        return (now() - t0) / Double(chunks) * 1e9
    }

    let rows: [(String, Int)] = [("direct 12-byte nonces (format 1)", 0), ("extended, one key nonce per 32 chunks (a 128 KiB write piece)", 32),
                                 ("extended, one key nonce per 16 chunks (a 64 KiB read piece)", 16), ("extended, a key nonce per chunk (an append, a random read)", 1)]
    var seal = [[Double]](repeating: [], count: rows.count), open = seal
    for r in 0..<rounds {
        for k in 0..<rows.count {
            let i = (k + r) % rows.count  // rotate the order from round to round
            seal[i].append(try rows[i].1 == 0 ? measure(direct, run: 0, opening: false) : measure(extended, run: rows[i].1, opening: false))
            open[i].append(try rows[i].1 == 0 ? measure(direct, run: 0, opening: true) : measure(extended, run: rows[i].1, opening: true))
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
