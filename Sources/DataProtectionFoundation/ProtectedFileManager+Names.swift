// The names iOS code shows and builds paths from: `FileManager.displayName(atPath:)` and `NSHomeDirectory()`, on the
// app container (no call here reads or writes protected contents).
import DataProtection
import Foundation

extension ProtectedFileManager {
    /// The name to show a person for the item at `path` (iOS: `displayName(atPath:)`).
    ///
    /// The rule, in full (Apple's comes from LaunchServices and the Finder's "show all extensions" setting; iOS shows
    /// the extension of no type it knows and hides the others):
    /// 1. the name is the path's last component (trailing slashes ignored; `/` for the root);
    /// 2. its extension is the text after its last dot, when there is text before that dot too (`.json` and
    ///    `notes.` have none);
    /// 3. the extension is hidden when the library's type table knows it (`UTType(filenameExtension:)` is not nil,
    ///    the types Apple declares), case-insensitively, unless the item is a directory: a folder's name is shown whole
    ///    (Apple hides the extension of packages such as `.app` only, and a container holds none);
    /// 4. nothing is localized (no `.localized` folder names, no per-file "hide extension" flag).
    ///
    /// So `Documents/report.pdf` → `report`, `archive.tar.gz` → `archive.tar`, `notes.draft` → `notes.draft` (no
    /// type has `draft`), `.json` → `.json`, a folder `Photos.png` → `Photos.png`. An item that is missing or outside
    /// the container is named by rules 1–3 as a file (Apple also names a missing item by its path).
    public func displayName(atPath path: String) -> String {
        let name = Self.lastComponent(path)
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex, name.index(after: dot) != name.endIndex else { return name }
        guard UTType(filenameExtension: String(name[name.index(after: dot)...]), conformingTo: .item) != nil else { return name }
        // A folder keeps its whole name; the kind comes from the container's listing (a link is never followed).
        if let item = try? item(atPath: path), item.kind == .directory { return name }
        return String(name[..<dot])
    }

    /// The app container's root, the app's home (iOS: `NSHomeDirectory()`, the sandbox's root): `Documents/`,
    /// `Library/` and `tmp/` are beneath it.
    /// - Throws: `.fileReadInvalidFileName` with `.invalidArgument` underneath (naming `AppContext.bootstrap`) when there is
    ///   no app context.
    public var homeDirectoryForCurrentUser: URL {
        get throws(CocoaError) { URL(fileURLWithPath: try context(nil, writing: false).container.root, isDirectory: true) }
    }

    /// The last path component of `path`, trailing slashes ignored; `/` for the root, `path` itself when empty.
    static func lastComponent(_ path: String) -> String {
        let trimmed = path.reversed().drop { $0 == "/" }.reversed()
        if trimmed.isEmpty { return path.isEmpty ? path : "/" }
        return String(String(trimmed).split(separator: "/", omittingEmptySubsequences: false).last!)
    }
}

/// The app container's root path, the app's home (iOS: `NSHomeDirectory()`, which returns the sandbox's root).
///
/// Foundation on Linux declares `NSHomeDirectory()` too (the process's home), and another module cannot take that name
/// over: a second `NSHomeDirectory()` here would make every call ambiguous. Port the call by renaming it, or keep the
/// body unchanged with one file-private line beside the `typealias` lines (a file's own declaration wins over an
/// imported one): `fileprivate func NSHomeDirectory() -> String { ProtectedHomeDirectory() }`. An unported call gives a
/// path outside the container, where every protected call of this layer is refused (never a silent plaintext write).
/// - Returns: the current app context's container root; without a context, Foundation's `NSHomeDirectory()`, where
///   protected calls are refused with "no app context".
public func ProtectedHomeDirectory() -> String {
    AppContext.current?.container.root ?? NSHomeDirectory()
}
