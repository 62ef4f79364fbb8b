// The app's context, set up once at launch (as `LoggingSystem.bootstrap`): the domain and the app's container, so the
// Foundation-shaped calls of this module (`Data.write(to:)`, `Data(contentsOf:)`, `ProtectedFileManager.default`,
// `ProtectedFileCursor`) need no extra parameter, as on iOS.
import DataProtection
import Foundation
internal import Locking

/// The protection domain and the app container that this module's Foundation-shaped calls use.
///
/// Bootstrap it once at launch; a service that runs several apps (or a test) binds one for a scope with
/// `withCurrent(_:_:)`, which wins over the bootstrapped one on that thread or task.
public final class AppContext: Sendable {
    /// The domain whose keys protect the container's files (its `lock` revokes every handle opened here).
    public let domain: ProtectionDomain
    /// The app's container: every URL this layer accepts is inside it.
    public let container: Container
    /// Where this context posts the protected-data notifications (`ProtectedApplication`) and
    /// `ProtectedUserDefaults.didChangeNotification`.
    public let notificationCenter: NotificationCenter
    /// Turns the domain's live-lock events into protected-data notifications for as long as this context lives.
    private let protectedDataNotifier: ProtectedDataNotifier
    /// `ProtectedUserDefaults.standard` of this context (it keeps the registration domain).
    let standardDefaults: ProtectedUserDefaults

    /// A context over an open container.
    /// - Parameters:
    ///   - domain: the domain the container was opened with (`Container(at:keys: domain.keys)`).
    ///   - container: the app's container.
    ///   - notificationCenter: where notifications go (`.default`, as on iOS).
    public init(domain: ProtectionDomain, container: Container, notificationCenter: NotificationCenter = .default) {
        self.domain = domain
        self.container = container
        self.notificationCenter = notificationCenter
        protectedDataNotifier = ProtectedDataNotifier(domain: domain, center: notificationCenter)
        standardDefaults = ProtectedUserDefaults(store: try? container.preferences(named: "standard"), center: notificationCenter)
        protectedDataNotifier.sender.withLock { $0.context = self }
    }

    /// Opens the container at `root` (creating it with `policy` when missing) with the domain's keys.
    /// - Throws: what `Container.create(at:keys:policy:)` throws.
    public convenience init(
        domain: ProtectionDomain, containerAt root: String, policy: ContainerPolicy = .standard, notificationCenter: NotificationCenter = .default
    ) throws(ProtectionError) {
        self.init(domain: domain, container: try Container.create(at: root, keys: domain.keys, policy: policy), notificationCenter: notificationCenter)
    }

    private static let bootstrapped = Locked<AppContext?>(nil)
    @TaskLocal private static var scoped: AppContext?

    /// Makes `context` the process's app context; call it once, at launch.
    /// - Throws: `.invalidArgument` when a context is already bootstrapped (a second set-up would silently send some
    ///   calls to another container; use `withCurrent(_:_:)` for a scoped one).
    public static func bootstrap(_ context: AppContext) throws(ProtectionError) {
        let previous = bootstrapped.withLock { (c: inout AppContext?) -> AppContext? in
            if c == nil { c = context; return nil }
            return c
        }
        if let previous {
            throw ProtectionError(.invalidArgument, "unable to bootstrap the app context for '\(context.container.root)': it is already bootstrapped for '\(previous.container.root)'; bootstrap once at launch, or use AppContext.withCurrent(_:_:) for a scope")
        }
    }

    /// Runs `body` with `context` as the current one on this thread or task (and the tasks it starts).
    public static func withCurrent<R>(_ context: AppContext, _ body: () throws -> R) rethrows -> R {
        try $scoped.withValue(context, operation: body)
    }

    /// The context of the scope, else the bootstrapped one, else nil.
    public static var current: AppContext? { scoped ?? bootstrapped.withLock { $0 } }

    /// The current context, or the error Foundation reports for an operation on `url` that no sandbox allows.
    static func resolve(for url: URL?, writing: Bool) throws(CocoaError) -> AppContext {
        guard let c = current else {
            throw CocoaError(ProtectionError(.invalidArgument, "unable to \(writing ? "write" : "read") '\(url?.path ?? "")': no app context; call AppContext.bootstrap(_:) at launch"), writing: writing, url: url)
        }
        return c
    }
}
