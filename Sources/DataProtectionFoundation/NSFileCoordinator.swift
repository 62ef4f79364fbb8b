// `NSFileCoordinator`'s shape (Foundation on Linux has none) on the FileCoordination engine, in the app container's
// coordination domain: the same domain every container operation (and so every call of this module) coordinates in.
import DataProtection
import FileCoordination
import Foundation
internal import Locking

/// Foundation's error out-parameter (`&error` with `var error: NSError?`), which Foundation on Linux does not declare.
public typealias NSErrorPointer = UnsafeMutablePointer<NSError?>?

/// Coordinates reading and writing of items in the app container with every other process (iOS: `NSFileCoordinator`).
///
/// Runs on the FileCoordination engine in the container's coordination domain (`Container.coordinationDomain`), the
/// one `Data.write(to:)`, `Data(contentsOf:)`, `ProtectedFileManager` and the preferences store coordinate in, so a
/// coordinated write here excludes their reads and writes in every process. A coordinator grants access; it reads and
/// writes nothing itself: the accessor reaches protected data only through this module's calls, which go through the
/// container's entry points (`containerRead`, `containerWrite`, …), so the guarantee matrix covers them.
///
/// Differences from Apple: every wait ends (the engine's 30 s timeout), and a coordination that times out, is
/// cancelled or would deadlock reports a `CocoaError` in `error` without running the accessor (Apple waits forever).
/// URLs outside the container are refused the same way.
public final class NSFileCoordinator: @unchecked Sendable {
    // @unchecked: the presenter is only read (its identity); the engine's coordinator is Sendable.

    /// Apple's reading options (`.withoutChanges`, `.resolvesSymbolicLink`, `.forUploading`).
    public typealias ReadingOptions = FileCoordination.ReadingOptions
    /// Apple's writing options (`.forDeleting`, `.forMoving`, `.forMerging`, `.forReplacing`, `.contentIndependentMetadataOnly`).
    public typealias WritingOptions = FileCoordination.WritingOptions

    /// The longest a presenter's completion handler or reacquirer block is waited for before its queue is freed.
    public static let presenterCallbackLimit: DispatchTimeInterval = .seconds(10)

    private let filePresenter: (any NSFilePresenter)?
    private let explicit: AppContext?
    /// The engine's coordinators of this one, per domain (one per context it was used in; its cancel reaches them all).
    private let coordinators = Locked<[ObjectIdentifier: FileCoordinator]>([:])

    /// A coordinator acting for `filePresenter` (never messaged about this coordinator's accesses), in the current
    /// app context's container.
    public init(filePresenter: (any NSFilePresenter)? = nil) {
        self.filePresenter = filePresenter
        explicit = nil
    }

    /// A coordinator in `context`'s container.
    public init(filePresenter: (any NSFilePresenter)? = nil, context: AppContext) {
        self.filePresenter = filePresenter
        explicit = context
    }

    // MARK: Presenters

    private static let registered = Locked<[ObjectIdentifier: PresenterRegistration]>([:])

    /// Registers `filePresenter` for its `presentedItemURL` in the current app context's container, for every
    /// process (iOS: `addFilePresenter(_:)`); kept until `removeFilePresenter(_:)`.
    ///
    /// Nothing is registered without an app context, with a nil URL, or with a URL outside the container (iOS has no
    /// error to report either); `addFilePresenter(_:context:)` throws instead.
    public class func addFilePresenter(_ filePresenter: any NSFilePresenter) {
        guard let context = AppContext.current else { return }
        try? addFilePresenter(filePresenter, context: context)
    }

