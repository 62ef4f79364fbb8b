// `UserDefaults`' shape over the container's preferences store (DataProtectionContainers/Preferences.swift): one
// protected file in `Library/Preferences/`, every change a locked, coordinated read-modify-write, every read a fresh
// decrypt. This file only translates: property-list values ⇄ `PreferenceValue`, Apple's non-throwing getters and
// their defaults, the registration domain, and `didChangeNotification`.
import DataProtection
import Foundation
internal import Locking

/// The user's preferences, as iOS code uses `UserDefaults`, stored protected in the app container.
///
/// Every read and write goes through the container's preferences store (`Container.preferences(named:)`, entry points
/// `preferencesRead` and `preferencesWrite` of the guarantee matrix): a protected file of the Preferences directory's
/// class (`completeUntilFirstUserAuthentication` by default), changed under an exclusive lock inside a coordinated
/// write and read afresh each time, so a value another process set is read by the next call here (no cache).
///
/// While the store's class is locked:
/// - reads give what iOS gives, the value as absent: `object(forKey:)` is the `register(defaults:)` value or nil,
///   `bool(forKey:)` false, `integer(forKey:)` 0, and so on (no stored value is read or kept in memory);
/// - writes are refused and change nothing: `set(_:forKey:)` and `removeObject(forKey:)` leave every stored value as
///   it was and post no `didChangeNotification` (iOS would keep the change in memory and save it later; here no
///   plaintext outlives a call). `write(_:forKey:)` is the same call, throwing `CocoaError(.fileWriteNoPermission)`
///   with the `ProtectionError` (`.locked`, naming `dpctl unlock`) underneath.
///
/// A store that cannot be read for another reason (a damaged file: `.corruptHeader`, `.authenticationFailed`) also
/// reads as absent, since the getters cannot throw; `write(_:forKey:)` then throws that error, and
/// `Container.preferences(named:)`'s `value(forKey:)` names it with its fix.
///
/// A port may add `typealias UserDefaults = ProtectedUserDefaults` to a file.
public final class ProtectedUserDefaults: Sendable {
    /// Posted (to the app context's `NotificationCenter`, on the writing thread, object: this instance) after a
    /// change made in this process, as iOS's `UserDefaults.didChangeNotification`; changes by other processes are
    /// read by the next call but post nothing, as on iOS.
    public static let didChangeNotification = UserDefaults.didChangeNotification

    /// The store, or nil for the defaults of no app context (reads give registered values, writes fail).
    let store: Preferences?
    private let center: NotificationCenter
    /// The registration domain: values shown where nothing is stored (or the store is locked); in memory only,
    /// shared by every instance of one app context, as iOS shares it in a process.
    let registered: Locked<[String: PreferenceValue]>

    init(store: Preferences?, center: NotificationCenter, registered: Locked<[String: PreferenceValue]> = Locked([:])) {
        self.store = store
        self.center = center
        self.registered = registered
    }

    /// The app context's standard preferences (iOS: `UserDefaults.standard`), resolved from `AppContext.current`;
    /// without a context, defaults that store nothing.
    public static var standard: ProtectedUserDefaults { AppContext.current?.standardDefaults ?? unbound }

    private static let unbound = ProtectedUserDefaults(store: nil, center: .default)

    /// The preferences store `suiteName` of the current app context's container (iOS: `UserDefaults(suiteName:)`);
    /// nil without a context or for a name that is not a plain file name.
    public convenience init?(suiteName: String?) {
        guard let context = AppContext.current else { return nil }
        guard let suiteName else { self.init(store: context.standardDefaults.store, center: context.notificationCenter, registered: context.standardDefaults.registered); return }
        guard let store = try? context.container.preferences(named: suiteName) else { return nil }
        self.init(store: store, center: context.notificationCenter, registered: context.standardDefaults.registered)
    }

    /// The standard preferences of `context` (the port's set-up, when it does not bootstrap one).
    public static func standard(of context: AppContext) -> ProtectedUserDefaults { context.standardDefaults }

