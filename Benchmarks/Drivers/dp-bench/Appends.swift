// Small appends to one file: a protected handle's append against `write` on a plain file opened with O_APPEND, the
// same bytes, no fsync on either side, interleaved rounds, one run. Each append re-seals the file's last chunk (its
// "last" flag changes, FORMAT.md), so what it costs is that chunk's size, not the record's.
import DataProtection
import Foundation

func appends(_ argv: [String]) throws {
    var count = 20000, bytes = 100, rounds = 7, dir = NSTemporaryDirectory()
    var args = argv.makeIterator()
    while let a = args.next() {
        switch a {
        case "--count": count = Int(args.next() ?? "") ?? count
        case "--bytes": bytes = Int(args.next() ?? "") ?? bytes
        case "--rounds": rounds = Int(args.next() ?? "") ?? rounds
        case "--dir": dir = args.next() ?? dir
        default: usage()
        }
    }
    let files = ProtectedFiles(keys: try InMemoryClassKeys.random())
    let path = "\(dir)/dp-bench-appends-\(getpid())"
    defer { unlink(path); unlink(path + ".plain") }
    let record = (0..<bytes).map { UInt8(truncatingIfNeeded: $0 &* 7) }

    func protectedAppends() throws -> Double {
        unlink(path)
        let h = try files.create(path, protection: .complete)
        let t0 = now()
        for _ in 0..<count { try h.append(record) }
        let t1 = now()
        guard try h.size == Int64(count * bytes) else { throw ProtectionError(.io(EIO), "appended \(try h.size) bytes of \(count * bytes)") }
        h.close()
        return Double(count) / (t1 - t0)
    }
    func plainAppends() throws -> Double {
        unlink(path + ".plain")
        let fd = open(path + ".plain", O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw ProtectionError(.io(errno), "cannot create '\(path).plain'") }
        defer { close(fd) }
        let t0 = now()
        for _ in 0..<count {
            guard record.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == bytes else { throw ProtectionError(.io(errno), "short append to '\(path).plain'") }
        }
        return Double(count) / (now() - t0)
    }

    var r: [String: [Double]] = [:]
    for round in 0..<rounds {
        // Taking turns at going first, as in `throughput`.
        if round % 2 == 0 {
            r["protected", default: []].append(try protectedAppends())
            r["plain", default: []].append(try plainAppends())
        } else {
            r["plain", default: []].append(try plainAppends())
            r["protected", default: []].append(try protectedAppends())
        }
    }
    let m = r.mapValues(median)
    print("""
    | \(count) appends of \(bytes) bytes, \(ProtectedFileOptions.defaultChunkSize / 1024) KiB chunks, \(rounds) interleaved rounds (median) | appends/s | ratio |
    |---|---:|---:|
    | plain file, O_APPEND write (no fsync) | \(Int(m["plain"]!)) | 1.00× |
    | protected file, handle append (no fsync) | \(Int(m["protected"]!)) | \(String(format: "%.2f", m["protected"]! / m["plain"]!))× |
    """)
}
