import DataProtectionKeys
import DataProtectionFiles
import SystemLayer

#if canImport(Glibc)
import Glibc
#endif

/// A value in a preferences store: the property-list kinds `UserDefaults` keeps.
///
/// Not `indirect`: the array and dictionary cases already hold their elements out of line, so a scalar value needs
/// no box of its own.
public enum PreferenceValue: Sendable, Equatable {
    case bool(Bool)
    case integer(Int64)
    case double(Double)
    case string(String)
    case data([UInt8])
    case array([PreferenceValue])
    case dictionary([String: PreferenceValue])
    /// A date, as seconds since 1970-01-01 00:00 UTC (tag 7: a store holding one is refused by versions before 0.2.0).
    case date(Double)
}

/// A key-value preferences store in `Library/Preferences/` (the analogue of `UserDefaults`).
///
/// Stored as one protected file, `<name>.prefs`, of the Preferences directory's
/// default class; every change is a read-modify-write under an exclusive OFD
/// lock on `.<name>.lock`, saved with the file layer's atomic, durable write
/// inside a coordinated write (reads are coordinated reads), so presenters and
/// other coordinated readers see whole saves only.
/// Each operation opens its own lock descriptor, so threads of one process
/// exclude each other exactly as processes do. Reads take the lock shared and
/// decrypt the file each time: no plaintext copy outlives an operation, so
/// a locked class fails reads at once (`.locked`), as for any protected file.
public final class Preferences: Sendable {
    /// The store's name (`standard` by default).
    public let name: String
    let container: Container

    var path: String { ContainerDirectory.preferences.relativePath + "/\(name).prefs" }
    var lockPath: String { ContainerDirectory.preferences.relativePath + "/.\(name).lock" }

    init(container: Container, name: String) throws(ProtectionError) {
        guard !name.isEmpty, !name.hasPrefix("."), name.utf8.count <= 200,
              name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) })
        else { throw ProtectionError(.invalidArgument, "'\(name)' is not a preferences name: use letters, digits, '.', '_' and '-' (e.g. com.example.app)") }
        self.container = container
        self.name = name
    }

    /// The value for `key`, or nil.
    public func value(forKey key: String) throws(ProtectionError) -> PreferenceValue? {
        try locked(exclusive: false) { () throws(ProtectionError) in try load(via: .preferencesRead)[key] }
    }

    /// Every key and value.
    public func dictionaryRepresentation() throws(ProtectionError) -> [String: PreferenceValue] {
        try locked(exclusive: false) { () throws(ProtectionError) in try load(via: .preferencesRead) }
    }

    /// Sets `value` for `key` (nil removes it) and saves atomically and durably.
    public func set(_ value: PreferenceValue?, forKey key: String) throws(ProtectionError) {
        try update { $0[key] = value }
    }

    /// Applies `change` to all values as one atomic read-modify-write (other threads and processes wait).
    public func update(_ change: (inout [String: PreferenceValue]) -> Void) throws(ProtectionError) {
        try locked(exclusive: true) { () throws(ProtectionError) in
            var values = try load(via: .preferencesWrite)
            change(&values)
            let bytes = PreferenceCoding.encode(values)
            try container.coordinated(path, .replacing, "save") { () throws(ProtectionError) in
                try container.files.write(bytes, to: path, protection: container.policy.defaultClass(for: .preferences), via: .preferencesWrite)
            }
        }
    }

    public func removeValue(forKey key: String) throws(ProtectionError) { try set(nil, forKey: key) }
    public func set(_ v: Bool, forKey key: String) throws(ProtectionError) { try set(.bool(v), forKey: key) }
    public func set(_ v: Int, forKey key: String) throws(ProtectionError) { try set(.integer(Int64(v)), forKey: key) }
    public func set(_ v: Double, forKey key: String) throws(ProtectionError) { try set(.double(v), forKey: key) }
    public func set(_ v: String, forKey key: String) throws(ProtectionError) { try set(.string(v), forKey: key) }
    public func set(_ v: [UInt8], forKey key: String) throws(ProtectionError) { try set(.data(v), forKey: key) }

    /// The Boolean for `key`; nil when absent or of another kind.
    public func bool(forKey key: String) throws(ProtectionError) -> Bool? {
        if case .bool(let v)? = try value(forKey: key) { return v }
        return nil
    }

    /// The integer for `key`; nil when absent or of another kind.
    public func integer(forKey key: String) throws(ProtectionError) -> Int? {
        if case .integer(let v)? = try value(forKey: key) { return Int(exactly: v) }
        return nil
    }

    /// The number for `key` (integers convert); nil when absent or of another kind.
    public func double(forKey key: String) throws(ProtectionError) -> Double? {
        switch try value(forKey: key) {
        case .double(let v)?: v
        case .integer(let v)?: Double(v)
        default: nil
        }
    }

    /// The string for `key`; nil when absent or of another kind.
    public func string(forKey key: String) throws(ProtectionError) -> String? {
        if case .string(let v)? = try value(forKey: key) { return v }
        return nil
    }

    /// The bytes for `key`; nil when absent or of another kind.
    public func data(forKey key: String) throws(ProtectionError) -> [UInt8]? {
        if case .data(let v)? = try value(forKey: key) { return v }
        return nil
    }

    // MARK: Internals

    /// The saved values; none before the first save.
    private func load(via: ProtectedDataEntryPoint) throws(ProtectionError) -> [String: PreferenceValue] {
        let bytes: [UInt8]
        do throws(ProtectionError) {
            bytes = try container.coordinated(path, .reading, "read") { () throws(ProtectionError) in try container.files.read(path, via: via) }
        } catch {
            if error.code == .notFound { return [:] }
            throw container.confinement.failure(error, "read", path)
        }
        guard let values = PreferenceCoding.decode(bytes) else {
            throw ProtectionError(.corruptHeader, "unable to read the preferences '\(path)': they are not in the preferences format; remove the file to start afresh", path: path)
        }
        return values
    }

    private func locked<R>(exclusive: Bool, _ body: () throws(ProtectionError) -> R) throws(ProtectionError) -> R {
        let fd: Int32
        do throws(SystemError) { fd = try container.confinement.open(lockPath, flags: O_RDWR | O_CREAT | O_NOFOLLOW, mode: 0o600) } catch {
            throw container.confinement.failure(error.errno, "lock", lockPath)
        }
        defer { container.confinement.io.close(fd) }
        switch OFDLock.waitSet(fd: fd, exclusive ? .exclusive : .shared, start: 0, length: 0) {  // retries EINTR
        case .done: return try body()
        case .wouldBlock: throw .errno(EAGAIN, "lock", lockPath)
        case .failed(let code): throw .errno(code, "lock", lockPath)
        }
    }
}

