import DataProtectionKeys
import DataProtectionFiles
import SystemLayer

#if canImport(Glibc)
import Glibc
#endif

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

    /// Replaces the plain file at `path` atomically, through the one atomic replace (AtomicReplace.swift) on the
    /// confined seam: its directory is opened beneath the root, and every other call is relative to it.
    public func writeFileAtomically(_ path: String, _ bytes: [UInt8], mode: mode_t = 0o600) throws(SystemError) {
        let replace = try AtomicReplace(replacing: path, mode: mode, flags: O_WRONLY, io: ConfinedFileIO(confinement: self, base: io))
        defer { io.close(replace.fd) }
        do throws(SystemError) {
            try bytes.span.bytes.withUnsafeBytes { (b) throws(SystemError) in try io.writeFully(replace.fd, from: b, at: 0) }
            try replace.commit(syncingFile: true, syncingDirectory: true, keepingAttributes: false)
        } catch {
            replace.discard()
            throw error
        }
    }

    /// Removes `path` and, if it is a directory, everything inside it, never following a symbolic link.
    public func removeTree(_ path: String) throws(SystemError) {
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