    // MARK: Registration

    /// Adds `defaults` to the registration domain (iOS: `register(defaults:)`): shown where nothing is stored.
    ///
    /// Values that are not property-list types are ignored (iOS raises an exception).
    public func register(defaults: [String: Any]) {
        let converted = defaults.compactMapValues(PreferenceValue.init(propertyList:))
        registered.withLock { $0.merge(converted) { $1 } }
    }

    // MARK: Reads

    /// The stored value for `key`, else the registered one; the stored value reads as absent while locked.
    private func value(_ key: String) -> PreferenceValue? {
        // `try?` turns a locked (or unreadable) store into "absent", Apple's behaviour for a locked class.
        shown((try? store?.value(forKey: key)) ?? nil, key)
    }

    /// `stored` when there is one, else the registered value for `key`: what every getter shows.
    func shown(_ stored: PreferenceValue?, _ key: String) -> PreferenceValue? {
        stored ?? registered.withLock { $0[key] }
    }

    /// The value for `key` as a property-list object (iOS: `object(forKey:)`); nil when absent.
    public func object(forKey key: String) -> Any? { value(key)?.propertyList }

    /// The Boolean for `key` (iOS: `bool(forKey:)`): numbers are true when not zero, strings when "YES", "true" or a
    /// non-zero number; false when absent or locked.
    public func bool(forKey key: String) -> Bool { value(key).boolValue }

    /// The integer for `key` (iOS: `integer(forKey:)`): Booleans are 0 or 1, doubles are truncated, numeric strings
    /// parsed; 0 when absent, locked or not a number.
    public func integer(forKey key: String) -> Int { value(key).integerValue }

    /// The number for `key` (iOS: `double(forKey:)`); 0 when absent, locked or not a number.
    public func double(forKey key: String) -> Double { value(key).doubleValue }

    /// The number for `key` as a `Float` (iOS: `float(forKey:)`); 0 when absent.
    public func float(forKey key: String) -> Float { Float(double(forKey: key)) }

    /// The string for `key` (iOS: `string(forKey:)`); numbers are given as text; nil when absent or locked.
    public func string(forKey key: String) -> String? { value(key).stringValue }

    /// The array for `key` (iOS: `array(forKey:)`); nil when absent, locked or not an array.
    public func array(forKey key: String) -> [Any]? { value(key).arrayValue }

    /// The array of strings for `key` (iOS: `stringArray(forKey:)`); nil unless every element is a string.
    public func stringArray(forKey key: String) -> [String]? { array(forKey: key).flatMap { $0 as? [String] } }

    /// The dictionary for `key` (iOS: `dictionary(forKey:)`); nil when absent, locked or not a dictionary.
    public func dictionary(forKey key: String) -> [String: Any]? { value(key).dictionaryValue }

    /// The bytes for `key` (iOS: `data(forKey:)`); nil when absent, locked or not data.
    public func data(forKey key: String) -> Data? { value(key).dataValue }

    /// The URL for `key` (iOS: `url(forKey:)`): one set with `set(_:forKey:)`, or a path string (`~` expanded) as a
    /// file URL; nil when absent or locked. A file URL is stored as its path, another as its absolute string (iOS
    /// archives URLs), so `object(forKey:)` gives a `String` for it.
    public func url(forKey key: String) -> URL? { value(key).urlValue }

    /// Every stored value over the registered ones (iOS: `dictionaryRepresentation()`); registered ones only while locked.
    public func dictionaryRepresentation() -> [String: Any] { shownAll((try? store?.dictionaryRepresentation()) ?? nil) }

    /// The registered values with `stored` over them, as property-list objects.
    func shownAll(_ stored: [String: PreferenceValue]?) -> [String: Any] {
        registered.withLock { $0 }.merging(stored ?? [:]) { $1 }.mapValues(\.propertyList)
    }

    // MARK: Writes

