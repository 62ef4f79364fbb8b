// The async forms of a handle's calls: each runs the synchronous call on the I/O threads, off the cooperative pool.
import DataProtectionKeys
import FileCoordination

extension ProtectedFileHandle {
    /// This handle's calls as `async` functions that suspend the caller instead of blocking its thread.
    public var nonblocking: NonblockingHandle { NonblockingHandle(handle: self) }
}

/// A protected-file handle's calls as `async` functions: each runs the synchronous call, unchanged, on a dedicated
/// pool of I/O threads (`BlockingThreads.io`), so no thread of Swift's cooperative pool waits on a system call.
///
/// The same handle, the same lock check, the same journal: these are thin forwards, so every guarantee of the
/// synchronous call holds. Cancellation: a call whose task is cancelled before it starts does nothing and throws
/// `CancellationError`; a call already running finishes (a write completes, or fails and its journal rolls it back),
/// so a cancelled write never tears the file.
public struct NonblockingHandle: Sendable {
    /// The handle whose calls these are.
    public let handle: ProtectedFileHandle

    /// `read(at:count:)`, suspending.
    /// - Throws: what `read(at:count:)` throws, or `CancellationError` (nothing was read).
    public func read(at offset: Int64, count: Int) async throws -> [UInt8] {
        let h = handle
        return try await BlockingThreads.io.perform { () throws -> [UInt8] in try h.read(at: offset, count: count) }
    }

    /// `write(_:at:)`, suspending.
    /// - Throws: what `write(_:at:)` throws, or `CancellationError` (nothing was written).
    public func write(_ bytes: [UInt8], at offset: Int64) async throws {
        let h = handle
        try await BlockingThreads.io.perform { () throws in try h.write(bytes, at: offset) }
    }

    /// `append(_:)`, suspending.
    /// - Throws: what `append(_:)` throws, or `CancellationError` (nothing was appended).
    public func append(_ bytes: [UInt8]) async throws {
        let h = handle
        try await BlockingThreads.io.perform { () throws in try h.append(bytes) }
    }

    /// `truncate(to:)`, suspending.
    /// - Throws: what `truncate(to:)` throws, or `CancellationError` (the size is unchanged).
    public func truncate(to newSize: Int64) async throws {
        let h = handle
        try await BlockingThreads.io.perform { () throws in try h.truncate(to: newSize) }
    }

    /// `sync()`, suspending: every completed write made durable and committed.
    /// - Throws: what `sync()` throws, or `CancellationError` (nothing was committed by this call).
    public func sync() async throws {
        let h = handle
        try await BlockingThreads.io.perform { () throws in try h.sync() }
    }

    /// `close()`, suspending (its commit may fsync); runs even when the task is cancelled, so the handle never stays open.
    public func close() async {
        let h = handle
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            BlockingThreads.io.run {
                h.close()
                c.resume()
            }
        }
    }
}
