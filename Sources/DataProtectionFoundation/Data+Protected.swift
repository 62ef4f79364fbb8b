// `Data`'s file forms on protected files in the app container: what `data.write(to:)` and `Data(contentsOf:)` do on iOS.
//
// Foundation on Linux has `Data.write(to:options:)` and `Data(contentsOf:options:)` too, and ignores the protection
// options: an unported `data.write(to: url, options: .completeFileProtection)` would write plaintext. Swift does not let
// one module shadow another's members, so this module closes the trap by overload resolution, in every file that
// imports it:
// - `data.write(to:)` and `Data(contentsOf:)` resolve to the one-parameter forms below (Swift prefers the overload that
//   needs no defaulted argument), so they write and read protected files;
// - `data.write(to:options:)` meets a second, identical candidate below, so it no longer compiles ("ambiguous use of
//   'write(to:options:)'"): it cannot write plaintext silently. Port it to `write(protectedTo:options:)`, the same call.
// A file that does not import this module keeps Foundation's meaning; `dpctl audit` (to come) finds what such code
// left in plaintext.
import DataProtection
import Foundation

extension Data {
    /// Writes the bytes to a protected file at `url` in the app container, with its directory's default class,
    /// atomically (iOS: `data.write(to:)`).
    /// - Throws: `CocoaError` as iOS reports it (`.fileWriteNoPermission` while the class is locked or outside the
    ///   container), with the `ProtectionError` underneath.
    public func write(to url: URL) throws(CocoaError) {
        try write(protectedTo: url, options: [])
    }

    /// Writes the bytes to a protected file at `url` with the class `options` names (iOS: `data.write(to:options:)`).
    ///
    /// The same as `write(protectedTo:options:)`. It exists so that this call, which Foundation on Linux also declares
    /// and answers with plaintext, is ambiguous (a compile error) in a file that imports this module.
    public func write(to url: URL, options: Data.WritingOptions) throws(CocoaError) {
        try write(protectedTo: url, options: options)
    }

    /// Writes the bytes to a protected file at `url` in the app container (iOS: `data.write(to:options:)`).
    ///
    /// Forwards to `Container.write(_:to:options:)` (entry point `containerWrite`; with `.withoutOverwriting`,
    /// `containerCreate`).
    /// - Parameters:
    ///   - url: a file URL inside the app context's container.
    ///   - options: `.completeFileProtection`, `.completeFileProtectionUnlessOpen`,
    ///     `.completeFileProtectionUntilFirstUserAuthentication` or `.noFileProtection` (none: the directory's
    ///     default); `.withoutOverwriting`; `.atomic` (always so here).
    /// - Throws: `CocoaError` as iOS reports it: `.fileWriteNoPermission` for a locked class, a URL outside the
    ///   container or a read-only directory, `.fileWriteFileExists` with `.withoutOverwriting`, `.fileNoSuchFile`
    ///   for a missing directory; `protectionError` is the library's error, which names the fix.
    public func write(protectedTo url: URL, options: Data.WritingOptions = []) throws(CocoaError) {
        let context = try AppContext.resolve(for: url, writing: true)
        do throws(ProtectionError) { try context.container.write(self, to: url, options: options) } catch {
            throw CocoaError(error, writing: true, url: url)
        }
    }

    /// Reads the plaintext of the protected file at `url` in the app container (iOS: `Data(contentsOf:)`).
    ///
    /// Forwards to `Container.read(_:)` (entry point `containerRead`): every chunk is authenticated first.
    /// - Throws: `CocoaError` as iOS reports it: `.fileReadNoPermission` for a locked class or a URL outside the
    ///   container, `.fileReadNoSuchFile`, `.fileReadCorruptFile` for a damaged or plain file.
    public init(contentsOf url: URL) throws(CocoaError) {
        let context = try AppContext.resolve(for: url, writing: false)
        do throws(ProtectionError) { self = try context.container.contents(of: url) } catch {
            throw CocoaError(error, writing: false, url: url)
        }
    }
}
