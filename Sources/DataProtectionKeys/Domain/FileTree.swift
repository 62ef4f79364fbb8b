#if canImport(Glibc)
import SystemLayer
import Glibc
#endif

/// Walks a file or directory tree, calling back for each regular file (symbolic links are not followed).
package enum FileTree {
    /// Calls `visit` for `path` if it is a regular file, or for every regular file below it if it is a directory.
    /// - Throws: `.notFound` for a missing `path`; `.io` for an unreadable directory; whatever `visit` throws.
    package static func walk(_ path: String, _ visit: (String) throws(ProtectionError) -> Void) throws(ProtectionError) {
        let st: stat
        do throws(SystemError) { st = try io.linkStatus(path) } catch { throw ProtectionError.errno(error.errno, "inspect", path) }
        switch st.st_mode & S_IFMT {
        case S_IFREG: try visit(path)
        case S_IFDIR:
            for n in try names(in: path) { try walk(path == "/" ? "/\(n)" : "\(path)/\(n)", visit) }
        default: return
        }
    }

    /// The names in directory `path`, sorted, without "." and "..".
    /// - Throws: `.notFound`, `.io` if it cannot be listed.
    package static func names(in path: String) throws(ProtectionError) -> [String] {
        do throws(SystemError) { return try io.directoryNames(path).sorted() } catch { throw ProtectionError.errno(error.errno, "list", path) }
    }

    /// The real calls: a walk lists what is there (rotation and recovery open each file through their own seam).
    private static let io = SystemFileIO()
}
