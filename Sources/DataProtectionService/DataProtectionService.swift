// A protection domain as a swift-service-lifecycle Service: graceful shutdown retires its keys and stops its listener.
public import DataProtection
public import ServiceLifecycle
public import Logging
import Foundation
import Locking

/// Runs one protection domain in a `ServiceGroup`: it owns the domain's live-lock listener (and so its auto-lock) and
/// the containers opened through it, and shuts them down gracefully.
///
/// On graceful shutdown (SIGTERM to a group configured for it) or cancellation, `run` performs `shutDown()`: new
/// opens fail with `.shuttingDown`, writes in flight finish or roll back, journals are committed, keys are wiped, the
/// containers are closed and the listener thread ends. Files written before shutdown are intact and readable; no key
/// material of the domain stays in this process's memory.
///
/// ```swift
/// let domain = try ProtectionDomain.open(at: location, logger: logger)  // the one logger of the domain, service included
/// let service = DataProtectionService(domain: domain)
/// let group = ServiceGroup(configuration: .init(services: [service, app], gracefulShutdownSignals: [.sigterm], logger: logger))
/// try await group.run()
/// ```
public final class DataProtectionService: Service, Sendable {
    /// The domain this service runs.
    public let domain: ProtectionDomain
    /// Where the service's steps are logged: the domain's logger (`domain.telemetry.logger`, `domain` metadata set).
    private let logger: Logger?
    private let containers = Locked<[Container]>([])
    private let stopped = Locked(false)

    /// A service for `domain`, logging through the domain's own logger; the domain's listener is already attached
    /// (`ProtectionDomain.open`), and this service ends it at shutdown.
    ///
    /// One logger per domain: the service's lines (running, shut down) go where the domain's lock, unlock and
    /// revocation lines go, with the same `domain` metadata; give the logger to `ProtectionDomain.open(logger:)`.
    /// No key, passphrase or file content is logged.
    /// - Parameter domain: the domain to run.
    public init(domain: ProtectionDomain) {
        self.domain = domain
        self.logger = domain.telemetry.logger
    }

    /// A service for `domain` that logs through `logger` only when the domain has no logger of its own.
    /// - Parameters:
    ///   - domain: the domain to run.
    ///   - logger: used (with the `domain` metadata) only if `domain` was opened without a logger; else the domain's.
    @available(*, deprecated, message: "the service logs through its domain's logger: pass the logger to ProtectionDomain.open(logger:) and use init(domain:)")
    public init(domain: ProtectionDomain, logger: Logger) {
        self.domain = domain
        self.logger = domain.telemetry.logger ?? {
            var l = logger
            l[metadataKey: "domain"] = .string(domain.telemetry.domain)
            return l
        }()
    }

    /// Opens the container at `root` with the domain's keys; the service closes it at shutdown.
    /// - Parameters:
    ///   - root: the container's directory.
    ///   - options: as `Container(at:keys:options:)` takes them.
    /// - Returns: the open container.
    /// - Throws: `.shuttingDown` once shutdown has begun; what `Container(at:keys:options:)` throws.
    public func openContainer(at root: String, options: Container.OpenOptions = .init()) throws(ProtectionError) -> Container {
        try refuseIfStopped(root)
        let container = try Container(at: root, keys: domain.keys, options: options)
        // Registered under the same lock `shutDown` takes: a container opened while it runs is closed by it, or refused.
        let accepted = containers.withLock { list -> Bool in
            if stopped.withLock({ $0 }) { return false }
            list.append(container)
            return true
        }
        guard accepted else {
            container.close()
            throw Self.refusal(root)
        }
        return container
    }

    /// Runs until the group shuts down gracefully or is cancelled, then performs `shutDown()`.
    public func run() async throws {
        logger?.debug("data protection service running", metadata: ["operation": "run"])
        do { try await gracefulShutdown() } catch {}  // a cancellation shuts down too
        await shutDown()
    }

    /// The graceful shutdown: retire the keys, close the containers, stop the listener (once; later calls return at once).
    ///
    /// Runs its blocking steps on a thread of its own (not the cooperative pool, and not queued behind the I/O threads'
    /// work), so async work keeps running while handles finish. Not cancellable: a shutdown started always completes.
    public func shutDown() async {
        let first = containers.withLock { _ in stopped.withLock { s -> Bool in defer { s = true }; return !s } }
        guard first else { return }
        let domain = domain, containers = containers, logger = logger
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                let started = Telemetry.now()
                // 1. No new admissions; every handle finishes its operation, commits and wipes its keys.
                let retired = domain.retireKeys()
                // 2. The containers it opened (their in-use locks).
                let open = containers.withLock { list in defer { list = [] }; return list }
                for c in open { c.close() }
                // 3. The listener thread, and with it this process's part in lock events and the auto-lock.
                domain.liveLock.stopListening()
                logger?.info("data protection service shut down", metadata: [
                    "operation": "shutdown", "handles": "\(retired)", "containers": "\(open.count)",
                    "duration_ms": Telemetry.millis(Telemetry.elapsed(since: started)),
                ])
                done.resume()
            }
        }
    }

    private func refuseIfStopped(_ root: String) throws(ProtectionError) {
        if stopped.withLock({ $0 }) { throw Self.refusal(root) }
    }

    private static func refusal(_ root: String) -> ProtectionError {
        ProtectionError.retired.about(root, "open the container")
    }
}