    /// Registers `filePresenter` in `context`'s container.
    /// - Throws: `CocoaError(.fileReadInvalidFileName)` for a nil URL, `.fileReadNoPermission` for one outside the
    ///   container, `.fileReadUnknown` when the coordination rendezvous cannot be set up.
    public class func addFilePresenter(_ filePresenter: any NSFilePresenter, context: AppContext) throws(CocoaError) {
        guard let url = filePresenter.presentedItemURL else {
            throw CocoaError(ProtectionError(.invalidArgument, "unable to present an item: presentedItemURL is nil; set it before addFilePresenter(_:)"), writing: false)
        }
        do throws(ProtectionError) { _ = try context.container.relativePath(of: url) } catch { throw CocoaError(error, writing: false, url: url) }
        let bridge = PresenterBridge(filePresenter, context: context)
        let registration: PresenterRegistration
        do throws(CoordinationError) {
            registration = try FileCoordinator.addFilePresenter(bridge, presenting: url, in: context.container.coordinationDomain)
        } catch {
            throw CocoaError(ProtectionError(.coordinationFailed, "unable to present '\(url.path)': \(error.message)", path: url.path, underlying: error), writing: false, url: url)
        }
        bridge.registration.withLock { $0 = registration }
        let previous = registered.withLock { $0.updateValue(registration, forKey: ObjectIdentifier(filePresenter)) }
        previous?.remove()
    }

    /// Stops messaging `filePresenter` (iOS: `removeFilePresenter(_:)`).
    public class func removeFilePresenter(_ filePresenter: any NSFilePresenter) {
        registered.withLock { $0.removeValue(forKey: ObjectIdentifier(filePresenter)) }?.remove()
    }

    /// The engine's registration of `presenter`, if registered.
    static func registration(of presenter: (any NSFilePresenter)?) -> PresenterRegistration? {
        presenter.flatMap { p in registered.withLock { $0[ObjectIdentifier(p)] } }
    }

    // MARK: Coordination

    /// The engine's coordinator for the current context, or the error Foundation reports without one.
    private func coordinator(for url: URL, writing: Bool) throws(CocoaError) -> FileCoordinator {
        let context: AppContext
        if let explicit { context = explicit } else { context = try AppContext.resolve(for: url, writing: writing) }
        do throws(ProtectionError) { _ = try context.container.relativePath(of: url) } catch { throw CocoaError(error, writing: writing, url: url) }
        let domain = context.container.coordinationDomain
        return coordinators.withLock { all in
            let key = ObjectIdentifier(context)
            if let c = all[key] { return c }
            let c = FileCoordinator(domain: domain, filePresenter: Self.registration(of: filePresenter))
            all[key] = c
            return c
        }
    }

    /// Runs `body`, reporting a failure of the coordination itself in `outError` (the accessor's own errors are its own).
    private func run(_ url: URL, writing: Bool, _ outError: NSErrorPointer, _ body: (FileCoordinator) throws -> Void) {
        do {
            try body(try coordinator(for: url, writing: writing))
        } catch let e as CocoaError {
            outError?.pointee = e as NSError
        } catch let e as CoordinationError {
            let p = ProtectionError(.coordinationFailed, "unable to coordinate access to '\(url.path)': \(e.message)", path: url.path, underlying: e)
            outError?.pointee = CocoaError(p, writing: writing, url: url) as NSError
        } catch {
            outError?.pointee = error as NSError
        }
    }

    /// Runs `reader` once no writer of the item is active (iOS: `coordinate(readingItemAt:options:error:byAccessor:)`).
    ///
    /// Presenters of the item save first (unless `.withoutChanges`) and relinquish it to the reader.
    /// - Parameters:
    ///   - url: an item inside the app container.
    ///   - options: Apple's reading options.
    ///   - outError: set, and `reader` not run, when the coordination fails (timed out, cancelled, outside the container).
    ///   - reader: reads the item at the URL it is given.
    public func coordinate(readingItemAt url: URL, options: ReadingOptions = [], error outError: NSErrorPointer, byAccessor reader: (URL) -> Void) {
        run(url, writing: false, outError) { c in try c.coordinate(readingItemAt: url, options: options) { reader($0) } }
    }

