// The public coordinator: NSFileCoordinator's calls, synchronous and async, over OFD locks.
import DataProtectionTelemetry
import Foundation
import Synchronization
internal import PathSyntax

/// Coordinates reading and writing of items with every other coordinator of the same domain, in
/// this process and in other processes, and notifies file presenters.
///
/// The synchronous forms block the calling thread while they wait (with a timeout); call the
/// `async` form from Swift concurrency so no thread of the cooperative pool blocks. See the
/// module's README.md for exactly what excludes what.
public final class FileCoordinator: Sendable {
    /// The domain this coordinator coordinates in.
    public let domain: CoordinationDomain
    /// The presenter this coordinator acts for; it is never messaged about this coordinator's accesses.
    public let filePresenter: PresenterRegistration?
    /// How long any one wait for other holders may last before `.timedOut`.
    public let timeout: Duration
    /// How long a presenter has to answer one callback before it is skipped.
    public let presenterDeadline: Duration
    /// Where waits are timed and time-outs counted and logged (a domain's coordinator gets the domain's).
    public let telemetry: Telemetry

    private let scope = CancelScope()

    /// Creates a coordinator.
    /// - Parameters:
    ///   - domain: the domain to coordinate in.
    ///   - filePresenter: the presenter this coordinator acts for, if any.
    ///   - timeout: the longest wait for other holders (default 30 s).
    ///   - presenterDeadline: the longest wait for one presenter callback (default 2 s).
    ///   - telemetry: where waits and time-outs are logged and counted; nil for metrics only, under domain `none`.
    public init(
        domain: CoordinationDomain, filePresenter: PresenterRegistration? = nil,
        timeout: Duration = .seconds(30), presenterDeadline: Duration = .seconds(2), telemetry: Telemetry? = nil
    ) {
        self.telemetry = telemetry ?? .detached()
        self.domain = domain
        self.filePresenter = filePresenter
        self.timeout = timeout
        self.presenterDeadline = presenterDeadline
    }

    /// Cancels every coordination of this coordinator that is still waiting; each throws `.cancelled`.
    public func cancel() { scope.cancelAll() }

    /// Reads the item at `url` once no writer of it (or of a directory containing it, for deleting,
    /// moving or replacing) is active.
    /// - Parameters:
    ///   - url: the item.
    ///   - options: reading options.
    ///   - accessor: reads; receives the URL to use (a snapshot copy with `.forUploading`).
    /// - Returns: what the accessor returns.
    /// - Throws: `CoordinationError`, or what the accessor throws.
    @discardableResult
    public func coordinate<R>(
        readingItemAt url: URL, options: ReadingOptions = [], byAccessor accessor: (URL) throws -> R
    ) throws -> R {
        try perform([.readingIntent(with: url, options: options)]) { try accessor($0[0]) }
    }

    /// Writes the item at `url` once no other reader or writer of it is active.
    /// - Parameters:
    ///   - url: the item.
    ///   - options: writing options; `.forDeleting`, `.forMoving`, `.forReplacing` also exclude everything inside it.
    ///   - accessor: writes; receives the URL to use.
    /// - Returns: what the accessor returns.
    /// - Throws: `CoordinationError`, or what the accessor throws.
    @discardableResult
    public func coordinate<R>(
        writingItemAt url: URL, options: WritingOptions = [], byAccessor accessor: (URL) throws -> R
    ) throws -> R {
        try perform([.writingIntent(with: url, options: options)]) { try accessor($0[0]) }
    }

    /// Reads one item and writes another, taking both sets of locks at once (all or nothing).
    /// - Parameters:
    ///   - readingURL: the item read.
    ///   - readingOptions: reading options.
    ///   - writingURL: the item written.
    ///   - writingOptions: writing options.
    ///   - accessor: receives the two URLs to use.
    /// - Returns: what the accessor returns.
    /// - Throws: `CoordinationError`, or what the accessor throws.
    @discardableResult
    public func coordinate<R>(
        readingItemAt readingURL: URL, options readingOptions: ReadingOptions = [],
        writingItemAt writingURL: URL, options writingOptions: WritingOptions = [],
        byAccessor accessor: (URL, URL) throws -> R
    ) throws -> R {
        try perform([
            .readingIntent(with: readingURL, options: readingOptions),
            .writingIntent(with: writingURL, options: writingOptions),
        ]) { try accessor($0[0], $0[1]) }
    }

    /// Writes two items, taking both sets of locks at once (the documented way to move: `.forMoving` on the source, `.forReplacing` on the destination).
    /// - Parameters:
    ///   - url1: the first item.
    ///   - options1: its writing options.
    ///   - url2: the second item.
    ///   - options2: its writing options.
    ///   - accessor: receives the two URLs to use.
    /// - Returns: what the accessor returns.
    /// - Throws: `CoordinationError`, or what the accessor throws.
    @discardableResult
    public func coordinate<R>(
        writingItemAt url1: URL, options options1: WritingOptions = [],
        writingItemAt url2: URL, options options2: WritingOptions = [],
        byAccessor accessor: (URL, URL) throws -> R
    ) throws -> R {
        try perform([
            .writingIntent(with: url1, options: options1),
            .writingIntent(with: url2, options: options2),
        ]) { try accessor($0[0], $0[1]) }
    }

