// `Bundle`'s resource look-ups on the app container's sealed bundle: every resource returned has just been checked
// against the seal (`SealedBundle.verifiedPath(of:)`, the one check), so a tampered resource is never handed out.
import DataProtection
import Foundation

/// The resource calls of `Bundle` on the app container's sealed bundle (iOS: `Bundle.main`).
///
/// Apple's non-throwing forms (`url(forResource:withExtension:)`, `path(forResource:ofType:)`) return nil for a
/// missing *or tampered* resource; the throwing `verifiedURL(forResource:withExtension:subdirectory:)` says which, as
/// a `CocoaError` (`.fileReadNoSuchFile`, `.fileReadCorruptFile`) with the `ProtectionError` underneath. Differs from
/// Apple: no `.lproj` localization search; resources are looked up by their path in the bundle.
///
/// To pin the signer, open the context's container with `Container.OpenOptions.launch(trusting:)` (or
/// `OpenOptions(trustedBundleKey:)`) and pass it to `AppContext(domain:container:)`; without a pinned key the seal
/// detects damage but not a bundle re-sealed by someone who can write it.
public struct ProtectedBundle: Sendable {
    private let explicit: AppContext?

    /// The bundle of the current app context (`AppContext.current`, resolved at each call).
    public static var main: ProtectedBundle { ProtectedBundle() }

    /// The bundle of `context`'s container, or of the current context when nil.
    public init(context: AppContext? = nil) { explicit = context }

    /// The bundle directory's URL; nil without an app context.
    public var bundleURL: URL? { context.map { URL(fileURLWithPath: $0.container.path(for: .bundle), isDirectory: true) } }
    /// The bundle directory's path; nil without an app context.
    public var bundlePath: String? { bundleURL?.path }
    /// Where resources live: the bundle directory itself, as in an iOS app bundle.
    public var resourceURL: URL? { bundleURL }
    /// The path of `resourceURL`.
    public var resourcePath: String? { bundlePath }

    private var context: AppContext? { explicit ?? AppContext.current }

    /// The URL of a sealed resource, checked against the seal now; nil when missing or tampered.
    /// - Parameters:
    ///   - name: the file name without extension; nil for the first sealed file with `ext`.
    ///   - ext: the extension (with or without a leading dot); nil or empty for `name` as it is.
    ///   - subpath: a directory inside the bundle.
    public func url(forResource name: String?, withExtension ext: String?, subdirectory subpath: String? = nil) -> URL? {
        try? verifiedURL(forResource: name, withExtension: ext, subdirectory: subpath)
    }

    /// The path of a sealed resource, checked against the seal now; nil when missing or tampered.
    public func path(forResource name: String?, ofType ext: String?, inDirectory subpath: String? = nil) -> String? {
        url(forResource: name, withExtension: ext, subdirectory: subpath)?.path
    }

    /// The URLs of every sealed resource with `ext` in `subpath`, each checked against the seal; tampered ones are left out.
    public func urls(forResourcesWithExtension ext: String?, subdirectory subpath: String? = nil) -> [URL]? {
        guard let context, let bundle = try? SealedBundle(context.container) else { return nil }
        let names = bundle.resourcePaths.filter { Self.matches($0, name: nil, ext: ext, subpath: subpath) }
        return names.compactMap { try? URL(fileURLWithPath: bundle.verifiedPath(of: $0)) }
    }

    /// The URL of a sealed resource, checked against the seal now.
    /// - Throws: `CocoaError(.fileReadNoSuchFile)` when the seal lists no such resource (or there is no app context);
    ///   `CocoaError(.fileReadCorruptFile)` when the bundle or the resource does not match its seal (a modified file, a
    ///   link or FIFO in its place), with the `ProtectionError` (`.bundleTampered`, which names the fix) underneath.
    public func verifiedURL(forResource name: String?, withExtension ext: String?, subdirectory subpath: String? = nil) throws(CocoaError) -> URL {
        let wanted = [subpath, name.map { $0 + Self.suffix(ext) }].compactMap { $0 }.joined(separator: "/")
        let c: AppContext
        if let explicit { c = explicit } else { c = try AppContext.resolve(for: URL(fileURLWithPath: wanted), writing: false) }
        do throws(ProtectionError) {
            let bundle = try SealedBundle(c.container)
            guard let found = bundle.resourcePaths.first(where: { Self.matches($0, name: name, ext: ext, subpath: subpath) }) else {
                throw ProtectionError(.notFound, "unable to find the resource '\(wanted)' in the bundle '\(bundle.path)': its seal lists no such file; add it to the bundle and seal it again (`dpctl bundle seal`)", path: bundle.path + "/" + wanted)
            }
            return URL(fileURLWithPath: try bundle.verifiedPath(of: found))
        } catch {
            throw CocoaError(error, writing: false, url: URL(fileURLWithPath: c.container.path(for: .bundle) + "/" + wanted))
        }
    }

    /// `.ext` for a non-empty extension (a leading dot is accepted), else nothing.
    private static func suffix(_ ext: String?) -> String {
        guard let e = ext, !e.isEmpty else { return "" }
        return e.hasPrefix(".") ? e : "." + e
    }

    /// Whether the sealed path `p` is `name` + `ext` directly inside `subpath` (any name when `name` is nil).
    private static func matches(_ p: String, name: String?, ext: String?, subpath: String?) -> Bool {
        let dir = subpath.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }.flatMap { $0.isEmpty ? nil : $0 }
        let prefix = dir.map { $0 + "/" } ?? ""
        guard p.hasPrefix(prefix) else { return false }
        let file = p.dropFirst(prefix.count)
        guard !file.contains("/") else { return false }
        if let name { return file == name + suffix(ext) }
        let s = suffix(ext)
        return s.isEmpty || (file.hasSuffix(s) && file.count > s.count)
    }
}
