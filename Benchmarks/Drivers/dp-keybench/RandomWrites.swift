// `dp-keybench random-writes`: random in-place 4 KiB writes into a 64 MiB protected file, with
// sync() every K writes (each first touch of a chunk after a commit adds a journal record and an
// fsync, FORMAT.md §6.7), beside a plain file with the same writes and fsync cadence.
//
// Usage: scripts/build-release --package-path Benchmarks dp-keybench && Benchmarks/.build/release/dp-keybench random-writes [--writes N] [--rounds R] [--dir /tmp]
import DataProtection
import Foundation

func randomWrites(_ argv: [String]) throws {
    func value(_ name: String, _ fallback: Int) -> Int {
        guard let i = argv.firstIndex(of: name), i + 1 < argv.count, let v = Int(argv[i + 1]) else { return fallback }
        return v
    }
    let writes = value("--writes", 2000), rounds = value("--rounds", 3)
    let base = argv.firstIndex(of: "--dir").flatMap { $0 + 1 < argv.count ? argv[$0 + 1] : nil } ?? NSTemporaryDirectory()
    let dir = "\(base)/dp-random-writes-\(getpid())"
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let size = 64 << 20, block = 4096
    let files = ProtectedFiles(keys: try InMemoryClassKeys.random())
    let protected = "\(dir)/protected", plain = "\(dir)/plain"
    let fill = [UInt8](repeating: 0x5A, count: 1 << 20)
    let h = try files.create(protected, protection: .complete)
    for i in 0..<(size >> 20) { try h.write(fill, at: Int64(i << 20)) }
    try h.sync()
    h.close()
    let pfd = open(plain, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    for i in 0..<(size >> 20) { _ = fill.withUnsafeBytes { pwrite(pfd, $0.baseAddress, $0.count, off_t(i << 20)) } }
    fsync(pfd)
    let payload = [UInt8](repeating: 0xA5, count: block)
    var rng = SystemRandomNumberGenerator()

    func protectedRun(_ k: Int?) throws -> Double {
        let offsets = (0..<writes).map { _ in Int64(Int.random(in: 0..<(size / block), using: &rng) * block) }
        let h = try files.open(protected, forWriting: true)
        let t = try time {
            for (i, o) in offsets.enumerated() {
                try h.write(payload, at: o)
                if let k, (i + 1) % k == 0 { try h.sync() }
            }
        }
        try h.sync()
        h.close()
        return Double(writes) / t
    }
    func plainRun(_ k: Int?) -> Double {
        let offsets = (0..<writes).map { _ in off_t(Int.random(in: 0..<(size / block), using: &rng) * block) }
        let t = time {
            for (i, o) in offsets.enumerated() {
                _ = payload.withUnsafeBytes { pwrite(pfd, $0.baseAddress, $0.count, o) }
                if let k, (i + 1) % k == 0 { fsync(pfd) }
            }
        }
        fsync(pfd)
        return Double(writes) / t
    }

    let cadences: [Int?] = [1, 16, 256, nil]
    var prot = [[Double]](repeating: [], count: cadences.count), pl = prot
    for _ in 0..<rounds {
        for (j, k) in cadences.enumerated() {
            prot[j].append(try protectedRun(k))
            pl[j].append(plainRun(k))
        }
    }
    close(pfd)
    print("## random 4 KiB writes into a 64 MiB file (\(writes) writes, \(rounds) interleaved rounds, medians, \(base))")
    print("| sync every | protected (journaled) writes/s | plain file writes/s | ratio |")
    print("|---:|---:|---:|---:|")
    for (j, k) in cadences.enumerated() {
        let a = median(prot[j]), b = median(pl[j])
        print(String(format: "| %@ | %.0f | %.0f | %.2f |", k.map(String.init) ?? "never", a, b, a / b))
    }
}