    /// Coordinates any number of intents at once, suspending (never blocking a thread) while it waits.
    /// - Parameters:
    ///   - intents: the items and how each is accessed; all locks are taken together, all or nothing.
    ///   - accessor: receives the URLs to use, in the order of `intents`.
    /// - Returns: what the accessor returns.
    /// - Throws: `CoordinationError` (`.cancelled` when the task is cancelled while waiting), or what the accessor throws.
    @discardableResult
    public func coordinate<R: Sendable>(
        with intents: [FileAccessIntent], byAccessor accessor: ([URL]) async throws -> R
    ) async throws -> R {
        let operation = try prepare(intents)
        if let outer = operation.outer {
            let cursor = try await operation.acquireNested(in: outer)
            defer { operation.endNested(cursor, in: outer) }
            return try await accessor(operation.items.map(\.accessorURL))
        }
        let granted = try await observed(operation) { () async throws(CoordinationError) in try await operation.grant() }
        defer { operation.removeSnapshots(granted.urls) }
        if operation.releasesEarly {
            operation.release(granted)
            return try await accessor(granted.urls)
        }
        defer { operation.release(granted) }
        return try await CoordinationContext.$current.withValue(granted.context) {
            try await accessor(granted.urls)
        }
    }

    /// Tells the coordination in progress that the item at `oldURL` now lives at `newURL`.
    ///
    /// Call it inside a write accessor after moving the item; presenters of the item (and of
    /// anything inside it) receive `presentedItemDidMove(to:)` when the coordination ends.
    /// - Parameters:
    ///   - oldURL: where the item was (an item written by the current coordination, or inside one).
    ///   - newURL: where it is now.
    /// - Throws: `.invalidRequest` outside a write accessor of this domain.
    public func item(at oldURL: URL, didMoveTo newURL: URL) throws(CoordinationError) {
        guard let context = CoordinationContext.current, context.domain === domain.state, context.isActive else {
            throw CoordinationError(
                .invalidRequest, path: oldURL.path,
                message: "item(at:didMoveTo:) for '\(oldURL.path)' must be called inside a coordinated write of it")
        }
        let from = try domain.state.locate(oldURL, resolvingSymlink: false).absolute
        let to = LockLayout.normalize(newURL.path(percentEncoded: false)) ?? newURL.path
        let covered = context.written.withLock { written in
            written.contains { samePath(from, $0) || isPath(from, inside: $0) }
        }
        guard covered else {
            throw CoordinationError(
                .invalidRequest, path: from,
                message: "item(at:didMoveTo:) for '\(from)' needs a coordinated write of it (or of a directory containing it) in progress")
        }
        context.moves.withLock { $0.append((from, to)) }
        // The item's new location belongs to this coordination too (it may be moved again).
        context.written.withLock { $0.append(to) }
    }

    // MARK: - The synchronous pipeline

    func perform<R>(_ intents: [FileAccessIntent], accessor: ([URL]) throws -> R) throws -> R {
        let operation = try prepare(intents)
        if let outer = operation.outer {
            let cursor = try operation.acquireNestedBlocking(in: outer)
            defer { operation.endNested(cursor, in: outer) }
            return try accessor(operation.items.map(\.accessorURL))
        }
        let granted = try observed(operation) { () throws(CoordinationError) in try operation.grantBlocking() }
        defer { operation.removeSnapshots(granted.urls) }
        if operation.releasesEarly {
            operation.release(granted)
            return try accessor(granted.urls)
        }
        defer { operation.release(granted) }
        return try CoordinationContext.$current.withValue(granted.context) { try accessor(granted.urls) }
    }

    /// The presenter this coordination does not message: the coordinator's own, else the one the caller acts for
    /// (`PresenterRegistration.actingAsPresenter(_:)`) when it presents in this domain.
    private func excludedPresenter(in state: DomainState) -> UInt64? {
        if let filePresenter { return filePresenter.id }
        guard let acting = PresenterRegistration.acting, acting.hub === state.presenters else { return nil }
        return acting.id
    }

    func prepare(_ intents: [FileAccessIntent]) throws(CoordinationError) -> CoordinationOperation {
        guard !intents.isEmpty else {
            throw CoordinationError(.invalidRequest, path: nil, message: "a coordination needs at least one intent")
        }
        let state = domain.state
        var items: [ResolvedItem] = []
        for intent in intents {
            let resolve: Bool
            if case .reading(let options) = intent.kind { resolve = options.contains(.resolvesSymbolicLink) } else { resolve = false }
            let located = try state.locate(intent.url, resolvingSymlink: resolve)
            let url = resolve ? URL(fileURLWithPath: located.absolute) : intent.url
            items.append(ResolvedItem(intent: intent, absolute: located.absolute, relative: located.relative, accessorURL: url))
        }
        let outer = CoordinationContext.current.flatMap { $0.domain === state && $0.isActive ? $0 : nil }
        return CoordinationOperation(
            state: state, items: items, outer: outer, scope: scope, generation: scope.generation,
            deadline: monotonicNow() &+ timeout.nanoseconds, excluded: excludedPresenter(in: state),
            presenterDeadline: presenterDeadline, plan: LockLayout.plan(items.map { ($0.relative, $0.intent.access) }))
    }
}
