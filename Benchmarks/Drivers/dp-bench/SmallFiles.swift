// Many small files: create+write+close and open+read of N × 4 KiB files, protected
// against plain files with the same durability (no fsync on either side, or fsync
// on both with --fsync), interleaved rounds, one run. Every round writes into new
// directories and nothing is deleted until the end: on ext4 without a journal (this
// machine's root) the inode allocator skips inodes freed in the last 60 s (360 s while
// their inode table block is dirty), so creating files right after deleting thousands
// scans past every one of them and costs hundreds of µs per file, on every side.
import DataProtection
import Foundation

func smallFiles(_ argv: [String]) throws {
    var count = 2000, rounds = 5, dir = NSTemporaryDirectory(), fsyncEach = false
    var args = argv.makeIterator()
    while let a = args.next() {
        switch a {
        case "--files": count = Int(args.next() ?? "") ?? count
        case "--rounds": rounds = Int(args.next() ?? "") ?? rounds
        case "--dir": dir = args.next() ?? dir
        case "--fsync": fsyncEach = true
        default: usage()
        }
    }
    let keys = try InMemoryClassKeys.random()
    let files = ProtectedFiles(keys: keys)
    let root = "\(dir)/dp-bench-small-\(getpid())"
    defer { try? FileManager.default.removeItem(atPath: root) }
    let payload = [UInt8](repeating: 0x5A, count: 4096)
    let buf = UnsafeMutableRawBufferPointer.allocate(byteCount: 8192, alignment: 64)
    defer { buf.deallocate() }

    func plainWrite(_ d: String) -> Double {
        let t0 = now()
        for i in 0..<count {
            let fd = open("\(d)/\(i)", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            _ = payload.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if fsyncEach { fsync(fd) }
            close(fd)
        }
        return Double(count) / (now() - t0)
    }
    func plainRead(_ d: String) -> Double {
        let t0 = now()
        for i in 0..<count {
            let fd = open("\(d)/\(i)", O_RDONLY | O_CLOEXEC)
            _ = read(fd, buf.baseAddress, buf.count)
            close(fd)
        }
        return Double(count) / (now() - t0)
    }
    func protectedWrite(_ d: String) throws -> Double {
        let t0 = now()
        for i in 0..<count {
            let h = try files.create("\(d)/\(i)", protection: .complete)
            try h.write(payload, at: 0)
            if fsyncEach { try h.sync() }
            h.close()
        }
        return Double(count) / (now() - t0)
    }
    func protectedRead(_ d: String) throws -> Double {
        let t0 = now()
        for i in 0..<count {
            let h = try files.open("\(d)/\(i)")
            _ = try h.read(into: buf, at: 0)
            h.close()
        }
        return Double(count) / (now() - t0)
    }
    var r: [String: [Double]] = [:]
    for round in 0..<rounds {
        let p = "\(root)/p\(round)", q = "\(root)/q\(round)"
        try FileManager.default.createDirectory(atPath: p, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: q, withIntermediateDirectories: true)
        r["pw", default: []].append(plainWrite(p))
        r["qw", default: []].append(try protectedWrite(q))
        r["pr", default: []].append(plainRead(p))
        r["qr", default: []].append(try protectedRead(q))
    }
    let m = r.mapValues(median)
    print("""
    | \(count) × 4 KiB files, \(fsyncEach ? "fsync per file" : "no fsync") on both sides, \(rounds) interleaved rounds (median) | files/s | ratio |
    |---|---:|---:|
    | plain create+write+close | \(Int(m["pw"]!)) | 1.00 |
    | protected create+write+close (class complete) | \(Int(m["qw"]!)) | \(String(format: "%.2f", m["qw"]! / m["pw"]!))× |
    | plain open+read+close | \(Int(m["pr"]!)) | 1.00 |
    | protected open+read+close | \(Int(m["qr"]!)) | \(String(format: "%.2f", m["qr"]! / m["pr"]!))× |
    """)
}
