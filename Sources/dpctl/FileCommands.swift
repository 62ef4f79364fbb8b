import ArgumentParser
import DataProtection
import DataProtectionSQLite
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `dpctl put`.
struct Put: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Write standard input (or --from FILE) to a protected file, atomically.")
    @OptionGroup var domain: DomainOptions
    @Option(name: .customLong("class"), help: "Protection class (complete, completeUnlessOpen, completeUntilFirstUserAuthentication, none, or A–D).")
    var protectionClass: ProtectionClass
    @Option(help: ArgumentHelp("Read the plaintext from this file instead of standard input.", valueName: "path"))
    var from: String?
    @Flag(help: "Skip the fsyncs: still atomic for readers, but a power failure soon after may leave the old file or one that fails authentication.")
    var noSync = false
    @Argument(help: "The protected file to write (replaced if it exists).") var path: String

    func run() throws {
        let d = try domain.open()
        var fd: Int32 = 0
        if let from {
            fd = open(from, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw ProtectionError(errno == ENOENT ? .notFound : .io(errno), "unable to read '\(from)': \(String(cString: strerror(errno)))", path: from) }
        }
        defer { if fd != 0 { close(fd) } }
        try d.files.write(contentsOf: FileDescriptor(rawValue: fd), to: path, protection: protectionClass, durable: !noSync)
    }
}

/// `dpctl cat`.
struct Cat: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Write the plaintext of protected files to standard output.")
    @OptionGroup var domain: DomainOptions
    @Argument(help: "Protected files.") var paths: [String]

    func run() throws {
        let d = try domain.open()
        for p in paths { try d.files.read(p, into: .standardOutput) }
    }
}

/// `dpctl ls`.
struct List: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "ls", abstract: "List protected files: class, plaintext size, key generation, content type (no key needed).")
    @OptionGroup var domain: DomainOptions
    @Flag(help: "Print JSON for scripts.") var json = false
    @Argument(help: "Files or directories (default: the current directory).") var paths: [String] = ["."]

    func run() throws {
        let d = try domain.open()
        var rows: [(String, ProtectedFileInfo)] = []
        for p in paths {
            if isDirectory(p) {
                try walkFiles(p) { f in if let i = try? d.files.info(f) { rows.append((f, i)) } }
            } else {
                rows.append((p, try d.files.info(p)))
            }
        }
        // A database is one item: its journal and WAL (protected files of its class) fold into its row.
        let listed = Set(rows.map(\.0))
        var companions: [String: [(String, ProtectedFileInfo)]] = [:]
        rows = rows.filter { row in
            guard let main = DatabaseUnit.mainFile(ofCompanion: row.0, files: d.files), listed.contains(main) else { return true }
            companions[main, default: []].append(row)
            return false
        }
        let databases = Set(rows.map(\.0).filter { companions[$0] != nil || DatabaseUnit.isDatabase($0, files: d.files) })
        if json {
            printJSON(rows.map { row -> [String: Any] in
                let (p, i) = row
                var item: [String: Any] = ["path": p, "class": i.protectionClass.name, "size": i.plaintextSize, "generation": i.classKeyGeneration, "cipher": "\(i.cipher)", "format": Int(i.formatVersion), "type": Self.contentType(p)]
                if databases.contains(p) {
                    item["database"] = true
                    item["companions"] = (companions[p] ?? []).map { ["path": $0.0, "class": $0.1.protectionClass.name, "size": $0.1.plaintextSize] as [String: Any] }
                }
                return item
            })
            return
        }
        for (p, i) in rows {
            let side = (companions[p] ?? []).map { " + \($0.0.dropFirst(p.count).dropFirst()) \($0.1.plaintextSize)" }.joined()
            let kind = databases.contains(p) ? "database" + side : Self.contentType(p)
            print("\(i.protectionClass.letter) \(i.protectionClass.name.padding(toLength: 37, withPad: " ", startingAt: 0)) \(String(i.plaintextSize).leftPadded(12)) gen \(i.classKeyGeneration)  \(kind.padding(toLength: 24, withPad: " ", startingAt: 0)) \(p)")
        }
    }

    /// The uniform type of a file by its extension (`public.data` when unknown).
    static func contentType(_ path: String) -> String {
        ContentTypes.shared.type(forPath: path)?.identifier ?? "public.data"
    }
}

