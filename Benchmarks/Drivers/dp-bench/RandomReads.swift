// Random 4 KiB reads of a 64 MiB protected file written by one whole-file write, as `dp-bench lock-check` measured
// them through the handle that observed the live lock (its last version, a131561, which every handle is now), and of a
// plain file of the same size at the same offsets, interleaved round by round: the ratio issue 23's target is about.
import DataProtection
import Foundation

func randomReads(_ argv: [String]) throws {
    var ops = 200_000, rounds = 7, dir = NSTemporaryDirectory()
    var args = argv.makeIterator()
    while let a = args.next() {
        switch a {
        case "--ops": ops = Int(args.next() ?? "") ?? ops
        case "--rounds": rounds = Int(args.next() ?? "") ?? rounds
        case "--dir": dir = args.next() ?? dir
        default: usage()
        }
    }
    let files = ProtectedFiles(keys: try InMemoryClassKeys.random())
    let path = "\(dir)/dp-bench-randomreads-\(getpid()).dpf"
    defer { try? FileManager.default.removeItem(atPath: path) }
    let size = 64 << 20
    try files.write([UInt8](repeating: 1, count: size), to: path, protection: .complete)
    let h = try files.open(path)
    defer { h.close() }
    let buf = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 64)
    defer { buf.deallocate() }
    var offsets = [Int64](repeating: 0, count: ops)
    var rng = SystemRandomNumberGenerator()
    for i in 0..<ops { offsets[i] = Int64.random(in: 0..<Int64(size / 4096), using: &rng) * 4096 }
    let plainPath = path + ".plain"
    defer { unlink(plainPath) }
    try Data(repeating: 1, count: size).write(to: URL(fileURLWithPath: plainPath))
    let fd = open(plainPath, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw ProtectionError(.io(errno), "cannot open '\(plainPath)'") }
    defer { close(fd) }
    var ns: [Double] = [], plainNS: [Double] = [], ratios: [Double] = []
    for round in 0..<rounds {
        var protected = 0.0, plain = 0.0
        for k in 0..<2 {  // which goes first alternates by round
            let t0 = now()
            if (round + k) % 2 == 0 {
                for o in offsets { _ = try h.read(into: buf, at: o) }
                protected = (now() - t0) / Double(ops) * 1e9
            } else {
                for o in offsets where pread(fd, buf.baseAddress, 4096, off_t(o)) != 4096 { throw ProtectionError(.io(EIO), "short read of '\(plainPath)'") }
                plain = (now() - t0) / Double(ops) * 1e9
            }
        }
        ns.append(protected)
        plainNS.append(plain)
        ratios.append(plain / protected)
    }
    print("""
    | random 4 KiB reads of a 64 MiB file, \(ops) per round, \(rounds) interleaved rounds (median) | ns/op | plain ÷ protected |
    |---|---:|---:|
    | one protected handle, file written in one session | \(String(format: "%.0f", median(ns))) | \(String(format: "%.3f×", median(ratios))) (per round) |
    | plain file, `pread` | \(String(format: "%.0f", median(plainNS))) | |
    """)
}
