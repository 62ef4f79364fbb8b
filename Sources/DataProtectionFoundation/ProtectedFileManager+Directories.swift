// `FileManager`'s directory calls on the app container: listing, creating and removing by URL, as iOS code makes them
// on `FileManager.default` (names and kinds only: no call here reads or writes protected contents).
import DataProtection
import Foundation

extension ProtectedFileManager {
    /// The URLs of the items in the directory at `url` (iOS: `contentsOfDirectory(at:includingPropertiesForKeys:options:)`).
    ///
    /// Forwards to `Container.contentsOfDirectory(_:includingHiddenFiles:)`, which never follows a symbolic link.
    /// - Parameters:
    ///   - url: a directory inside the app container.
    ///   - keys: ignored (nothing is prefetched; iOS treats them as a hint too).
    ///   - mask: `.skipsHiddenFiles` leaves out names starting with a dot; the other options change nothing (the
    ///     listing is never recursive).
    /// - Throws: `.fileReadNoSuchFile` for a missing directory, `.fileReadNoPermission` outside the container.
    public func contentsOfDirectory(
        at url: URL, includingPropertiesForKeys keys: [URLResourceKey]?, options mask: FileManager.DirectoryEnumerationOptions = []
    ) throws(CocoaError) -> [URL] {
        try inContainer(url, writing: false) { (c, relative) throws(ProtectionError) in
            try c.contentsOfDirectory(relative, includingHiddenFiles: !mask.contains(.skipsHiddenFiles)).map {
                URL(fileURLWithPath: c.root + "/" + $0.path, isDirectory: $0.kind == .directory)
            }
        }
    }

    /// The names of the items in the directory at `path` (iOS: `contentsOfDirectory(atPath:)`), hidden ones included.
    public func contentsOfDirectory(atPath path: String) throws(CocoaError) -> [String] {
        try inContainer(URL(fileURLWithPath: path), writing: false) { (c, relative) throws(ProtectionError) in
            try c.contentsOfDirectory(relative, includingHiddenFiles: true).map(\.name)
        }
    }

    /// Creates the directory at `url` (iOS: `createDirectory(at:withIntermediateDirectories:attributes:)`).
    /// - Parameter attributes: ignored; a directory has no class of its own (its files get the container
    ///   directory's default).
    /// - Throws: `.fileWriteFileExists` when something is there and `createIntermediates` is false,
    ///   `.fileWriteNoPermission` outside the container or in a read-only directory.
    public func createDirectory(at url: URL, withIntermediateDirectories createIntermediates: Bool, attributes: [FileAttributeKey: Any]? = nil) throws(CocoaError) {
        try inContainer(url, writing: true) { (c, relative) throws(ProtectionError) in
            try c.createDirectory(relative, withIntermediateDirectories: createIntermediates)
        }
    }

    /// Removes the item at `url` (iOS: `removeItem(at:)`).
    public func removeItem(at url: URL) throws(CocoaError) {
        try inContainer(url, writing: true) { (c, relative) throws(ProtectionError) in try c.removeItem(relative) }
    }

    /// Moves the item at `srcURL` to `dstURL` within the container (iOS: `moveItem(at:to:)`); a protected file keeps
    /// its class and key (it is renamed, not rewritten).
    /// - Throws: `.fileWriteFileExists` when something is at `dstURL`, `.fileNoSuchFile` when nothing is at `srcURL`,
    ///   `.fileWriteNoPermission` outside the container.
    public func moveItem(at srcURL: URL, to dstURL: URL) throws(CocoaError) {
        let destination = try inContainer(dstURL, writing: true) { (_, relative) throws(ProtectionError) in relative }
        try inContainer(srcURL, writing: true) { (c, relative) throws(ProtectionError) in try c.moveItem(from: relative, to: destination) }
    }

    /// Runs `body` with the container and `url`'s path inside it, reporting failures as Foundation does.
    private func inContainer<R>(_ url: URL, writing: Bool, _ body: (Container, String) throws(ProtectionError) -> R) throws(CocoaError) -> R {
        let c: Container
        if let explicit { c = explicit.container } else { c = try AppContext.resolve(for: url, writing: writing).container }
        do throws(ProtectionError) { return try body(c, try c.relativePath(of: url)) } catch { throw CocoaError(error, writing: writing, url: url) }
    }
}
