// The async forms of a container's file calls: each runs the synchronous call on the I/O threads.
import DataProtectionKeys
import DataProtectionFiles
import FileCoordination

extension Container {
    /// This container's file calls as `async` functions that suspend the caller instead of blocking its thread.
    public var nonblocking: NonblockingContainer { NonblockingContainer(container: self) }
}

/// A container's file calls as `async` functions: each runs the synchronous call, unchanged, on a dedicated pool of
/// I/O threads (`BlockingThreads.io`), off Swift's cooperative pool.
///
/// Each goes through the same entry point as its synchronous form (`container.write`, `container.read`,
/// `container.create`, `container.open` in `ProtectedDataEntryPoint`), with the same confinement and coordination, so
/// the guarantee matrix's cells for those cover it. `read` and `write` wait for their coordination without holding any
/// thread (the task polls the busy lock), so waits on held items never fill the I/O threads; the synchronous call then
/// runs inside that coordination. Cancellation: before the call starts (also while it waits for coordination) it does
/// nothing and throws `CancellationError`; once started it finishes (a write commits or leaves the old file).
public struct NonblockingContainer: Sendable {
    /// The container whose calls these are.
    public let container: Container

    /// `read(_:)`, suspending.
    /// - Throws: what `read(_:)` throws, or `CancellationError`.
    public func read(_ path: String) async throws -> [UInt8] {
        let c = container
        return try await c.coordinated(path, .reading, "read", on: .io) { () throws -> [UInt8] in try c.read(path) }
    }

    /// `write(_:to:protection:)`, suspending: the coordinated atomic replace.
    /// - Throws: what `write(_:to:protection:)` throws, or `CancellationError` (`path` untouched).
    public func write(_ bytes: [UInt8], to path: String, protection: ProtectionClass? = nil) async throws {
        let c = container
        try await c.coordinated(path, .replacing, "write", on: .io) { () throws in try c.write(bytes, to: path, protection: protection) }
    }

    /// `create(_:protection:)`, suspending.
    /// - Throws: what `create(_:protection:)` throws, or `CancellationError` (nothing created).
    public func create(_ path: String, protection: ProtectionClass? = nil) async throws -> ProtectedFileHandle {
        let c = container
        return try await BlockingThreads.io.perform { () throws -> ProtectedFileHandle in try c.create(path, protection: protection) }
    }

    /// `open(_:forWriting:)`, suspending.
    /// - Throws: what `open(_:forWriting:)` throws, or `CancellationError` (nothing opened).
    public func open(_ path: String, forWriting: Bool = false) async throws -> ProtectedFileHandle {
        let c = container
        return try await BlockingThreads.io.perform { () throws -> ProtectedFileHandle in try c.open(path, forWriting: forWriting) }
    }
}
