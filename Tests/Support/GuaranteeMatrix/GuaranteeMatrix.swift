// The guarantee matrix's drivers, shared by GuaranteeMatrixTests (this process) and guarantee-worker (another one):
// one driver per ProtectedDataEntryPoint, chosen by an exhaustive switch, so a new entry point does not compile
// here until it has a driver.
@_spi(Testing) import DataProtection
import DataProtectionSQLite
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// When the domain locks, relative to the cell's access.
public enum LockTiming: String, CaseIterable, Sendable {
    case unlocked
    /// `lock` returned before the entry point was called.
    case lockedBeforeOpen = "locked-before-open"
    /// Handles: `lock` ran between the open and the next read or write. Whole-file calls: `lock` started at the moment
    /// the call had obtained its key and had not yet registered its holder (`AdmissionProbe`).
    case lockedWhileOpen = "locked-while-open"
}

/// What a cell must do.
public enum CellOutcome: String, Sendable, Equatable {
    /// The call succeeds, returns exactly the file's plaintext (reads) or leaves exactly what it wrote (writes).
    case works
    /// The call fails `.locked`; nothing is returned, and the files are as they were.
    case locked
}

/// One cell: an entry point, a class and a lock timing.
public struct MatrixCell: Sendable, CustomStringConvertible {
    public var entry: ProtectedDataEntryPoint
    public var protection: ProtectionClass
    public var timing: LockTiming

    public init(_ entry: ProtectedDataEntryPoint, _ protection: ProtectionClass, _ timing: LockTiming) {
        self.entry = entry
        self.protection = protection
        self.timing = timing
    }

    public var description: String { "\(entry) × \(protection.name) × \(timing.rawValue)" }

    /// A file name unique to the cell (cells never share a file).
    public var name: String { "\(entry.rawValue)-\(protection.rawValue)-\(timing.rawValue)" }

    /// What DESIGN.md's class table says this cell does.
    public var expected: CellOutcome {
        if timing == .unlocked { return .works }
        switch protection {
        case .none, .completeUntilFirstUserAuthentication:
            return .works  // D never locks; C stays available after a plain `lock`
        case .complete:
            // A rewrap finishes inside its one acquisition of keys: a lock that starts during it waits for it.
            return timing == .lockedWhileOpen && entry == .filesRewrap ? .works : .locked
        case .completeUnlessOpen:
            // B: files opened (or keys obtained) before the lock keep working; while locked, only creating works.
            if timing == .lockedWhileOpen { return .works }
            return Self.createsOnly.contains(entry) ? .works : .locked
        }
    }

    /// Entry points that only create new files (class B can do that while locked: its key is sealed to the public key).
    static let createsOnly: Set<ProtectedDataEntryPoint> = [.filesWrite, .filesWriteStream, .filesCreate, .filesProtect, .containerWrite, .containerCreate]

    /// Whether the entry point hands the caller a handle (the lock then falls between open and use).
    public var opensHandle: Bool {
        [.filesCreate, .filesOpen, .filesOpenForWriting, .containerCreate, .containerOpen, .databaseOpen, .databaseOpenReadOnly].contains(entry)
    }
}

/// The places one run of the matrix works in: a domain's files directory and one container per class.
public struct MatrixFixture: Sendable {
    public let domain: ProtectionDomain
    /// Directory for the `files.*` entry points (through `domain.files`).
    public let directory: String
    /// A container per class; its preferences store takes that class.
    public let containers: [ProtectionClass: Container]

    /// Container roots live under `directory/containers/<class>`.
    public static func containerRoot(_ directory: String, _ c: ProtectionClass) -> String { "\(directory)/containers/\(c.name)" }

    /// Opens (creating when `create`) the containers under `directory`.
    public init(domain: ProtectionDomain, directory: String, create: Bool) throws {
        self.domain = domain
        self.directory = directory
        var cs: [ProtectionClass: Container] = [:]
        for c in ProtectionClass.allCases {
            let root = Self.containerRoot(directory, c)
            let policy = ContainerPolicy(defaultClasses: [.preferences: c])
            if create {
                try FileManager.default.createDirectory(atPath: directory + "/containers", withIntermediateDirectories: true)
                cs[c] = try Container.create(at: root, keys: domain.keys, policy: policy)
            } else {
                cs[c] = try Container(at: root, keys: domain.keys)
            }
        }
        containers = cs
    }

