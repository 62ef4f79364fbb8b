// The async forms of the `UserDefaults`-shaped preferences: the same answers as the synchronous calls, with the
// store's blocking I/O (its lock, the coordinated read or save, the decrypt) on the I/O threads.
import DataProtection
import Foundation

extension ProtectedUserDefaults {
    /// These preferences as `async` calls that suspend the caller instead of blocking its thread (iOS has none: a
    /// `UserDefaults` read there is a memory read; here it is a locked, coordinated decrypt).
    public var nonblocking: NonblockingUserDefaults { NonblockingUserDefaults(defaults: self) }
}

/// `ProtectedUserDefaults`' calls as `async` functions, for services that read preferences from tasks.
///
/// Each reaches the store through the container preferences' async forms (`Preferences.nonblocking`), so it runs on
/// the I/O threads (`BlockingThreads.io`), off Swift's cooperative pool, through the same entry points as the
/// synchronous calls (`preferencesRead`, `preferencesWrite`); the conversions and the registration domain are the
/// synchronous calls' own. A getter gives what its synchronous form gives, and reads as absent (the registered value,
/// or `false`, 0, nil) what that form reads as absent: a locked or unreadable store, and also a call whose task was
/// cancelled before its read started. Writes: `set(_:forKey:)` changes nothing when refused; `write(_:forKey:)` says
/// why (`CocoaError` as the synchronous form, or `CancellationError` when cancelled before it started: nothing saved).
public struct NonblockingUserDefaults: Sendable {
    /// The preferences whose calls these are.
    public let defaults: ProtectedUserDefaults

    /// `object(forKey:)`, suspending.
    public func object(forKey key: String) async -> Any? { await value(key)?.propertyList }
    /// `bool(forKey:)`, suspending.
    public func bool(forKey key: String) async -> Bool { await value(key).boolValue }
    /// `integer(forKey:)`, suspending.
    public func integer(forKey key: String) async -> Int { await value(key).integerValue }
    /// `double(forKey:)`, suspending.
    public func double(forKey key: String) async -> Double { await value(key).doubleValue }
    /// `string(forKey:)`, suspending.
    public func string(forKey key: String) async -> String? { await value(key).stringValue }
    /// `array(forKey:)`, suspending.
    public func array(forKey key: String) async -> [Any]? { await value(key).arrayValue }
    /// `dictionary(forKey:)`, suspending.
    public func dictionary(forKey key: String) async -> [String: Any]? { await value(key).dictionaryValue }
    /// `data(forKey:)`, suspending.
    public func data(forKey key: String) async -> Data? { await value(key).dataValue }
    /// `url(forKey:)`, suspending.
    public func url(forKey key: String) async -> URL? { await value(key).urlValue }

    /// `dictionaryRepresentation()`, suspending.
    public func dictionaryRepresentation() async -> [String: Any] {
        defaults.shownAll((try? await defaults.store?.nonblocking.dictionaryRepresentation()) ?? nil)
    }

    /// `set(_:forKey:)`, suspending: a refused write changes nothing and posts nothing.
    public func set(_ value: Any?, forKey key: String) async { try? await write(value, forKey: key) }

    /// `removeObject(forKey:)`, suspending.
    public func removeObject(forKey key: String) async { await set(nil, forKey: key) }

    /// `write(_:forKey:)`, suspending: checks `value` here, saves on the I/O threads, then posts
    /// `didChangeNotification` on the caller's thread (not on an I/O thread, which observers must not hold).
    /// - Throws: what `write(_:forKey:)` throws, or `CancellationError` (nothing saved, nothing posted).
    public func write(_ value: Any?, forKey key: String) async throws {
        let (store, converted) = try defaults.prepare(value, forKey: key)
        do { try await store.nonblocking.set(converted, forKey: key) } catch let error as ProtectionError {
            throw CocoaError(error, writing: true, url: nil)
        }
        defaults.didChange()
    }

    /// The stored value for `key` read on the I/O threads, else the registered one.
    private func value(_ key: String) async -> PreferenceValue? {
        // `try?`: a locked, unreadable or cancelled read is "absent", as the synchronous getters read a locked store.
        defaults.shown((try? await defaults.store?.nonblocking.value(forKey: key)) ?? nil, key)
    }
}
