// Keys in a real domain (kernel keyring, this process's own session keyring): key fetch and per-file key unwrap,
// open of a class complete file, unlock (Argon2id), and lock with 1, 100 and 1,000 open complete handles.
import Benchmark
import BenchmarkSupport
import DataProtection
import Foundation
import ProtectionCrypto

/// A domain under the scratch directory with its class keys in this process's session keyring, unlocked.
func makeDomain(_ name: String, kdf: Argon2Parameters) throws -> ProtectionDomain {
    let location = DomainLocation(home: "\(scratchDirectory)/\(name)/home", deviceDirectory: "\(scratchDirectory)/\(name)/devices")
    let domain = try ProtectionDomain.create(at: location, passphrase: try SecretBytes(utf8: "benchmark"), kdf: kdf, keyStore: .kernel(.session)) { _ in }
    try domain.unlock(passphrase: try SecretBytes(utf8: "benchmark"))
    return domain
}

/// Opens and closes a 4 KiB file of class `c` per scaled iteration: the per-file key unwrap (through the one admission
/// every protected open makes since issue 19; the raw unwrap is not public any more), the header MAC and the last chunk.
func openBenchmark(_ name: String, _ c: ProtectionClass, _ tolerance: AllocationTolerance, keys: @escaping @Sendable () throws -> ClassKeys) {
    let fixture = Fixture<ProtectedFiles>()
    let path = "\(scratchDirectory)/open-\(c.name)-\(name.hashValue)"
    Benchmark(name, configuration: configuration(tolerance, scalingFactor: .kilo)) { benchmark in
        let files = fixture.get
        for _ in benchmark.scaledIterations { try files.open(path).close() }
    } setup: {
        let files = ProtectedFiles(keys: try keys())
        try files.write([UInt8](repeating: 1, count: 4096), to: path, protection: c)
        fixture.value = files
    }
}

private let fast = Fixture<ProtectionDomain>()
private let inProcess = Fixture<InMemoryClassKeys>()

/// The domain most benchmarks share: Argon2id at its minimum, so re-unlocking between lock iterations is cheap.
func fastDomain() throws -> ProtectionDomain {
    if fast.value == nil { fast.value = try makeDomain("fast", kdf: .minimumForTests) }
    return fast.get
}

/// In-process class keys: the open without the keyring.
func memoryKeys() throws -> InMemoryClassKeys {
    if inProcess.value == nil { inProcess.value = try InMemoryClassKeys.random() }
    return inProcess.get
}

let benchmarks: @Sendable () -> Void = {
    joinFreshSessionKeyring()
    Benchmark.defaultConfiguration = configuration(.exact)

    openBenchmark("open+close of a 4 KiB class complete file, key in process", .complete, .none) { try memoryKeys() }
    openBenchmark("open+close of a 4 KiB class completeUnlessOpen file (sealed box), key in process", .completeUnlessOpen, .exact) { try memoryKeys() }

    Benchmark("open+close of a 4 KiB class complete file, kernel keyring", configuration: configuration(.exact, scalingFactor: .kilo)) { benchmark in
        let files = try fastDomain().files, path = "\(scratchDirectory)/open-complete"
        for _ in benchmark.scaledIterations { try files.open(path).close() }
    } setup: {
        try fastDomain().files.write([UInt8](repeating: 1, count: 4096), to: "\(scratchDirectory)/open-complete", protection: .complete)
    }

    // Each iteration locks (unmeasured), then measures one unlock: Argon2id (libsodium's interactive preset) and the keyring adds.
    let slow = Fixture<ProtectionDomain>()
    Benchmark("unlock, Argon2id interactive preset", configuration: configuration(.threaded, maxDuration: .seconds(5), maxIterations: 20)) { benchmark in
        try slow.get.lock(grace: .zero)
        benchmark.startMeasurement()
        try slow.get.unlock(passphrase: try SecretBytes(utf8: "benchmark"))
    } setup: {
        slow.value = try makeDomain("interactive", kdf: .interactive)
    }

    // Each iteration opens N complete files (unmeasured), measures `lock` (evict keys, revoke and wipe every handle,
    // collect acknowledgements), then closes the handles and unlocks again (unmeasured). Grace zero: the lock
    // step itself, not the half second apps get by default between `willLock` and the lock.
    for n in [1, 100, 1000] {
        Benchmark("lock with \(n) open complete handles", configuration: configuration(.threaded, maxDuration: .seconds(5), maxIterations: 200)) { benchmark in
            let d = try fastDomain()
            let handles = try (0..<n).map { try d.files.open("\(scratchDirectory)/lock-\($0 % 10)") }
            benchmark.startMeasurement()
            try d.lock(grace: .zero)
            benchmark.stopMeasurement()
            for h in handles { h.close() }
            try d.unlock(passphrase: try SecretBytes(utf8: "benchmark"))
        } setup: {
            for i in 0..<10 { try fastDomain().files.write([UInt8](repeating: 2, count: 4096), to: "\(scratchDirectory)/lock-\(i)", protection: .complete) }
        }
    }
}