    /// The plaintext of the cell's existing file: several chunks, unique to the cell.
    public static func plaintext(_ cell: MatrixCell) -> [UInt8] {
        let line = Array("\(cell.name): the plaintext nobody may read after lock returns.\n".utf8)
        return Array((0..<(10_000 / line.count + 1)).flatMap { _ in line }.prefix(10_000))
    }

    /// What the cell writes, when it writes.
    public static func written(_ cell: MatrixCell) -> [UInt8] { Array("written by \(cell.name)".utf8) }

    public func filePath(_ cell: MatrixCell) -> String { "\(directory)/\(cell.name)" }
    public func containerPath(_ cell: MatrixCell) -> String { "Documents/\(cell.name)" }
    public var preferencesKey: String { "secret" }

    /// Puts the cell's existing data in place (the domain is unlocked).
    public func prepare(_ cell: MatrixCell) throws {
        let p = Self.plaintext(cell), c = cell.protection
        switch cell.entry {
        case .filesRead, .filesReadStream, .filesOpen, .filesOpenForWriting, .filesRewrap, .filesUnprotect:
            try domain.files.write(p, to: filePath(cell), protection: c)
        case .filesProtect:
            try Data(p).write(to: URL(fileURLWithPath: filePath(cell)))
        case .filesWriteStream:
            try Data(Self.written(cell)).write(to: URL(fileURLWithPath: filePath(cell) + ".input"))
        case .containerRead, .containerOpen:
            try containers[c]!.write(p, to: containerPath(cell), protection: c)
        case .preferencesRead, .preferencesWrite:
            try containers[c]!.preferences(named: cell.name).set(p, forKey: preferencesKey)
        case .databaseOpen, .databaseOpenReadOnly:
            try MatrixDatabase.prepare(filePath(cell), protection: c, plaintext: p, files: domain.files, wal: cell.entry == .databaseOpen)
        case .filesWrite, .filesCreate, .containerWrite, .containerCreate:
            break
        }
    }

    /// The first half of a handle entry point: opens (or creates) the handle. Nil for whole-file entry points.
    public func open(_ cell: MatrixCell) throws -> MatrixHandle? {
        let c = cell.protection
        switch cell.entry {
        case .filesCreate: return .file(try domain.files.create(filePath(cell), protection: c))
        case .filesOpen: return .file(try domain.files.open(filePath(cell)))
        case .filesOpenForWriting: return .file(try domain.files.open(filePath(cell), forWriting: true))
        case .containerCreate: return .file(try containers[c]!.create(containerPath(cell), protection: c))
        case .containerOpen: return .file(try containers[c]!.open(containerPath(cell)))
        case .databaseOpen, .databaseOpenReadOnly:
            return .database(try MatrixDatabase.open(filePath(cell), protection: c, files: domain.files, readOnly: cell.entry == .databaseOpenReadOnly))
        case .filesWrite, .filesWriteStream, .filesRead, .filesReadStream, .filesRewrap, .filesProtect, .filesUnprotect,
             .containerWrite, .containerRead, .preferencesRead, .preferencesWrite:
            return nil
        }
    }

