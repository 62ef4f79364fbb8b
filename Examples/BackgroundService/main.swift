// dp-example-service: a long-running service that uses DataProtection the way an app would.
//
// It opens a protection domain (the keybag and keys that `dpctl init`/`unlock` manage),
// and keeps working in the background until told to stop:
//   - a `complete` task rewrites and re-reads its documents; when the domain locks its
//     operations fail cleanly with `.locked`, and it waits for `didUnlock` and resumes
//     (`LiveLock.retryAfterUnlock`), checking that every file still holds what it last
//     acknowledged;
//   - a `completeUnlessOpen` task keeps one log open the whole time and appends to it
//     (that handle keeps working while locked) and creates new files (creating works
//     while locked too);
//   - `completeUntilFirstUserAuthentication` and `none` tasks work through every lock.
// It listens to willLock / didLock / didUnlock and prints what it sees; --log records each event
// with the deadline willLock names and the Unix milliseconds at which it arrived. Every lock
// (`dpctl lock`, `unlock --timeout`'s auto-lock) sends willLock first, unless `lock --now`.
//
//   dp-example-service --work DIR [--home DIR] [--tasks-per-class 1] [--seconds 10]
//                      [--log FILE] [--ready FILE] [--hold N]
//
// --log writes one JSON line per operation (used by the torture test); --ready creates a
// file once the service is running; --hold opens N extra `complete` handles and keeps them.
// Stops after --seconds, or on SIGTERM/SIGINT, and prints a summary line.
import DataProtection
import Foundation
import Synchronization

struct Options {
    var home: String?
    var work = ""
    var tasks = 1
    var seconds = 10.0
    var log: String?
    var ready: String?
    var hold = 0
}

func parse() -> Options {
    var o = Options()
    var it = CommandLine.arguments.dropFirst().makeIterator()
    while let a = it.next() {
        switch a {
        case "--home": o.home = it.next()
        case "--work": o.work = it.next() ?? ""
        case "--tasks-per-class": o.tasks = Int(it.next() ?? "") ?? 1
        case "--seconds": o.seconds = Double(it.next() ?? "") ?? 10
        case "--log": o.log = it.next()
        case "--ready": o.ready = it.next()
        case "--hold": o.hold = Int(it.next() ?? "") ?? 0
        default:
            FileHandle.standardError.write(Data("dp-example-service: error: unknown argument '\(a)'\n".utf8))
            exit(64)
        }
    }
    if o.work.isEmpty {
        FileHandle.standardError.write(Data("dp-example-service: error: --work DIR is required\n".utf8))
        exit(64)
    }
    return o
}

/// Monotonic nanoseconds (CLOCK_MONOTONIC is system-wide, so processes can be compared).
func nowNanos() -> UInt64 {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
}

/// The operation log and the counts.
final class Journal: Sendable {
    private let out: FileHandle?
    /// One line at a time into the log; NSLock is a pthread mutex, which ThreadSanitizer sees (its run starts this service).
    private let writing = NSLock()
    let ok = Atomic<Int>(0), locked = Atomic<Int>(0), violations = Atomic<Int>(0), errors = Atomic<Int>(0)

    init(path: String?) {
        if let path {
            FileManager.default.createFile(atPath: path, contents: nil)
            out = FileHandle(forWritingAtPath: path)
        } else {
            out = nil
        }
    }

    func record(_ op: String, _ cls: ProtectionClass, _ file: String, version: Int, start: UInt64, _ result: String, _ detail: String = "") {
        switch result {
        case "ok": ok.add(1, ordering: .relaxed)
        case "locked": locked.add(1, ordering: .relaxed)
        case "violation": violations.add(1, ordering: .relaxed)
        default: errors.add(1, ordering: .relaxed)
        }
        if result == "violation" || result == "error" { print("dp-example-service: \(result): \(op) \(file): \(detail)") }
        let line = "{\"op\":\"\(op)\",\"class\":\"\(cls.name)\",\"file\":\"\(file)\",\"v\":\(version),\"start\":\(start),\"end\":\(nowNanos()),\"result\":\"\(result)\"}\n"
        write(line)
    }

