// dp-keybench: the figures of BENCHMARKS.md "Keys, unlock and rotation", measured side by side in one run.
//
// Usage: scripts/build-release --package-path Benchmarks dp-keybench && Benchmarks/.build/release/dp-keybench [--files N] [--runs R]
//        scripts/build-release --package-path Benchmarks dp-keybench && Benchmarks/.build/release/dp-keybench random-writes [--writes N] [--rounds R] [--dir D]  (RandomWrites.swift)
//        scripts/build-release --package-path Benchmarks dp-keybench && Benchmarks/.build/release/dp-keybench many-domains [--domains N] [--runs R]  (ManyDomains.swift)
// Runs in its own session keyring (keys under @s) and a throwaway directory under /tmp.
import DataProtection
import Foundation
import KernelKeyring
import ProtectionCrypto

let args = CommandLine.arguments
if args.count > 1 && args[1] == "random-writes" {
    try randomWrites(Array(args.dropFirst(2)))
    exit(0)
}
if args.count > 1 && args[1] == "many-domains" {
    try manyDomains(Array(args.dropFirst(2)))
    exit(0)
}
func option(_ name: String, _ fallback: Int) -> Int {
    guard let i = args.firstIndex(of: name), i + 1 < args.count, let v = Int(args[i + 1]) else { return fallback }
    return v
}
let bigCount = option("--files", 10_000)
let runs = option("--runs", 7)

try Keyring().joinNewSessionKeyring()
let root = NSTemporaryDirectory() + "dp-keybench-\(getpid())"
try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: root) }

func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }
func median(_ xs: [Double]) -> Double { let s = xs.sorted(); return s[s.count / 2] }
func time(_ body: () throws -> Void) rethrows -> Double {
    let c = ContinuousClock(), t = c.now
    try body()
    return seconds(c.now - t)
}
func pass(_ s: String) throws -> SecretBytes { try SecretBytes(utf8: s) }

func makeDomain(_ name: String, files: Int) throws -> ProtectionDomain {
    let loc = DomainLocation(home: "\(root)/\(name)/home", deviceDirectory: "\(root)/\(name)/devices")
    let d = try ProtectionDomain.create(at: loc, passphrase: try pass("p0"), kdf: .minimumForTests, keyStore: .kernel(.session)) { _ in }
    try d.unlock(passphrase: try pass("p0"))
    let dir = "\(root)/\(name)/files"
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    for i in 0..<files { try d.files.write([UInt8(truncatingIfNeeded: i)], to: "\(dir)/f\(i)", protection: .complete) }
    return d
}

print("## dp-keybench (\(runs) runs, medians; \(ProcessInfo.processInfo.activeProcessorCount) cores)")

// 1. Calibrated Argon2id and unlock latency, next to libsodium's moderate preset.
let calibrated = try ProtectionDomain.calibrateKDF()
print("calibrated Argon2id (target 0.5 s): ops \(calibrated.opsLimit), memory \(calibrated.memLimit >> 20) MiB")
let small = try makeDomain("small", files: 10)
let big = try makeDomain("big", files: bigCount)
var unlockCal: [Double] = [], unlockMod: [Double] = []
try small.changePassphrase(old: try pass("p0"), new: try pass("p1"), kdf: calibrated)
try big.changePassphrase(old: try pass("p0"), new: try pass("p1"), kdf: .moderate)
for _ in 0..<runs {
    unlockCal.append(try time { try small.unlock(passphrase: try pass("p1")) })
    unlockMod.append(try time { try big.unlock(passphrase: try pass("p1")) })
}
print(String(format: "unlock, calibrated (ops %llu, %llu MiB): %.3f s", calibrated.opsLimit, calibrated.memLimit >> 20, median(unlockCal)))
print(String(format: "unlock, moderate preset (ops %llu, %llu MiB): %.3f s", Argon2Parameters.moderate.opsLimit, Argon2Parameters.moderate.memLimit >> 20, median(unlockMod)))

// 2. Key fetch per file open: class complete (key read from the kernel keyring on each open)
//    vs class none (key held in process), same file size, same wrap; plus the bare keyring search+read.
try small.files.write([1, 2, 3], to: "\(root)/open-a", protection: .complete)
try small.files.write([1, 2, 3], to: "\(root)/open-d", protection: .none)
let opens = 20_000
var openA: [Double] = [], openD: [Double] = [], fetch: [Double] = [], locked: [Double] = []
let keyring = Keyring()
let keyName = "dataprotection:\(small.id)"  // the domain key: A, B and C in one payload (113 bytes)
for _ in 0..<runs {
    openA.append(try time { for _ in 0..<opens { try small.files.open("\(root)/open-a").close() } } / Double(opens))
    openD.append(try time { for _ in 0..<opens { try small.files.open("\(root)/open-d").close() } } / Double(opens))
    var buf = try SecretBytes(zeroedCount: 256)
    fetch.append(try time {
        for _ in 0..<opens {
            let k = try keyring.search(.session, type: .user, description: keyName)
            _ = try buf.withUnsafeMutableBytes { try keyring.read(k, into: $0) }
        }
    } / Double(opens))
    locked.append(try time { for _ in 0..<opens { _ = try SecretBytes(zeroedCount: 32) } } / Double(opens))
}
print(String(format: "open+close, class complete (key from the keyring): %.2f µs", median(openA) * 1e6))
print(String(format: "open+close, class none (key in process): %.2f µs", median(openD) * 1e6))
print(String(format: "difference (key fetch per open): %.2f µs; of which keyctl_search+keyctl_read: %.2f µs, one locked 32-byte buffer (sodium_malloc+free): %.2f µs", (median(openA) - median(openD)) * 1e6, median(fetch) * 1e6, median(locked) * 1e6))

// 3. Passphrase change at 10 vs N files, same Argon2id parameters, interleaved.
try big.changePassphrase(old: try pass("p1"), new: try pass("p1"), kdf: calibrated)
var change10: [Double] = [], changeN: [Double] = []
for i in 0..<runs {
    let o = try pass("p\(i + 1)"), n = try pass("p\(i + 2)")
    change10.append(try time { try small.changePassphrase(old: o, new: n) })
    changeN.append(try time { try big.changePassphrase(old: o, new: n) })
}
print(String(format: "passphrase change, 10 files: %.3f s (min %.3f, max %.3f); %d files: %.3f s (min %.3f, max %.3f); ratio of medians %.2f",
    median(change10), change10.min()!, change10.max()!, bigCount, median(changeN), changeN.min()!, changeN.max()!, median(changeN) / median(change10)))

// 4. Rotation throughput (class complete, N one-byte files; the run includes one Argon2id derivation).
var firstFile: ContinuousClock.Instant?
var lastFile = ContinuousClock.now
let clock = ContinuousClock()
let total = try time {
    _ = try big.rotate(.complete, paths: ["\(root)/big/files"], passphrase: try pass("p\(runs + 1)")) { _ in
        if firstFile == nil { firstFile = clock.now }
        lastFile = clock.now
        return true
    }
}
let perFile = seconds(lastFile - firstFile!) / Double(bigCount - 1)
print(String(format: "rotation of %d files: %.2f s total (incl. one Argon2id and the directory scan); %.0f files/s while rewrapping (%.1f µs per file)", bigCount, total, 1 / perFile, perFile * 1e6))
try small.lock(evictAll: true, grace: .zero)
try big.lock(evictAll: true, grace: .zero)