    /// The rest of the cell: uses the handle, or makes the whole-file call. Returns the plaintext it read, if any.
    public func use(_ cell: MatrixCell, _ opened: MatrixHandle?) throws -> [UInt8]? {
        let c = cell.protection, w = Self.written(cell)
        switch cell.entry {
        case .filesCreate, .containerCreate, .filesOpenForWriting:
            let handle = opened!.file
            defer { handle.close() }
            try handle.write(w, at: 0)
            try handle.sync()
            return nil
        case .filesOpen, .containerOpen:
            let handle = opened!.file
            defer { handle.close() }
            return try handle.read(at: 0, count: Int(try handle.size))
        case .databaseOpen: try MatrixDatabase.insert(w, into: opened!.database); return nil
        case .databaseOpenReadOnly: return try MatrixDatabase.firstRow(of: opened!.database)
        case .filesWrite: try domain.files.write(w, to: filePath(cell), protection: c); return nil
        case .filesWriteStream:
            let fd = Glibc.open(filePath(cell) + ".input", O_RDONLY)
            defer { Glibc.close(fd) }
            try domain.files.write(contentsOf: FileDescriptor(rawValue: fd), to: filePath(cell), protection: c)
            return nil
        case .filesRead: return try domain.files.read(filePath(cell))
        case .filesReadStream:
            let out = filePath(cell) + ".out"
            let fd = Glibc.open(out, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            defer { Glibc.close(fd) }
            do { try domain.files.read(filePath(cell), into: FileDescriptor(rawValue: fd)) } catch {
                // What reached the output before a failure is returned too: the test requires it to be empty.
                let partial = [UInt8]((try? Data(contentsOf: URL(fileURLWithPath: out))) ?? Data())
                if !partial.isEmpty { throw MatrixError.partialPlaintext(partial.count, error) }
                throw error
            }
            return [UInt8](try Data(contentsOf: URL(fileURLWithPath: out)))
        case .filesRewrap:
            _ = try domain.setClass(filePath(cell), to: c == .none ? .completeUntilFirstUserAuthentication : .none)
            return nil
        case .filesProtect: _ = try domain.files.protectInPlace(filePath(cell), as: c); return nil
        case .filesUnprotect:
            try domain.files.unprotectInPlace(filePath(cell))
            return [UInt8](try Data(contentsOf: URL(fileURLWithPath: filePath(cell))))
        case .containerWrite: try containers[c]!.write(w, to: containerPath(cell), protection: c); return nil
        case .containerRead: return try containers[c]!.read(containerPath(cell))
        case .preferencesRead: return try containers[c]!.preferences(named: cell.name).data(forKey: preferencesKey)
        case .preferencesWrite:
            try containers[c]!.preferences(named: cell.name).set(w, forKey: preferencesKey)
            return nil
        }
    }

    /// After the cell, with the domain unlocked again: checks that the files hold what the outcome implies.
    /// Returns a description of what is wrong, or nil.
    public func verify(_ cell: MatrixCell, _ outcome: CellOutcome, read: [UInt8]?) throws -> String? {
        let c = cell.protection, p = Self.plaintext(cell), w = Self.written(cell)
        let reads: Set<ProtectedDataEntryPoint> = [
            .filesRead, .filesReadStream, .filesOpen, .containerRead, .containerOpen, .preferencesRead, .filesUnprotect, .databaseOpenReadOnly,
        ]
        if outcome == .works, reads.contains(cell.entry), read != p { return "read \(read?.count ?? -1) bytes, not the file's \(p.count)" }
        if outcome == .locked, let read, !read.isEmpty { return "returned \(read.count) bytes of plaintext after lock" }
        let litter = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasPrefix(".") }
        if !litter.isEmpty { return "left \(litter) beside the files" }
        switch cell.entry {
        case .filesRead, .filesReadStream, .filesOpen:
            return try domain.files.read(filePath(cell)) == p ? nil : "the file changed"
        case .filesOpenForWriting:
            var expect = p
            if outcome == .works { expect.replaceSubrange(0..<w.count, with: w) }
            return try domain.files.read(filePath(cell)) == expect ? nil : "the file does not hold what the outcome implies"
        case .filesCreate, .filesWrite, .filesWriteStream:
            if outcome == .works { return try domain.files.read(filePath(cell)) == w ? nil : "the written file does not read back" }
            return try leftover(at: filePath(cell), cell) { try domain.files.read(filePath(cell)) }
        case .filesRewrap:
            let info = try domain.files.info(filePath(cell))
            let moved = info.protectionClass != c
            if moved != (outcome == .works) { return "the class is \(info.protectionClass.name)" }
            return try domain.files.read(filePath(cell)) == p ? nil : "the file changed"
        case .filesProtect:
            if outcome == .works { return try domain.files.read(filePath(cell)) == p ? nil : "the protected file does not read back" }
            return [UInt8](try Data(contentsOf: URL(fileURLWithPath: filePath(cell)))) == p ? nil : "the plain file changed"
        case .filesUnprotect:
            if outcome == .works { return nil }  // checked through `read` above
            return try domain.files.read(filePath(cell)) == p ? nil : "the protected file changed"
        case .containerRead, .containerOpen:
            return try containers[c]!.read(containerPath(cell)) == p ? nil : "the file changed"
        case .containerWrite, .containerCreate:
            let path = containers[c]!.root + "/" + containerPath(cell)
            if outcome == .works { return try containers[c]!.read(containerPath(cell)) == w ? nil : "the written file does not read back" }
            return try leftover(at: path, cell) { try containers[c]!.read(containerPath(cell)) }
        case .preferencesRead:
            return try containers[c]!.preferences(named: cell.name).data(forKey: preferencesKey) == p ? nil : "the preferences changed"
        case .preferencesWrite:
            let got = try containers[c]!.preferences(named: cell.name).data(forKey: preferencesKey)
            return got == (outcome == .works ? w : p) ? nil : "the preferences hold \(got?.count ?? -1) bytes"
        case .databaseOpen, .databaseOpenReadOnly:
            let expect = cell.entry == .databaseOpen && outcome == .works ? [p, w] : [p]
            return try MatrixDatabase.check(filePath(cell), files: domain.files, holds: expect)
        }
    }
}

