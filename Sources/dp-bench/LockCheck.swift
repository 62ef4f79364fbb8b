// The per-operation cost of observing the live lock: the same random 4 KiB reads
// on two handles of one file, one opened through a ProtectedFiles attached to a
// LiveLock and one not, interleaved, in one run.
import DataProtection
import Foundation


func lockCheck(_ argv: [String]) throws {
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
    let keys = try InMemoryClassKeys.random()
    let live = try LiveLock(domainID: "bench\(getpid())", runtimeDirectory: "\(dir)/dp-bench-run-\(getpid())")
    defer { try? FileManager.default.removeItem(atPath: "\(dir)/dp-bench-run-\(getpid())") }
    let plain = ProtectedFiles(keys: keys)
    let observed = ProtectedFiles(keys: keys, liveLock: live)
    let path = "\(dir)/dp-bench-lockcheck-\(getpid()).dpf"
    defer { try? FileManager.default.removeItem(atPath: path) }
    let size = 64 << 20
    try plain.write([UInt8](repeating: 1, count: size), to: path, protection: .complete)
    let h0 = try plain.open(path), h1 = try observed.open(path)
    let buf = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 64)
    defer { buf.deallocate() }
    var offsets = [Int64](repeating: 0, count: ops)
    var rng = SystemRandomNumberGenerator()
    for i in 0..<ops { offsets[i] = Int64.random(in: 0..<Int64(size / 4096), using: &rng) * 4096 }
    func run(_ h: ProtectedFileHandle) throws -> Double {
        let t0 = now()
        for o in offsets { _ = try h.read(into: buf, at: o) }
        return (now() - t0) / Double(ops) * 1e9
    }
    var without: [Double] = [], with: [Double] = []
    for _ in 0..<rounds {
        without.append(try run(h0))
        with.append(try run(h1))
    }
    let a = median(without), b = median(with)
    print("""
    | random 4 KiB reads, \(ops) per round, \(rounds) interleaved rounds (median) | ns/op | ratio |
    |---|---:|---:|
    | handle without live lock | \(String(format: "%.0f", a)) | 1.000 |
    | handle observing the live lock (epoch check per operation) | \(String(format: "%.0f", b)) | \(String(format: "%.3f", b / a))× |
    """)
    h0.close(); h1.close()
}