    /// Runs `writer` once no other reader or writer of the item is active (iOS: `coordinate(writingItemAt:options:error:byAccessor:)`).
    ///
    /// Presenters of the item relinquish it (`.forMerging` and `.forMoving`: they save first; `.forDeleting`: they
    /// accommodate the deletion) and hear `presentedItemDidChange` after.
    /// - Parameters:
    ///   - url: an item inside the app container.
    ///   - options: Apple's writing options.
    ///   - outError: set, and `writer` not run, when the coordination fails.
    ///   - writer: writes the item at the URL it is given.
    public func coordinate(writingItemAt url: URL, options: WritingOptions = [], error outError: NSErrorPointer, byAccessor writer: (URL) -> Void) {
        run(url, writing: true, outError) { c in try c.coordinate(writingItemAt: url, options: options) { writer($0) } }
    }

    /// Reads one item and writes another, taking both sets of locks at once (iOS:
    /// `coordinate(readingItemAt:options:writingItemAt:options:error:byAccessor:)`).
    public func coordinate(
        readingItemAt readingURL: URL, options readingOptions: ReadingOptions = [], writingItemAt writingURL: URL,
        options writingOptions: WritingOptions = [], error outError: NSErrorPointer, byAccessor readerWriter: (URL, URL) -> Void
    ) {
        run(writingURL, and: readingURL, writing: false, outError) { c in
            try c.coordinate(readingItemAt: readingURL, options: readingOptions, writingItemAt: writingURL, options: writingOptions) { readerWriter($0, $1) }
        }
    }

    /// Writes two items, taking both sets of locks at once; the way to move is `.forMoving` then `.forReplacing` (iOS:
    /// `coordinate(writingItemAt:options:writingItemAt:options:error:byAccessor:)`).
    public func coordinate(
        writingItemAt url1: URL, options options1: WritingOptions = [], writingItemAt url2: URL,
        options options2: WritingOptions = [], error outError: NSErrorPointer, byAccessor writer: (URL, URL) -> Void
    ) {
        run(url1, and: url2, writing: true, outError) { c in
            try c.coordinate(writingItemAt: url1, options: options1, writingItemAt: url2, options: options2) { writer($0, $1) }
        }
    }

    /// `run` for two items: the first written, the second read or (`writing`) written; both must be in the container.
    private func run(_ written: URL, and other: URL, writing: Bool, _ outError: NSErrorPointer, _ body: (FileCoordinator) throws -> Void) {
        run(written, writing: true, outError) { c in
            try checkInside(other, writing: writing)
            try body(c)
        }
    }

    /// Runs `batchAccessor` for a batch of coordinations (iOS:
    /// `prepare(forReadingItemsAt:options:writingItemsAt:options:error:byAccessor:)`).
    ///
    /// Apple's call takes no locks either (each item is still coordinated inside); it lets Apple message presenters
    /// once for the batch. Here presenters are messaged per coordination, so the batch accessor runs at once, after
    /// the URLs are checked to be inside the container; its completion handler does nothing.
    public func prepare(
        forReadingItemsAt readingURLs: [URL], options readingOptions: ReadingOptions = [], writingItemsAt writingURLs: [URL],
        options writingOptions: WritingOptions = [], error outError: NSErrorPointer, byAccessor batchAccessor: (@escaping () -> Void) -> Void
    ) {
        guard let first = readingURLs.first ?? writingURLs.first else { return batchAccessor {} }
        run(first, writing: !writingURLs.isEmpty, outError) { _ in
            for u in readingURLs { try checkInside(u, writing: false) }
            for u in writingURLs { try checkInside(u, writing: true) }
            batchAccessor {}
        }
    }

    /// Refuses `url` outside the coordinator's container, as Foundation reports it.
    private func checkInside(_ url: URL, writing: Bool) throws(CocoaError) {
        _ = try coordinator(for: url, writing: writing)
    }

    /// Tells presenters, inside a write accessor, that the item at `oldURL` moved to `newURL` (iOS: `item(at:didMoveTo:)`).
    public func item(at oldURL: URL, didMoveTo newURL: URL) {
        guard let c = try? coordinator(for: oldURL, writing: true) else { return }
        try? c.item(at: oldURL, didMoveTo: newURL)
    }

    /// Cancels this coordinator's waiting coordinations; each reports `outError` without running its accessor (iOS: `cancel()`).
    public func cancel() {
        for c in coordinators.withLock({ Array($0.values) }) { c.cancel() }
    }
}