extension MatrixFixture {
    /// What a failed creating call may leave at its name: nothing, or, when a handle was created before the lock, the
    /// empty file it created (the write after the lock failed whole).
    func leftover(at path: String, _ cell: MatrixCell, read: () throws -> [UInt8]) throws -> String? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        if cell.opensHandle, cell.timing == .lockedWhileOpen { return try read().isEmpty ? nil : "the file created before the lock holds data" }
        return "a file was left at the new name"
    }
}

public enum MatrixError: Error, CustomStringConvertible {
    case partialPlaintext(Int, any Error)
    public var description: String {
        switch self { case .partialPlaintext(let n, let e): "\(n) bytes of plaintext reached the output before the call failed: \(e)" }
    }
}

/// What a cell's call did, as the test and the worker report it.
public enum CellResult: Sendable, Equatable {
    case worked(read: [UInt8]?)
    case failed(code: String, message: String)

    /// The outcome this result shows, or nil when it is neither (another error).
    public var outcome: CellOutcome? {
        switch self {
        case .worked: .works
        case .failed(let code, _): code == "locked" ? .locked : nil
        }
    }

    public init(_ body: () throws -> [UInt8]?) {
        do { self = .worked(read: try body()) } catch let e as ProtectionError {
            self = .failed(code: e.code == .locked ? "locked" : "\(e.code)", message: e.message)
        } catch {
            self = .failed(code: "other", message: "\(error)")
        }
    }

    /// One line: `worked <hex or ->`, or `failed <code> <message>`.
    public var line: String {
        switch self {
        case .worked(let r): "worked " + (r.map { $0.map { String(format: "%02x", $0) }.joined() } ?? "-")
        case .failed(let code, let message): "failed \(code) \(message.replacingOccurrences(of: "\n", with: " "))"
        }
    }

    public init?(line: String) {
        let parts = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
        switch parts.first {
        case "worked" where parts.count == 2:
            if parts[1] == "-" { self = .worked(read: nil); return }
            var bytes: [UInt8] = []
            var i = parts[1].startIndex
            while i < parts[1].endIndex {
                let j = parts[1].index(i, offsetBy: 2)
                guard let b = UInt8(parts[1][i..<j], radix: 16) else { return nil }
                bytes.append(b)
                i = j
            }
            self = .worked(read: bytes)
        case "failed" where parts.count >= 2: self = .failed(code: parts[1], message: parts.count > 2 ? parts[2] : "")
        default: return nil
        }
    }
}