    /// Stores `value` for `key`, or removes it when nil (iOS: `set(_:forKey:)`).
    ///
    /// `value`: Bool, any integer, Double, Float, String, Data, Date, URL, NSNumber, or arrays and dictionaries of
    /// them. A refused write (locked class, not a property-list value, no app context) changes nothing and posts
    /// nothing; `write(_:forKey:)` says why.
    public func set(_ value: Any?, forKey key: String) { try? write(value, forKey: key) }
    public func set(_ value: Bool, forKey key: String) { set(value as Any, forKey: key) }
    public func set(_ value: Int, forKey key: String) { set(value as Any, forKey: key) }
    public func set(_ value: Double, forKey key: String) { set(value as Any, forKey: key) }
    public func set(_ value: Float, forKey key: String) { set(value as Any, forKey: key) }
    public func set(_ url: URL?, forKey key: String) { set(url as Any?, forKey: key) }

    /// Removes the stored value for `key`, so the registered one (if any) shows (iOS: `removeObject(forKey:)`).
    public func removeObject(forKey key: String) { set(nil as Any?, forKey: key) }

    /// Every change is saved durably when it is made, so there is nothing to do (iOS: `synchronize()`, deprecated).
    @discardableResult
    public func synchronize() -> Bool { true }

    /// `set(_:forKey:)`, throwing when the write is refused: the one write path.
    ///
    /// Forwards to `Preferences.set(_:forKey:)` (entry point `preferencesWrite`): a read-modify-write that first
    /// decrypts the stored values, so while the class is locked it fails before anything is written and no stored
    /// value is lost. Posts `didChangeNotification` after a successful save.
    /// - Throws: `CocoaError(.fileWriteNoPermission)` while the store's class is locked (the `ProtectionError`
    ///   `.locked` underneath); `.fileWriteUnknown` with `.invalidArgument` for a value that is not a property-list
    ///   type, or when there is no app context.
    public func write(_ value: Any?, forKey key: String) throws(CocoaError) {
        let (store, converted) = try prepare(value, forKey: key)
        do throws(ProtectionError) { try store.set(converted, forKey: key) } catch {
            throw CocoaError(error, writing: true, url: nil)
        }
        didChange()
    }

    /// The store and the stored form of `value`: the checks every write makes before it touches the store.
    /// - Throws: `.fileWriteUnknown` with `.invalidArgument` without an app context or for a value that is not a
    ///   property-list type.
    func prepare(_ value: Any?, forKey key: String) throws(CocoaError) -> (Preferences, PreferenceValue?) {
        guard let store else {
            throw CocoaError(ProtectionError(.invalidArgument, "unable to set '\(key)': no app context; call AppContext.bootstrap(_:) at launch"), writing: true)
        }
        guard let value else { return (store, nil) }
        guard let v = PreferenceValue(propertyList: value) else {
            throw CocoaError(ProtectionError(.invalidArgument, "unable to set '\(key)': a \(type(of: value)) is not a property-list value; store Bool, numbers, String, Data, Date, URL, or arrays and dictionaries of them"), writing: true)
        }
        return (store, v)
    }

    /// Posts `didChangeNotification` for a change this process saved.
    func didChange() { center.post(name: Self.didChangeNotification, object: self) }
}

extension PreferenceValue? {
    /// `bool(forKey:)`'s answer: numbers are true when not zero, strings when "YES", "true" or a non-zero number.
    var boolValue: Bool {
        switch self {
        case .bool(let b)?: b
        case .integer(let i)?: i != 0
        case .double(let d)?: d != 0
        case .string(let s)?: ["yes", "true"].contains(s.lowercased()) || (Double(s).map { $0 != 0 } ?? false)
        default: false
        }
    }

    /// `integer(forKey:)`'s answer: Booleans are 0 or 1, doubles are truncated, numeric strings parsed; else 0.
    var integerValue: Int {
        switch self {
        case .integer(let i)?: Int(truncatingIfNeeded: i)
        case .bool(let b)?: b ? 1 : 0
        case .double(let d)?: Int(exactly: d.rounded(.towardZero)) ?? 0
        case .string(let s)?: Int(s) ?? Double(s).flatMap { Int(exactly: $0.rounded(.towardZero)) } ?? 0
        default: 0
        }
    }

