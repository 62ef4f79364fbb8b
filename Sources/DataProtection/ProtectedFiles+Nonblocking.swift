// The async forms of the main path's file calls: each runs the synchronous call on the I/O threads.
import DataProtectionKeys
import DataProtectionFiles
import FileCoordination

extension ProtectedFiles {
    /// These files' main-path calls as `async` functions that suspend the caller instead of blocking its thread.
    public var nonblocking: NonblockingFiles { NonblockingFiles(files: self) }
}

/// The main path's file calls as `async` functions: each runs the synchronous call, unchanged, on a dedicated pool of
/// I/O threads (`BlockingThreads.io`), off Swift's cooperative pool.
///
/// Each goes through the same entry point as its synchronous form (`files.write`, `files.read`, `files.create`,
/// `files.open`, `files.open(forWriting:)` in `ProtectedDataEntryPoint`), so the guarantee matrix's cells for those
/// cover it: it is the synchronous call, run on another thread. A coordinated whole-file call (the domain's files
/// coordinate) waits for its coordination without holding any thread, neither a cooperative nor an I/O one (the task
/// polls the busy lock), then runs the synchronous call inside that coordination on an I/O thread.
///
/// Cancellation: a call whose task is cancelled before it starts (also while it waits for coordination) does nothing
/// and throws `CancellationError`; a call already running finishes (an atomic replace commits or leaves the old file;
/// nothing is torn).
public struct NonblockingFiles: Sendable {
    /// The files whose calls these are.
    public let files: ProtectedFiles

    /// `read(_:)`, suspending.
    /// - Throws: what `read(_:)` throws, or `CancellationError`.
    public func read(_ path: String) async throws -> [UInt8] {
        let f = files
        return try await f.coordinated(path, writing: false, on: .io) { () throws -> [UInt8] in try f.read(path) }
    }

    /// `write(_:to:protection:)`, suspending: the atomic replace.
    /// - Throws: what `write(_:to:protection:)` throws, or `CancellationError` (`path` untouched).
    public func write(_ bytes: [UInt8], to path: String, protection: ProtectionClass) async throws {
        let f = files
        try await f.coordinated(path, writing: true, on: .io) { () throws in try f.write(bytes, to: path, protection: protection) }
    }

    /// `create(_:protection:)`, suspending.
    /// - Returns: a handle for reading and writing; close it (`handle.nonblocking.close()`).
    /// - Throws: what `create(_:protection:)` throws, or `CancellationError` (nothing created).
    public func create(_ path: String, protection: ProtectionClass) async throws -> ProtectedFileHandle {
        let f = files
        return try await BlockingThreads.io.perform { () throws -> ProtectedFileHandle in try f.create(path, protection: protection) }
    }

    /// `open(_:forWriting:)`, suspending.
    /// - Returns: a handle; close it.
    /// - Throws: what `open(_:forWriting:)` throws, or `CancellationError` (nothing opened).
    public func open(_ path: String, forWriting: Bool = false) async throws -> ProtectedFileHandle {
        let f = files
        return try await BlockingThreads.io.perform { () throws -> ProtectedFileHandle in try f.open(path, forWriting: forWriting) }
    }
}
