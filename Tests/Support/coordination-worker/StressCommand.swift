// stress: many coordinated reads, writes and directory moves, each checked by the process itself.
import FileCoordination
import Foundation
import Synchronization

/// `stress --items a,d/b --mode read|write|move --iterations N --log FILE --scoreboard FILE --hold-us U`
///
/// Inside every accessor the process (1) records itself on a scoreboard shared by all workers
/// (an mmap'ed file of per-item counters) and checks that nothing that should exclude it is
/// there, (2) appends `B`/`E` lines to a shared O_APPEND log for the test to replay, and (3) checks
/// the item's contents: writers write a file in two halves, readers check they never see half.
struct StressCommand {
    let coordinator: FileCoordinator
    let root: URL
    let items: [String]
    let mode: String
    let iterations: Int
    let hold: UInt32
    let log: Int32
    let board: Scoreboard
    /// `--bare`: the same accesses without coordination, the control that shows the checks can fail.
    let bare: Bool

    init(_ arguments: WorkerArguments) throws {
        coordinator = FileCoordinator(domain: try arguments.domain(), timeout: .seconds(60))
        root = URL(fileURLWithPath: try arguments.string("root"))
        items = try arguments.string("items").split(separator: ",").map(String.init)
        let all = try arguments.string("all").split(separator: ",").map(String.init)
        guard !items.isEmpty, items.allSatisfy(all.contains) else {
            throw WorkerError(description: "every --items entry must also be listed in --all")
        }
        mode = try arguments.string("mode")
        iterations = try arguments.int("iterations")
        hold = UInt32(try arguments.int("hold-us", default: 0))
        log = open(try arguments.string("log"), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        bare = arguments.flag("bare")
        board = try Scoreboard(path: try arguments.string("scoreboard"), names: all)
    }

    func run() throws -> Int32 {
        var violations = 0
        for iteration in 0..<iterations {
            let name = items[iteration % items.count]
            let url = root.appendingPathComponent(name)
            switch mode {
            case "read":
                violations += try coordinated(url) { url in
                    section(name, .read) { Self.checkContents(url) }
                }
            case "write":
                violations += try coordinated(url, writing: []) { url in
                    section(name, .write) { Self.writeInHalves(url, iteration: iteration, hold: hold) }
                }
            case "move":
                violations += try coordinated(url, writing: .forMoving) { url in
                    try section(name, .move) { try moveAndBack(url) }
                }
            default: throw WorkerError(description: "--mode must be read, write or move")
            }
        }
        say("violations \(violations)")
        return violations == 0 ? 0 : 1
    }

    /// Runs `body` in a coordinated read (`writing` nil) or write, or bare with `--bare`.
    private func coordinated(_ url: URL, writing: WritingOptions? = nil, _ body: (URL) throws -> Int) throws -> Int {
        if bare { return try body(url) }
        guard let writing else { return try coordinator.coordinate(readingItemAt: url, byAccessor: body) }
        return try coordinator.coordinate(writingItemAt: url, options: writing, byAccessor: body)
    }

    /// Runs `body` as one critical section: scoreboard in, log B, body, log E, scoreboard out.
    private func section(_ name: String, _ access: Scoreboard.Access, _ body: () throws -> Int) rethrows -> Int {
        var violations = board.enter(name, access)
        append("B \(getpid()) \(access) \(name)")
        violations += try body()
        if hold > 0 && access != .write { usleep(hold) }
        append("E \(getpid()) \(access) \(name)")
        board.leave(name, access)
        if violations > 0 { say("violation in \(access) of \(name)") }
        return violations
    }

    private func append(_ line: String) {
        _ = (line + "\n").withCString { write(log, $0, strlen($0)) }
    }

    /// Renames the directory away and back, reporting both moves; readers of its children must not notice.
    private func moveAndBack(_ url: URL) throws -> Int {
        let away = url.deletingLastPathComponent().appendingPathComponent(url.lastPathComponent + ".moving")
        guard rename(url.path, away.path) == 0 else { return 1 }
        if !bare { try coordinator.item(at: url, didMoveTo: away) }
        if hold > 0 { usleep(hold) }
        guard rename(away.path, url.path) == 0 else { return 1 }
        if !bare { try coordinator.item(at: away, didMoveTo: url) }
        return 0
    }

    /// Writes 4096 bytes of one letter in two halves, pausing between them; returns 0.
    static func writeInHalves(_ url: URL, iteration: Int, hold: UInt32) -> Int {
        let letter = UInt8(ascii: "a") + UInt8(iteration % 26)
        let half = [UInt8](repeating: letter, count: 2048)
        let fd = open(url.path, O_WRONLY | O_TRUNC | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return 1 }
        defer { close(fd) }
        _ = half.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if hold > 0 { usleep(hold) }
        _ = half.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        return 0
    }

    /// 0 when the file holds 4096 bytes of one letter (or does not exist yet), 1 when half-written.
    static func checkContents(_ url: URL) -> Int {
        guard let data = FileManager.default.contents(atPath: url.path) else {
            return FileManager.default.fileExists(atPath: url.deletingLastPathComponent().path) ? 0 : 1
        }
        if data.isEmpty { return 0 }
        return data.count == 4096 && data.allSatisfy({ $0 == data.first }) ? 0 : 1
    }
}

/// Per-item counters in an mmap'ed file shared by every worker: readers, writers, movers.
struct Scoreboard {
    enum Access: CustomStringConvertible {
        case read, write, move
        var description: String {
            switch self {
            case .read: "read"
            case .write: "write"
            case .move: "move"
            }
        }
        var index: Int {
            switch self {
            case .read: 0
            case .write: 1
            case .move: 2
            }
        }
    }

