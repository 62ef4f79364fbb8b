// Times KernelKeyring's calls against the same libkeyutils calls made directly from C.
import BaselineKeyutils
import KernelKeyring
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// Prints the median ns per call of the raw C call and of the wrapper, over 7 interleaved rounds.
func runBenchmark(iterations: Int) {
    let keyring = Keyring()
    do {
        try keyring.joinNewSessionKeyring()
        let name = "dp-keyringbench:\(getpid())"
        var payload = (UInt64(1), UInt64(2), UInt64(3), UInt64(4))
        let key = try withUnsafeBytes(of: &payload) { (bytes) throws(KeyringError) in
            try keyring.add(.user, description: name, payload: bytes, to: .session, permissions: .privateToOwner)
        }
        var buffer = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        var quiet = Logger(label: "dp-keyringbench", factory: { _ in SwiftLogNoOpLogHandler() })
        quiet.logLevel = .info
        let logged = Keyring(logger: quiet)
        var rounds: [String: [Double]] = [:]
        for _ in 0..<7 {
            rounds["keyctl_read C", default: []].append(time(iterations) {
                _ = withUnsafeMutableBytes(of: &buffer) { keyctl_read(key.rawValue, $0.baseAddress!.assumingMemoryBound(to: CChar.self), 32) }
            })
            rounds["keyctl_read Keyring.read", default: []].append(time(iterations) {
                _ = withUnsafeMutableBytes(of: &buffer) { (try? keyring.read(key, into: $0)) ?? failed("read") }
            })
            rounds["keyctl_read Keyring.read, logger at info", default: []].append(time(iterations) {
                _ = withUnsafeMutableBytes(of: &buffer) { (try? logged.read(key, into: $0)) ?? failed("read") }
            })
            rounds["keyctl_search C", default: []].append(time(iterations) {
                _ = keyctl_search(-3, "user", name, 0)
            })
            rounds["keyctl_search Keyring.search", default: []].append(time(iterations) {
                _ = (try? keyring.search(.session, type: .user, description: name)) ?? failedSearch()
            })
        }
        for label in rounds.keys.sorted() {
            let sorted = rounds[label]!.sorted()
            print("\(label): \(String(format: sorted[sorted.count / 2])) ns/call (median of 7)")
        }
        try keyring.invalidate(key)
    } catch {
        print("bench: \(error.code): \(error.message)")
        exit(70)
    }
}

private func time(_ iterations: Int, _ body: () -> Void) -> Double {
    let clock = ContinuousClock()
    let start = clock.now
    for _ in 0..<iterations { body() }
    let elapsed = clock.now - start
    let nanoseconds = Double(elapsed.components.seconds) * 1e9 + Double(elapsed.components.attoseconds) / 1e9
    return nanoseconds / Double(iterations)
}

private func String(format value: Double) -> String {
    let tenths = Int((value * 10).rounded())
    return "\(tenths / 10).\(tenths % 10)"
}

/// A call that failed inside a timing loop: the measurement is void, so stop with a message.
func failed(_ what: String) -> Int {
    let message = "dp-keyringbench: error: keyctl \(what) failed during the benchmark; the figures would be meaningless\n"
    _ = message.withCString { Glibc.write(2, $0, strlen($0)) }
    exit(70)
}

func failedSearch() -> KeySerial { _ = failed("search"); return .session }
