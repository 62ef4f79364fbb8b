import Foundation

/// The variables a test passes on to every process it starts, whatever else it sets.
///
/// - The sanitizer options, so that a process a sanitized test starts reports
///   like the test process (scripts/test collects the reports).
/// - `XDG_RUNTIME_DIR`, so that the processes a test starts meet the test
///   process at the same runtime rendezvous (live lock, coordination), and so
///   that scripts/test's private runtime directory, removed at its end,
///   receives every rendezvous the run creates instead of `/tmp/dataprotection-<uid>`.
/// - `DATAPROTECTION_AES_GCM_BACKEND`, so that the processes of a phase that runs the VAES AES-256-GCM backend
///   (scripts/test) run it too, and the key-residue scan searches their memory for its key schedules.
public let inheritedEnvironmentKeys = ["ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS", "XDG_RUNTIME_DIR", "DATAPROTECTION_AES_GCM_BACKEND"]

/// `environment` plus the inherited variables this process has (`inheritedEnvironmentKeys`); `environment` wins.
public func childEnvironment(_ environment: [String: String]) -> [String: String] {
    let current = ProcessInfo.processInfo.environment
    var inherited: [String: String] = [:]
    for k in inheritedEnvironmentKeys { inherited[k] = current[k] }
    return inherited.merging(environment) { $1 }
}
