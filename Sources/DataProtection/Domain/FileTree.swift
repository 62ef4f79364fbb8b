#if canImport(Glibc)
import SystemLayer
import Glibc
#endif

/// Walks a file or directory tree, calling back for each regular file (symbolic links are not followed).
enum FileTree {
    /// Calls `visit` for `path` if it is a regular file, or for every regular file below it if it is a directory.
    /// - Throws: `.notFound` for a missing `path`; `.io` for an unreadable directory; whatever `visit` throws.
    static func walk(_ path: String, _ visit: (String) throws(ProtectionError) -> Void) throws(ProtectionError) {
        var st = stat()
        guard lstat(path, &st) == 0 else { throw ProtectionError.errno(errno, "inspect", path) }
        switch st.st_mode & S_IFMT {
        case S_IFREG: try visit(path)
        case S_IFDIR:
            for n in try names(in: path) { try walk(path == "/" ? "/\(n)" : "\(path)/\(n)", visit) }
        default: return
        }
    }

    /// The names in directory `path`, sorted, without "." and "..".
    /// - Throws: `.notFound`, `.io` if it cannot be listed.
    static func names(in path: String) throws(ProtectionError) -> [String] {
        guard let dir = opendir(path) else { throw ProtectionError.errno(errno, "list", path) }
        defer { closedir(dir) }
        var names: [String] = []
        while let e = readdir(dir) {
            let name = entryName(e)
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }
}
