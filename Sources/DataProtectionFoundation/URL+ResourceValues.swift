// `URLResourceValues`' Data Protection keys on URLs in the app container: `isExcludedFromBackup` and `fileProtection`,
// get and set as iOS code does (`var v = URLResourceValues(); v.isExcludedFromBackup = true; try url.setResourceValues(v)`).
//
// Foundation on Linux declares `URL.setResourceValues(_:)` for its own `URLResourceValues` and keeps neither key. This
// file's type is another one, so a port adds `typealias URLResourceValues = ProtectedResourceValues` to a file and its
// `url.setResourceValues(values)` resolves here by the argument's type: the body stays as on iOS.
import DataProtection
import Foundation

/// Apple's name for a file's class in resource values (Foundation on Linux does not declare it): the same constants,
/// `.complete`, `.completeUnlessOpen`, `.completeUntilFirstUserAuthentication`, `.none`.
public typealias URLFileProtection = FileProtectionType

extension URLResourceKey {
    /// Apple's key for a file's class (Foundation on Linux does not declare it).
    public static let fileProtectionKey = URLResourceKey(rawValue: "NSURLFileProtectionKey")
}

/// The resource values of a URL in the app container that Data Protection gives meaning to (iOS: `URLResourceValues`).
public struct ProtectedResourceValues: Sendable {
    /// Whether backups leave the item out (iOS: `isExcludedFromBackup`); nil leaves it as it is.
    ///
    /// Read: true also when a directory above it, or its container directory's policy (Caches, tmp), leaves it out.
    public var isExcludedFromBackup: Bool?
    /// The file's protection class (iOS: `fileProtection`); nil leaves it as it is, and reads nil for a plain file.
    public var fileProtection: URLFileProtection?

    /// No values (iOS: `URLResourceValues()`).
    public init() {}
}

extension URL {
    /// Sets the values that are not nil (iOS: `setResourceValues(_:)`).
    ///
    /// `isExcludedFromBackup` forwards to `Container.setExcludedFromBackup(_:for:)` (an extended attribute that the
    /// library's atomic replaces keep); `fileProtection` to `Container.setProtection(_:of:)` (the file's key is
    /// rewrapped, its contents not re-encrypted).
    /// - Throws: `CocoaError` as iOS reports it (`.fileWriteNoPermission` outside the container, in the bundle, or
    ///   while the file's class is locked), with the `ProtectionError` underneath.
    public mutating func setResourceValues(_ values: ProtectedResourceValues) throws(CocoaError) {
        let url = self, c = try AppContext.resolve(for: url, writing: true).container
        do throws(ProtectionError) {
            let path = try c.relativePath(of: url)
            if let excluded = values.isExcludedFromBackup { try c.setExcludedFromBackup(excluded, for: path) }
            if let type = values.fileProtection { _ = try c.setProtection(ProtectionClass(type), of: path) }
        } catch { throw CocoaError(error, writing: true, url: url) }
    }

    /// The Data Protection values of the item (iOS: `resourceValues(forKeys:)` with `.isExcludedFromBackupKey`,
    /// `.fileProtectionKey`); named apart because Foundation's `resourceValues(forKeys:)` differs only by its result.
    /// - Throws: `.fileReadNoSuchFile`, `.fileReadNoPermission` outside the container.
    public func protectedResourceValues(forKeys keys: Set<URLResourceKey>) throws(CocoaError) -> ProtectedResourceValues {
        let c = try AppContext.resolve(for: self, writing: false).container
        var v = ProtectedResourceValues()
        do throws(ProtectionError) {
            let path = try c.relativePath(of: self)
            if keys.contains(.isExcludedFromBackupKey) { v.isExcludedFromBackup = try c.isExcludedFromBackup(path) }
            if keys.contains(.fileProtectionKey), let info = try? c.info(path) {
                v.fileProtection = info.protectionClass.fileProtectionType
            }
        } catch { throw CocoaError(error, writing: false, url: self) }
        return v
    }
}
