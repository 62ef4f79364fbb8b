// The container path-resolution fuzz harness, shared by the FuzzPath target (Fuzz/, through this target's
// product) and FuzzRegressionTests, so the replay applies the fuzzer's own oracles. It drives Confinement, which is
// DataProtection's testing SPI; the Fuzz package calls only this harness's public entry points (init, run, remove).
@_spi(Testing) import DataProtection

#if canImport(Glibc)
import Glibc
#endif

/// Builds a tree of directories, files, symbolic links and hard links beneath a container
/// root from an input, then resolves, opens, creates, renames and removes arbitrary paths
/// through `Confinement`, and asserts that nothing escapes the root.
///
/// The input is lines; a layout line works on the current directory (single-component
/// names only, so building the layout can never leave the root):
/// ```
/// d NAME        mkdir            f NAME   a regular file      l NAME TARGET   a symbolic link
/// h NAME        a hard link to the file outside the root      c [NAME]        cd NAME (no NAME: the root)
/// ```
/// and a query line takes any path, resolved beneath the root:
/// ```
/// o PATH  open O_PATH          r PATH  open O_RDONLY         p PATH  the parent directory (withParent)
/// s PATH  status               e PATH  entries               m PATH  makeDirectory
/// w PATH  writeFileAtomically  x PATH  remove                t PATH  removeTree        n FROM TO  rename
/// ```
/// In targets and paths, `@OUT` stands for the absolute path of a directory outside the root
/// and `@ROOT` for the root's. Oracles: every descriptor `Confinement` returns names the root or a
/// place beneath it (`/proc/self/fd`); no descriptor opened for reading is the outside file
/// (through a hard link); and after every input the outside tree is byte for byte unchanged.
public final class PathFuzzHarness {
    let base: String
    let root: String
    public let outside: String
    let secret = Array("outside the container".utf8)
    var secretIdentity = FileIdentity(stat())

    /// Creates `<tmp>/dp-fuzz-path-*/{root, outside/{secret, dir}}`, in /dev/shm where there is one (fsync is free on tmpfs).
    public init() {
        var template = Array("\(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp")/dp-fuzz-path-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template), let real = realpath(made, nil) else { preconditionFailure("mkdtemp: \(errno)") }
        base = String(cString: real)
        free(real)
        root = base + "/root"
        outside = base + "/outside"
        mkdir(root, 0o700)
        mkdir(outside, 0o700)
        mkdir(outside + "/dir", 0o700)
        let fd = open(outside + "/secret", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        _ = secret.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        var st = stat()
        fstat(fd, &st)
        close(fd)
        secretIdentity = FileIdentity(st)
    }

    /// Removes the whole temporary tree.
    public func remove() {
        let fd = open(base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
        if fd >= 0 { clear(fd); close(fd) }
        rmdir(base)
    }

    /// Runs one input; returns nil, or a description of the escape (or other finding).
    public func run(_ input: [UInt8]) -> String? {
        let rootFD = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
        guard rootFD >= 0 else { return "the root vanished: \(errno)" }
        defer { clear(rootFD); close(rootFD) }
        guard let confinement = try? Confinement(root: root) else { return "cannot open the root" }
        var current = dup(rootFD)
        defer { close(current) }
        for raw in input.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true).prefix(64) {
            guard raw.count >= 2, !raw.contains(0) else { continue }
            let op = raw[raw.startIndex]
            let arg = String(decoding: raw.dropFirst(2).prefix(600), as: UTF8.self)
                .replacing("@OUT", with: outside).replacing("@ROOT", with: root)
            let name = String(arg.prefix { $0 != " " })
            let rest = arg.firstIndex(of: " ").map { String(arg[arg.index(after: $0)...]) } ?? ""
            let plain = !name.isEmpty && name != "." && name != ".." && !name.contains("/")
            switch op {
            case UInt8(ascii: "d") where plain: mkdirat(current, name, 0o700)
            case UInt8(ascii: "f") where plain: let fd = openat(current, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600); if fd >= 0 { close(fd) }
            case UInt8(ascii: "l") where plain: symlinkat(rest, current, name)
            case UInt8(ascii: "h") where plain: linkat(AT_FDCWD, outside + "/secret", current, name, 0)
            case UInt8(ascii: "c"):
                let next = plain ? openat(current, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW) : dup(rootFD)
                if next >= 0 { close(current); current = next }
            case UInt8(ascii: "o"): if let f = check(try? confinement.open(arg, flags: Confinement.pathOnly), "open O_PATH", arg) { return f }
            case UInt8(ascii: "r"): if let f = check(try? confinement.open(arg, flags: O_RDONLY | O_NONBLOCK), "open O_RDONLY", arg, reading: true) { return f }
            case UInt8(ascii: "p"):
                var finding: String?
                _ = try? confinement.withParent(of: arg) { (fd, _) throws(SystemError) in finding = check(dup(fd), "withParent", arg) }
                if let f = finding { return f }
            case UInt8(ascii: "s"): _ = try? confinement.status(arg)
            case UInt8(ascii: "e"): _ = try? confinement.entries(arg)
            case UInt8(ascii: "m"): try? confinement.makeDirectory(arg)
            case UInt8(ascii: "w"): try? confinement.writeFileAtomically(arg, Array("written".utf8))
            case UInt8(ascii: "x"): try? confinement.remove(arg)
            case UInt8(ascii: "t"): try? confinement.removeTree(arg)
            case UInt8(ascii: "n"): try? confinement.rename(name, to: rest, replacing: true)
            default: continue
            }
            if let f = outsideChanged() { return "after '\(String(decoding: raw, as: UTF8.self))': \(f)" }
        }
        return nil
    }