    /// Logs a domain event: `{"event":"willLock","deadline":<Unix ms>,"at":<Unix ms>,"t":<monotonic ns>}`.
    func event(_ e: DomainEvent) {
        print("dp-example-service: \(e)")
        var t = timespec()
        clock_gettime(CLOCK_REALTIME, &t)
        let at = Double(t.tv_sec) * 1000 + Double(t.tv_nsec) / 1e6
        let fields: String
        switch e {
        case .willLock(let deadline): fields = "\"event\":\"willLock\",\"deadline\":\(deadline)"
        case .didLock: fields = "\"event\":\"didLock\""
        case .didUnlock: fields = "\"event\":\"didUnlock\""
        }
        write("{\(fields),\"at\":\(at),\"t\":\(nowNanos())}\n")
    }

    func note(_ s: String) {
        print("dp-example-service: \(s)")
        write("{\"event\":\"\(s)\",\"t\":\(nowNanos())}\n")
    }

    private func write(_ line: String) {
        writing.withLock { out?.write(Data(line.utf8)) }
    }
}

/// The bytes of version `v` of `name`: a header line, then a pattern only that version has.
/// (Deterministic across processes, so a checker can recompute it: FNV-1a of the name, not `hashValue`.)
func contents(_ name: String, _ v: Int) -> [UInt8] {
    var b = Array("file=\(name) version=\(v)\n".utf8)
    let n = 1000 + (v * 7919) % 30_000
    let fnv = name.utf8.reduce(UInt32(2_166_136_261)) { ($0 ^ UInt32($1)) &* 16_777_619 }
    var x = UInt32(truncatingIfNeeded: v &* 2_654_435_761) ^ fnv
    b.reserveCapacity(b.count + n)
    for _ in 0..<n { x = x &* 1_103_515_245 &+ 12345; b.append(UInt8(truncatingIfNeeded: x >> 16)) }
    return b
}

/// One task: rewrites one document of its class, reads it back, and checks it against what it last acknowledged.
func documentTask(_ files: ProtectedFiles, _ live: LiveLock, _ journal: Journal, _ cls: ProtectionClass, _ path: String,
                  until deadline: UInt64, stopping: StopFlag) async {
    let name = (path as NSString).lastPathComponent
    var acked = 0  // last acknowledged version (0: none yet)
    var next = 1
    while nowNanos() < deadline && !stopping.isSet && !Task.isCancelled {
        let start = nowNanos()
        do {
            try files.write(contents(name, next), to: path, protection: cls)
            acked = next
            next += 1
            journal.record("write", cls, name, version: acked, start: start, "ok")
        } catch let e as ProtectionError where e.code == .locked {
            journal.record("write", cls, name, version: next, start: start, "locked")
            if cls == .complete { await live.waitUntilUnlocked(.complete) }
            continue
        } catch {
            journal.record("write", cls, name, version: next, start: start, "error", "\(error)")
            continue
        }
        let rstart = nowNanos()
        do {
            let got = try files.read(path)
            if got == contents(name, acked) {
                journal.record("read", cls, name, version: acked, start: rstart, "ok")
            } else {
                journal.record("read", cls, name, version: acked, start: rstart, "violation", "read bytes that are not version \(acked)")
            }
        } catch let e as ProtectionError where e.code == .locked {
            journal.record("read", cls, name, version: acked, start: rstart, "locked")
            if cls == .complete || cls == .completeUnlessOpen { await live.waitUntilUnlocked(cls) }
        } catch {
            journal.record("read", cls, name, version: acked, start: rstart, "error", "\(error)")
        }
        await Task.yield()
    }
}

