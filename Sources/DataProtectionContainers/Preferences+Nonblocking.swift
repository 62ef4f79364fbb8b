// The async forms of a preferences store's calls: each runs the synchronous call on the I/O threads.
import DataProtectionKeys
import FileCoordination

extension Preferences {
    /// This store's calls as `async` functions that suspend the caller instead of blocking its thread.
    public var nonblocking: NonblockingPreferences { NonblockingPreferences(preferences: self) }
}

/// A preferences store's calls as `async` functions: each runs the synchronous call, unchanged, on the pool of I/O
/// threads (`BlockingThreads.io`) that the files' and container's `nonblocking` forms use, off Swift's cooperative pool.
///
/// A call can wait long: for the store's lock while another thread or process changes it, and for a coordinated
/// access while a presenter saves. Each goes through the same entry point as its synchronous form (`preferencesRead`,
/// `preferencesWrite` in `ProtectedDataEntryPoint`), under the same lock and coordination, so the guarantee matrix's
/// cells for those cover it. Cancellation: before the call starts it does nothing and throws `CancellationError`;
/// once started it finishes (a change is saved whole or not at all).
public struct NonblockingPreferences: Sendable {
    /// The store whose calls these are.
    public let preferences: Preferences

    /// `value(forKey:)`, suspending.
    /// - Throws: what `value(forKey:)` throws (`.locked` while the store's class is locked), or `CancellationError`.
    public func value(forKey key: String) async throws -> PreferenceValue? {
        try await run { p throws(ProtectionError) in try p.value(forKey: key) }
    }

    /// `dictionaryRepresentation()`, suspending.
    /// - Throws: what `dictionaryRepresentation()` throws, or `CancellationError`.
    public func dictionaryRepresentation() async throws -> [String: PreferenceValue] {
        try await run { p throws(ProtectionError) in try p.dictionaryRepresentation() }
    }

    /// `set(_:forKey:)`, suspending: the locked, coordinated read-modify-write.
    /// - Throws: what `set(_:forKey:)` throws (nothing is changed), or `CancellationError` (nothing is changed).
    public func set(_ value: PreferenceValue?, forKey key: String) async throws {
        try await run { p throws(ProtectionError) in try p.set(value, forKey: key) }
    }

    /// `removeValue(forKey:)`, suspending.
    /// - Throws: what `removeValue(forKey:)` throws, or `CancellationError`.
    public func removeValue(forKey key: String) async throws { try await set(nil, forKey: key) }

    /// `update(_:)`, suspending: `change` runs on an I/O thread, under the store's exclusive lock.
    /// - Throws: what `update(_:)` throws, or `CancellationError` (`change` never ran).
    public func update(_ change: @escaping @Sendable (inout [String: PreferenceValue]) -> Void) async throws {
        try await run { p throws(ProtectionError) in try p.update(change) }
    }

    /// Runs `body` on the store, on the I/O threads.
    private func run<R: Sendable>(_ body: @escaping @Sendable (Preferences) throws(ProtectionError) -> R) async throws -> R {
        let p = preferences
        return try await BlockingThreads.io.perform { () throws -> R in try body(p) }
    }
}