    /// Checks (and closes) a descriptor that `Confinement` returned for `path`.
    public func check(_ fd: Int32?, _ what: String, _ path: String, reading: Bool = false) -> String? {
        guard let fd, fd >= 0 else { return nil }
        defer { close(fd) }
        var buf = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/fd/\(fd)", &buf, buf.count - 1)
        guard n > 0 else { return "\(what) '\(path)': readlink of the descriptor failed (\(errno))" }
        let target = String(decoding: buf[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard target == root || target.hasPrefix(root + "/") else { return "\(what) '\(path)' escaped the root: it resolved to '\(target)'" }
        if reading, FileIdentity(fd: fd) == secretIdentity { return "\(what) '\(path)' opened the file outside the root through a hard link" }
        return nil
    }

    /// What changed outside the root, if anything: the base holds only `root` and `outside`,
    /// `outside` only `secret` (unchanged) and an empty `dir`.
    func outsideChanged() -> String? {
        guard names(base) == ["outside", "root"] else { return "the directory around the root now holds \(names(base))" }
        guard names(outside) == ["dir", "secret"], names(outside + "/dir").isEmpty else { return "the outside directory changed: \(names(outside)), dir: \(names(outside + "/dir"))" }
        var st = stat()
        guard lstat(outside + "/secret", &st) == 0, FileIdentity(st) == secretIdentity, st.st_size == secret.count else { return "the outside file was replaced or resized" }
        let fd = open(outside + "/secret", O_RDONLY)
        defer { close(fd) }
        var buf = [UInt8](repeating: 0, count: secret.count + 1)
        guard read(fd, &buf, buf.count) == secret.count, Array(buf.prefix(secret.count)) == secret else { return "the outside file was overwritten" }
        return nil
    }

    func names(_ path: String) -> [String] {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
        guard fd >= 0 else { return ["<\(path) is gone>"] }
        defer { close(fd) }
        return entries(fd).sorted()
    }

    /// Removes everything inside the directory `fd`, never following a symbolic link.
    func clear(_ fd: Int32) {
        for name in entries(fd) where unlinkat(fd, name, 0) != 0 {
            let sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
            guard sub >= 0 else { continue }
            clear(sub)
            close(sub)
            unlinkat(fd, name, AT_REMOVEDIR)
        }
    }
}

/// A file's device and inode number: what identifies it whatever its path.
struct FileIdentity: Equatable {
    let device: UInt64
    let inode: UInt64

    init(_ st: stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
    }

    init?(fd: Int32) {
        var st = stat()
        guard fstat(fd, &st) == 0 else { return nil }
        self.init(st)
    }
}

/// The name of the directory entry `e`, read in place up to its NUL (copying `d_name` would read past a short record).
func entryName(_ e: UnsafePointer<dirent>) -> String {
    String(cString: (UnsafeRawPointer(e) + MemoryLayout<dirent>.offset(of: \dirent.d_name)!).assumingMemoryBound(to: CChar.self))
}

/// The names in the open directory `fd`, without `.` and `..`, read from its start.
func entries(_ fd: Int32) -> [String] {
    guard let dir = fdopendir(dup(fd)) else { return [] }
    defer { closedir(dir) }
    rewinddir(dir)  // the duplicate shares its offset with `fd`, which an earlier walk left at the end
    var names: [String] = []
    while let e = readdir(dir) {
        let name = entryName(e)
        if name != "." && name != ".." { names.append(name) }
    }
    return names
}