/// `dpctl protect`.
struct Protect: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Convert ordinary files (or whole trees) into protected files in place, each atomically; a SQLite database with its journal and WAL as one unit.")
    @OptionGroup var domain: DomainOptions
    @Option(name: .customLong("class"), help: "Protection class for the converted files.") var protectionClass: ProtectionClass
    @Argument(help: "Files or directories.") var paths: [String]

    func run() throws {
        let d = try domain.open()
        let files = try collect(paths)
        let bar = ProgressBar(label: "protecting")
        var converted = 0
        for (i, f) in files.enumerated() {
            // A database is protected with its journal and WAL as one unit, under SQLite's exclusive lock; its
            // companions and wal-index are not files of their own.
            if DatabaseUnit.mainFile(ofSideFile: f, files: d.files) != nil { continue }
            if DatabaseUnit.isPlainDatabase(f, files: d.files) {
                if try DatabaseUnit.protect(f, as: protectionClass, files: d.files) { converted += 1 }
            } else if try d.files.protectInPlace(f, as: protectionClass) {
                converted += 1
            }
            bar.update(done: i + 1, total: files.count)
        }
        bar.finish()
        note("protected \(converted) files as \(protectionClass.name)\(files.count > converted ? " (\(files.count - converted) already protected)" : "")")
    }
}

/// `dpctl unprotect`.
struct Unprotect: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Convert protected files (or whole trees) back into ordinary files in place, each atomically; a database with its journal and WAL as one unit.")
    @OptionGroup var domain: DomainOptions
    @Argument(help: "Files or directories.") var paths: [String]

    func run() throws {
        let d = try domain.open()
        var files: [String] = []
        for f in try collect(paths) where (try? d.files.info(f)) != nil && DatabaseUnit.mainFile(ofSideFile: f, files: d.files) == nil { files.append(f) }
        let bar = ProgressBar(label: "unprotecting")
        for (i, f) in files.enumerated() {
            // A database with a journal or WAL: SQLite folds them into the main file first, then they go together.
            if DatabaseUnit.isDatabase(f, files: d.files) {
                try DatabaseUnit.unprotect(f, files: d.files)
            } else {
                try d.files.unprotectInPlace(f)
            }
            bar.update(done: i + 1, total: files.count)
        }
        bar.finish()
        note("unprotected \(files.count) files")
    }
}

/// `dpctl set-class`.
struct SetClass: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "set-class", abstract: "Move protected files to another class by rewrapping their per-file keys (headers only).")
    @OptionGroup var domain: DomainOptions
    @Option(name: .customLong("class"), help: "The new protection class.") var protectionClass: ProtectionClass
    @Argument(help: "Protected files or directories.") var paths: [String]

    func run() throws {
        let d = try domain.open()
        var changed = 0
        let all = try collect(paths)
        for f in all where isDirectory(f) == false {
            // A database's journal and WAL move with it (one unit, under SQLite's exclusive lock), not on their own.
            if DatabaseUnit.mainFile(ofCompanion: f, files: d.files) != nil { continue }
            guard paths.contains(f) || (try? d.files.info(f)) != nil else { continue }
            if DatabaseUnit.isDatabase(f, files: d.files) {
                changed += try DatabaseUnit.setClass(f, to: protectionClass, files: d.files)
            } else if case .rewrapped = try d.setClass(f, to: protectionClass) {
                changed += 1
            }
        }
        note("\(changed) files moved to \(protectionClass.name)")
    }
}

/// Every regular file named or below the named directories, in order.
func collect(_ paths: [String]) throws -> [String] {
    var out: [String] = []
    for p in paths {
        if isDirectory(p) { try walkFiles(p) { out.append($0) } } else { out.append(p) }
    }
    return out
}

func isDirectory(_ p: String) -> Bool {
    var st = stat()
    return lstat(p, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
}

/// Calls `visit` for each regular file below `dir` (sorted, symbolic links not followed,
/// temporary files and rollback journals skipped).
func walkFiles(_ dir: String, _ visit: (String) throws -> Void) throws {
    let names = try FileManager.default.contentsOfDirectory(atPath: dir).sorted()
    for n in names where !(n.hasPrefix(".") && n.hasSuffix(".tmp")) && !ProtectedFiles.isInternalFile(named: n) {
        let p = dir == "/" ? "/\(n)" : "\(dir)/\(n)"
        var st = stat()
        guard lstat(p, &st) == 0 else { continue }
        switch st.st_mode & S_IFMT {
        case S_IFDIR: try walkFiles(p, visit)
        case S_IFREG: try visit(p)
        default: continue
        }
    }
}

extension String {
    func leftPadded(_ n: Int) -> String { count >= n ? self : String(repeating: " ", count: n - count) + self }
}

/// A one-line progress bar on standard error, drawn only when it is a terminal.
final class ProgressBar {
    let label: String
    let enabled = isatty(2) == 1
    private var lastDraw = 0

    init(label: String) { self.label = label }

    func update(done: Int, total: Int) {
        guard enabled, total > 0 else { return }
        let width = 30
        let filled = done * width / total
        let percent = done * 100 / total
        guard percent != lastDraw || done == total else { return }
        lastDraw = percent
        let line = "\r\(label) [\(String(repeating: "=", count: filled))\(String(repeating: " ", count: width - filled))] \(done)/\(total)"
        FileHandle.standardError.write(Data(line.utf8))
    }

    func finish() { if enabled && lastDraw > 0 { FileHandle.standardError.write(Data("\n".utf8)) } }
}