extension Container {
    /// The preferences store `name` in `Library/Preferences/` (the analogue of `UserDefaults(suiteName:)`).
    /// - Throws: `.invalidArgument` for a name that is not a plain file name.
    public func preferences(named name: String = "standard") throws(ProtectionError) -> Preferences {
        try Preferences(container: self, name: name)
    }
}

/// The preferences file's plaintext: magic `DPPREFS1`, then one dictionary, tag-length-value, little-endian.
enum PreferenceCoding {
    static let magic = Array("DPPREFS1".utf8)

    static func encode(_ values: [String: PreferenceValue]) -> [UInt8] {
        var out = magic
        put(.dictionary(values), &out)
        return out
    }

    static func decode(_ bytes: [UInt8]) -> [String: PreferenceValue]? {
        guard bytes.starts(with: magic) else { return nil }
        var r = Reader(bytes: bytes, at: magic.count)
        guard case .dictionary(let d)? = r.value(depth: 0), r.at == bytes.count else { return nil }
        return d
    }

    private static func put(_ v: PreferenceValue, _ out: inout [UInt8]) {
        func u32(_ n: Int) { withUnsafeBytes(of: UInt32(n).littleEndian) { out += $0 } }
        func str(_ s: String) { u32(s.utf8.count); out += s.utf8 }
        switch v {
        case .bool(let b): out += [0, b ? 1 : 0]
        case .integer(let i): out.append(1); withUnsafeBytes(of: i.littleEndian) { out += $0 }
        case .double(let d): out.append(2); withUnsafeBytes(of: d.bitPattern.littleEndian) { out += $0 }
        case .string(let s): out.append(3); str(s)
        case .data(let d): out.append(4); u32(d.count); out += d
        case .array(let a): out.append(5); u32(a.count); for e in a { put(e, &out) }
        case .date(let t): out.append(7); withUnsafeBytes(of: t.bitPattern.littleEndian) { out += $0 }
        case .dictionary(let d):
            out.append(6); u32(d.count)
            for k in d.keys.sorted() { str(k); put(d[k]!, &out) }
        }
    }

    private struct Reader {
        let bytes: [UInt8]
        var at: Int

        mutating func take(_ n: Int) -> ArraySlice<UInt8>? {
            guard n >= 0, bytes.count - at >= n else { return nil }
            defer { at += n }
            return bytes[at..<at + n]
        }

        mutating func u64() -> UInt64? { take(8).map { $0.reversed().reduce(0) { $0 << 8 | UInt64($1) } } }
        mutating func u32() -> Int? { take(4).map { Int($0.reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }) } }
        mutating func string() -> String? { u32().flatMap { take($0) }.flatMap { String(validating: Array($0), as: UTF8.self) } }

        mutating func value(depth: Int) -> PreferenceValue? {
            guard depth < 64, let tag = take(1)?.first else { return nil }
            switch tag {
            case 0: return take(1).map { .bool($0.first! != 0) }
            case 1: return u64().map { .integer(Int64(bitPattern: $0)) }
            case 2: return u64().map { .double(Double(bitPattern: $0)) }
            case 3: return string().map { .string($0) }
            case 7: return u64().map { .date(Double(bitPattern: $0)) }
            case 4: return u32().flatMap { take($0) }.map { .data(Array($0)) }
            case 5:
                guard let n = u32(), n <= bytes.count else { return nil }
                var a: [PreferenceValue] = []
                for _ in 0..<n { guard let v = value(depth: depth + 1) else { return nil }; a.append(v) }
                return .array(a)
            case 6:
                guard let n = u32(), n <= bytes.count else { return nil }
                var d: [String: PreferenceValue] = [:]
                for _ in 0..<n {
                    guard let k = string(), let v = value(depth: depth + 1) else { return nil }
                    d[k] = v
                }
                return .dictionary(d)
            default: return nil
            }
        }
    }
}
