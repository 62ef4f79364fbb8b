import DataProtectionKeys
import DataProtectionFiles

extension Container {
    /// Gives the file at `path` the class `protection`: rewraps a protected file's key, or protects a plain file in
    /// place (the analogue of `FileManager.setAttributes([.protectionKey: …], ofItemAtPath:)`).
    ///
    /// The directory's write rule applies (the bundle, the Inbox and Preferences refuse), and the change runs under a
    /// coordinated replace, so a reader in another process sees the file before or after, never between.
    /// - Parameters:
    ///   - protection: the new class.
    ///   - path: a path beneath the container's root (relative, or absolute under it).
    /// - Returns: whether anything changed.
    /// - Throws: `.readOnly`, `.escapesContainer`; what `ProtectedFiles.rewrap(_:to:)` and `protectInPlace(_:as:)` throw
    ///   (`.locked` when the file's current class, or `protection` for a plain file, is locked).
    @discardableResult
    public func setProtection(_ protection: ProtectionClass, of path: String) throws(ProtectionError) -> Bool {
        _ = try checkWritable(path, "change the class of")
        return try coordinated(path, .replacing, "change the class of") { () throws(ProtectionError) -> Bool in
            do throws(ProtectionError) {
                do throws(ProtectionError) {
                    return try files.rewrap(path, to: protection) != .unchanged
                } catch where error.code == .notProtected {
                    return try files.protectInPlace(path, as: protection)
                }
            } catch { throw confinement.failure(error, "change the class of", path) }
        }
    }
}