    private let counters: UnsafeMutablePointer<Atomic<Int64>>
    private let names: [String]

    init(path: String, names: [String]) throws {
        self.names = names
        let size = names.count * 3 * 8
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0, ftruncate(fd, off_t(size)) == 0 else { throw WorkerError(description: "cannot open scoreboard \(path)") }
        defer { close(fd) }
        guard let mapped = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), mapped != MAP_FAILED else {
            throw WorkerError(description: "cannot map scoreboard \(path)")
        }
        counters = mapped.bindMemory(to: Atomic<Int64>.self, capacity: names.count * 3)  // Atomic<Int64> is laid out as Int64
    }

    /// The counter of `kind` for `name`; `name` is one of `names` (checked when the arguments are parsed).
    private func counter(_ name: String, _ kind: Int) -> UnsafeMutablePointer<Atomic<Int64>> {
        counters + ((names.firstIndex(of: name) ?? 0) * 3 + kind)
    }

    private func value(_ name: String, _ kind: Int) -> Int64 { counter(name, kind).pointee.load(ordering: .sequentiallyConsistent) }

    /// Registers the access, then counts what conflicts with it (0 when coordination works).
    func enter(_ name: String, _ access: Access) -> Int {
        counter(name, access.index).pointee.add(1, ordering: .sequentiallyConsistent)
        var violations = 0
        for other in names {
            let readers = value(other, 0)
            let writers = value(other, 1)
            let movers = value(other, 2)
            if components(other) == components(name) {
                switch access {
                case .read: if writers + movers > 0 { violations += 1 }
                case .write: if readers + movers > 0 || writers > 1 { violations += 1 }
                case .move: if readers + writers > 0 || movers > 1 { violations += 1 }
                }
            } else if isItem(name, inside: other) {
                if movers > 0 { violations += 1 }  // a directory around us is being moved
            } else if isItem(other, inside: name), access == .move {
                if readers + writers + movers > 0 { violations += 1 }  // something inside us is in use
            }
        }
        return violations
    }

    func leave(_ name: String, _ access: Access) {
        counter(name, access.index).pointee.subtract(1, ordering: .sequentiallyConsistent)
    }
}

// The oracle's own path rule, independent of the library's (PathSyntax) so that a fault there cannot hide here: the
// items are the test's relative names ("a", "d/b"), compared component by component at the byte "/".
private func components(_ item: String) -> [[UInt8]] { Array(item.utf8).split(separator: UInt8(ascii: "/")).map(Array.init) }

/// Whether `item` lies strictly inside `directory` ("d/b" inside "d"; "dx" not inside "d").
private func isItem(_ item: String, inside directory: String) -> Bool {
    let inner = components(item), outer = components(directory)
    return inner.count > outer.count && Array(inner.prefix(outer.count)) == outer
}
