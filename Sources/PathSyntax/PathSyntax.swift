// Path syntax on bytes: a separator is the byte "/", and two paths are the same when their bytes are, as the kernel
// sees them.
//
// `String` searches and compares by `Character` (extended grapheme cluster) under canonical equivalence. A "/" after
// a Unicode prepend mark (U+0600 …) belongs to the same Character as the mark, and a "/" before a combining mark
// (U+0301 …) to the same Character as that mark: `lastIndex(of: "/")`, `split(separator: "/")`, `hasPrefix(d + "/")`
// and `hasSuffix("/")` do not see it. And "é" (U+00E9) == "e\u{301}" although they are two names to the kernel.
// Splitting a path that way hands the kernel a "last component" that still holds a separator, which `unlinkat`,
// `renameat`, `mkdirat` and `fstatat` then resolve, following any symbolic link in it; comparing paths that way
// takes two directories for one. Every path in the package is therefore taken apart and compared here, at the byte.

/// The directory part of `path` ("." for a bare name, "/" for a name in the root).
package func parentDirectory(of path: String) -> String {
    let u = path.utf8
    guard let slash = u.lastIndex(of: UInt8(ascii: "/")) else { return "." }
    return slash == u.startIndex ? "/" : String(decoding: u[..<slash], as: UTF8.self)
}

/// The bytes after the last "/" of `path` (all of it without one; empty when it ends in "/").
package func lastComponent(of path: String) -> String {
    let u = path.utf8
    guard let slash = u.lastIndex(of: UInt8(ascii: "/")) else { return path }
    return String(decoding: u[u.index(after: slash)...], as: UTF8.self)
}

/// The components of `path` between separators, empty ones left out: "/a//b/" gives ["a", "b"].
package func pathComponents(of path: String) -> [String] {
    path.utf8.split(separator: UInt8(ascii: "/")).map { String(decoding: $0, as: UTF8.self) }
}

/// Whether `path` starts at the root.
package func isAbsolutePath(_ path: String) -> Bool { path.utf8.first == UInt8(ascii: "/") }

/// `path` without trailing separators; a path of separators only keeps one.
package func droppingTrailingSeparators(_ path: String) -> String {
    guard !path.isEmpty else { return path }
    let u = path.utf8
    var end = u.endIndex
    while end > u.index(after: u.startIndex), u[u.index(before: end)] == UInt8(ascii: "/") { end = u.index(before: end) }
    return end == u.endIndex ? path : String(decoding: u[..<end], as: UTF8.self)
}

/// Whether `a` and `b` are byte for byte the same path (no normalization of either).
package func samePath(_ a: String, _ b: String) -> Bool { a.utf8.elementsEqual(b.utf8) }

/// The part of `path` below `directory` ("a/b" for "/d/a/b" in "/d"); nil unless `path` lies strictly inside it.
///
/// Both are taken as written: neither is normalized, so "/d/../x" counts as inside "/d".
package func relativePath(of path: String, inside directory: String) -> String? {
    let p = path.utf8, d = directory.utf8
    guard p.starts(with: d) else { return nil }
    let rest = p.dropFirst(d.count)
    if d.last == UInt8(ascii: "/") { return rest.isEmpty ? nil : String(decoding: rest, as: UTF8.self) }
    guard rest.first == UInt8(ascii: "/"), rest.count > 1 else { return nil }
    return String(decoding: rest.dropFirst(), as: UTF8.self)
}

/// Whether `path` lies strictly inside `directory` ("/d/a" is inside "/d" and inside "/"; "/dx" is not inside "/d").
package func isPath(_ path: String, inside directory: String) -> Bool {
    relativePath(of: path, inside: directory) != nil
}

/// A path as a dictionary key: equal and hashed by its bytes, where `String` is by canonical equivalence.
package struct PathKey: Hashable, Sendable, CustomStringConvertible {
    package let path: String

    package init(_ path: String) { self.path = path }

    package static func == (a: PathKey, b: PathKey) -> Bool { samePath(a.path, b.path) }

    package func hash(into hasher: inout Hasher) {
        for byte in path.utf8 { hasher.combine(byte) }
    }

    package var description: String { path }
}
