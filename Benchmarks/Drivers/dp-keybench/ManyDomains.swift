// dp-keybench many-domains: one service process unlocks, uses and locks many domains (BENCHMARKS.md "Many domains").
//
// Usage: dp-keybench many-domains [--domains N] [--runs R]
// In its own session keyring (keys under @s, as `KeyStore.kernel(.session)`), through the in-process API and the
// real kernel keyring. Each domain: create once (not timed: Argon2id at the tests' minimum), then per run, phase by
// phase over all N: unlock (minimum Argon2id, so the figure is the key store's, not the KDF's), use (write and read
// back one 64-byte `complete` file), lock (grace zero). Run as root, whose key quota is large (root_maxkeys,
// root_maxbytes); a non-root uid holds about 120 under the default quota (`dpctl doctor --domains N`).
import DataProtection
import Foundation
import KernelKeyring
import ProtectionCrypto

func manyDomains(_ args: [String]) throws {
    func option(_ name: String, _ fallback: Int) -> Int {
        guard let i = args.firstIndex(of: name), i + 1 < args.count, let v = Int(args[i + 1]) else { return fallback }
        return v
    }
    let count = option("--domains", 1000), runs = option("--runs", 5)
    try Keyring().joinNewSessionKeyring()
    let root = NSTemporaryDirectory() + "dp-keybench-domains-\(getpid())"
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: root) }
    func secs(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }
    func timed(_ body: () throws -> Void) rethrows -> Double {
        let c = ContinuousClock(), t = c.now
        try body()
        return secs(c.now - t)
    }
    let passphrase = try SecretBytes(utf8: "many domains")
    var domains: [ProtectionDomain] = []
    let setup = try timed {
        for i in 0..<count {
            let loc = DomainLocation(home: "\(root)/d\(i)/home", deviceDirectory: "\(root)/d\(i)/devices")
            domains.append(try ProtectionDomain.create(at: loc, passphrase: passphrase, kdf: .minimumForTests, keyStore: .kernel(.session)) { _ in })
        }
    }
    let quota = try KeyQuota.current()
    print("## dp-keybench many-domains: \(count) domains in one process, \(runs) runs, medians (\(ProcessInfo.processInfo.activeProcessorCount) cores)")
    print(String(format: "setup (create %d domains, not timed below): %.1f s", count, setup))
    let payload = [UInt8](repeating: 7, count: 64)
    var unlock: [Double] = [], use: [Double] = [], lock: [Double] = [], keysHeld = 0, bytesHeld = 0
    for _ in 0..<runs {
        unlock.append(try timed { for d in domains { try d.unlock(passphrase: passphrase) } })
        let q = try KeyQuota.current()
        keysHeld = q.used.keys - quota.used.keys
        bytesHeld = q.used.bytes - quota.used.bytes
        use.append(try timed {
            for (i, d) in domains.enumerated() {
                let path = "\(root)/d\(i)/note"
                try d.files.write(payload, to: path, protection: .complete)
                guard try d.files.read(path) == payload else { fatalError("domain \(i) read back other bytes") }
            }
        })
        lock.append(try timed { for d in domains { try d.lock(evictAll: true, grace: .zero) } })
    }
    func median(_ xs: [Double]) -> Double { xs.sorted()[xs.count / 2] }
    for (name, xs) in [("unlock (minimum Argon2id)", unlock), ("use (write + read 64 B, complete)", use), ("lock --evict-all, grace 0", lock)] {
        print(String(format: "%@: %.3f s for %d domains, %.0f µs per domain (min %.3f s, max %.3f s)", name, median(xs), count, median(xs) / Double(count) * 1e6, xs.min()!, xs.max()!))
    }
    print("kernel quota held while all \(count) are unlocked: \(keysHeld) keys, \(bytesHeld) bytes (\(String(format: "%.1f", Double(bytesHeld) / Double(count))) bytes per domain; uid \(quota.uid))")
}
