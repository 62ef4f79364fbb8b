import SystemLayer
import ProtectionCrypto

#if canImport(Glibc)
import Glibc
#endif
internal import PathSyntax

/// Plain (unprotected) files and whole trees beneath the root: the container's own metadata, tags and purges.
extension Confinement {
    /// Reads the whole plain file at `path` (at most `limit` bytes).
    func readFile(_ path: String, limit: Int = 16 << 20) throws(SystemError) -> [UInt8] {
        let fd = try open(path, flags: O_RDONLY | O_NOFOLLOW)
        defer { io.close(fd) }
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = try buf.withUnsafeMutableBytes { b in Result { () throws(SystemError) in try io.readOnce(fd, into: b, at: Int64(out.count)) } }.get()
            if n == 0 { return out }
            out += buf[..<n]
            guard out.count <= limit else { throw SystemError(EFBIG) }
        }
    }

    /// Replaces the plain file at `path` atomically: temporary file, fsync, rename, directory fsync.
    func writeFileAtomically(_ path: String, _ bytes: [UInt8], mode: mode_t = 0o600) throws(SystemError) {
        let suffix = (try? SecureRandom.bytes(6))?.map { String($0, radix: 16) }.joined() ?? String(getpid())
        let dir = parentDirectory(of: path)
        let tmp = (dir == "." ? "" : dir + "/") + ".\(lastComponent(of: path)).dp-\(suffix).tmp"
        let fd = try open(tmp, flags: O_WRONLY | O_CREAT | O_EXCL, mode: mode)
        do throws(SystemError) {
            try bytes.span.bytes.withUnsafeBytes { (b) throws(SystemError) in try io.writeFully(fd, from: b, at: 0) }
            try io.fsync(fd)
            io.close(fd)
            try rename(tmp, to: path, replacing: true)
            try syncDirectory(dir)
        } catch {
            io.close(fd)
            try? remove(tmp)
            throw error
        }
    }

    /// fsyncs the directory `path`, so a create or rename in it is durable.
    func syncDirectory(_ path: String) throws(SystemError) {
        let fd = try open(path, flags: O_RDONLY | O_DIRECTORY)
        defer { io.close(fd) }
        try io.fsync(fd)
    }

    /// Removes `path` and, if it is a directory, everything inside it, never following a symbolic link.
    func removeTree(_ path: String) throws(SystemError) {
        let st = try status(path)
        if st.st_mode & S_IFMT == S_IFDIR {
            for (name, _) in try entries(path, noSymlinks: true) { try removeTree(path + "/" + name) }
            try remove(path, directory: true)
        } else {
            try remove(path)
        }
    }

    /// Every item beneath the directory `path` (depth first, children before their directory), never following a symbolic link.
    func walk(_ path: String, _ visit: (String, stat) throws(SystemError) -> Void) throws(SystemError) {
        for (name, st) in try entries(path, noSymlinks: true) {
            let child = path == "." ? name : path + "/" + name
            if st.st_mode & S_IFMT == S_IFDIR { try walk(child, visit) }
            try visit(child, st)
        }
    }
}
