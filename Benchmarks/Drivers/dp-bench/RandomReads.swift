// Random 4 KiB reads of a 64 MiB protected file written by one whole-file write, as `dp-bench lock-check` measured
// them through the handle that observed the live lock (its last version, a131561, which every handle is now).
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
    var ns: [Double] = []
    for _ in 0..<rounds {
        let t0 = now()
        for o in offsets { _ = try h.read(into: buf, at: o) }
        ns.append((now() - t0) / Double(ops) * 1e9)
    }
    print("| random 4 KiB reads, \(ops) per round, \(rounds) rounds (median) | ns/op |\n|---|---:|\n| one handle, file written in one session | \(String(format: "%.0f", median(ns))) |")
}