/// A `completeUnlessOpen` log kept open throughout: appends and reads back must work while locked.
func openLogTask(_ files: ProtectedFiles, _ journal: Journal, _ path: String, until deadline: UInt64, stopping: StopFlag) async {
    let name = (path as NSString).lastPathComponent
    let h: ProtectedFileHandle
    do { h = try files.create(path, protection: .completeUnlessOpen) } catch {
        journal.record("create", .completeUnlessOpen, name, version: 0, start: nowNanos(), "error", "\(error)")
        return
    }
    defer { h.close() }
    var records = 0
    while nowNanos() < deadline && !stopping.isSet {
        let start = nowNanos()
        let line = Array(String(format: "record %08d\n", records).utf8)
        do {
            try h.append(line)
            let back = try h.read(at: Int64(records * line.count), count: line.count)
            records += 1
            journal.record("append", .completeUnlessOpen, name, version: records, start: start, back == line ? "ok" : "violation", "read back other bytes")
        } catch {
            // An open completeUnlessOpen handle must keep working while locked: any failure is a violation.
            journal.record("append", .completeUnlessOpen, name, version: records, start: start, "violation", "\(error)")
        }
        await Task.yield()
    }
}

/// Set by SIGTERM/SIGINT; every task checks it between operations.
final class StopFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    var isSet: Bool { flag.load(ordering: .relaxed) }
    func set() { flag.store(true, ordering: .relaxed) }
}

let options = parse()
let stopping = StopFlag()
signal(SIGTERM) { _ in stopping.set() }
signal(SIGINT) { _ in stopping.set() }

do {
    let env = ProcessInfo.processInfo.environment
    let domain = try ProtectionDomain.open(
        at: try DomainLocation.resolve(home: options.home, environment: env),
        keyStore: .kernel(try KeyringParent.from(environment: env)))
    let files = domain.files
    let live = domain.liveLock
    let journal = Journal(path: options.log)
    try FileManager.default.createDirectory(atPath: options.work, withIntermediateDirectories: true)
    // Extra complete handles held open (for lock-latency and key-residue measurements).
    var heldHandles: [ProtectedFileHandle] = []
    for i in 0..<options.hold {
        let p = "\(options.work)/held-\(getpid())-\(i)"
        let h = try files.create(p, protection: .complete)
        try h.write(Array("held \(i)".utf8), at: 0)
        heldHandles.append(h)
    }
    let held = heldHandles
    // After an unlock, use the held handles again, as an app resuming work would: each gets its keys back.
    let events = live.onEvent { event in
        journal.event(event)
        if case .didUnlock = event { for h in held { _ = try? h.read(at: 0, count: 1) } }
    }
    if let ready = options.ready { FileManager.default.createFile(atPath: ready, contents: Data("\(getpid())\n".utf8)) }
    let deadline = nowNanos() + UInt64(options.seconds * 1e9)
    let work = Task {
      await withTaskGroup(of: Void.self) { group in
        for t in 0..<options.tasks {
            let tag = "\(getpid())-\(t)"
            for cls in [ProtectionClass.complete, .completeUnlessOpen, .completeUntilFirstUserAuthentication, .none] {
                let path = "\(options.work)/doc-\(tag)-\(cls.letter)"
                group.addTask { await documentTask(files, live, journal, cls, path, until: deadline, stopping: stopping) }
            }
            group.addTask { await openLogTask(files, journal, "\(options.work)/log-\(tag)-B", until: deadline, stopping: stopping) }
        }
      }
    }
    // Stop (SIGTERM/SIGINT or the deadline) cancels every task, including one waiting for an unlock;
    // with no background tasks (--tasks-per-class 0) the service just holds its handles until then.
    while nowNanos() < deadline && !stopping.isSet { try? await Task.sleep(for: .milliseconds(20)) }
    work.cancel()
    await work.value
    events.cancel()
    for h in held { h.close() }
    let summary = "summary ok=\(journal.ok.load(ordering: .relaxed)) locked=\(journal.locked.load(ordering: .relaxed)) violations=\(journal.violations.load(ordering: .relaxed)) errors=\(journal.errors.load(ordering: .relaxed))"
    journal.note(summary)
    exit(journal.violations.load(ordering: .relaxed) == 0 && journal.errors.load(ordering: .relaxed) == 0 ? 0 : 1)
} catch {
    FileHandle.standardError.write(Data("dp-example-service: error: \(error)\n".utf8))
    exit(70)
}