    /// `double(forKey:)`'s answer; 0 when not a number.
    var doubleValue: Double {
        switch self {
        case .double(let d)?: d
        case .integer(let i)?: Double(i)
        case .bool(let b)?: b ? 1 : 0
        case .string(let s)?: Double(s) ?? 0
        default: 0
        }
    }

    /// `string(forKey:)`'s answer: numbers as text.
    var stringValue: String? {
        switch self {
        case .string(let s)?: s
        case .integer(let i)?: String(i)
        case .double(let d)?: String(d)
        default: nil
        }
    }

    /// `array(forKey:)`'s answer.
    var arrayValue: [Any]? {
        if case .array(let a)? = self { return a.map(\.propertyList) }
        return nil
    }

    /// `dictionary(forKey:)`'s answer.
    var dictionaryValue: [String: Any]? {
        if case .dictionary(let d)? = self { return d.mapValues(\.propertyList) }
        return nil
    }

    /// `data(forKey:)`'s answer.
    var dataValue: Data? {
        if case .data(let d)? = self { return Data(d) }
        return nil
    }

    /// `url(forKey:)`'s answer: a path string (`~` expanded) as a file URL, another string with a scheme as a URL.
    var urlValue: URL? {
        guard case .string(let s)? = self else { return nil }
        if s.hasPrefix("/") || s.hasPrefix("~") { return URL(fileURLWithPath: NSString(string: s).expandingTildeInPath) }
        return URL(string: s).flatMap { $0.scheme == nil ? nil : $0 }
    }
}

extension PreferenceValue {
    /// The value of a property-list object; nil for anything else.
    init?(propertyList value: Any) {
        // NSNumber first, by its stored type (a Swift Bool or Int is matched below, by its own type).
        if type(of: value) is NSNumber.Type, let n = value as? NSNumber {
            switch String(cString: n.objCType) {
            case "c", "B": self = n.int64Value == 0 || n.int64Value == 1 ? .bool(n.boolValue) : .integer(n.int64Value)
            case "f", "d": self = .double(n.doubleValue)
            case "Q", "L", "I", "S", "C": self = n.uint64Value > UInt64(Int64.max) ? .double(n.doubleValue) : .integer(n.int64Value)
            default: self = .integer(n.int64Value)
            }
            return
        }
        switch value {
        case let v as PreferenceValue: self = v
        case let v as Bool: self = .bool(v)
        case let v as any BinaryInteger:
            guard let i = Int64(exactly: v) else { return nil }
            self = .integer(i)
        case let v as Double: self = .double(v)
        case let v as Float: self = .double(Double(v))
        case let v as String: self = .string(v)
        case let v as Data: self = .data([UInt8](v))
        case let v as Date: self = .date(v.timeIntervalSince1970)
        case let v as URL: self = .string(v.isFileURL ? v.path : v.absoluteString)
        case let v as [Any]:
            var a: [PreferenceValue] = []
            for e in v { guard let p = PreferenceValue(propertyList: e) else { return nil }; a.append(p) }
            self = .array(a)
        case let v as [String: Any]:
            var d: [String: PreferenceValue] = [:]
            for (k, e) in v { guard let p = PreferenceValue(propertyList: e) else { return nil }; d[k] = p }
            self = .dictionary(d)
        default: return nil
        }
    }

    /// The value as the property-list object iOS's `object(forKey:)` gives.
    var propertyList: Any {
        switch self {
        case .bool(let b): b
        case .integer(let i): Int(exactly: i).map { $0 as Any } ?? i
        case .double(let d): d
        case .string(let s): s
        case .data(let d): Data(d)
        case .date(let t): Date(timeIntervalSince1970: t)
        case .array(let a): a.map(\.propertyList)
        case .dictionary(let d): d.mapValues(\.propertyList)
        }
    }
}
