// crash-worker: performs one crash-harness operation so a test can SIGKILL it (CrashHarnessTests).
//
//   crash-worker prepare <op> <root>        the starting state (domain, files)
//   crash-worker run <op> <root>            the operation; prints "START", "ACK k" per durable step,
//                                           then "IOOPS n", "JOURNALED true|false" and "ELAPSED_US t"
//   crash-worker verify <op> <root> <acked> opens everything afresh; prints the verdict, exits 1 on a violation
//
// With CRASH_KILL_AFTER=N, `run` raises SIGKILL on itself right after its Nth
// disk-changing I/O call (see KillingIO). Every line goes out with write(2), so
// what was printed before the kill is in the pipe.
@_spi(Testing) import CrashScenarios
@_spi(Testing) import DataProtection
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The real system calls, counting those that can change what is on disk; SIGKILL right after the Nth.
///
/// Counted: `open`/`openAt` with `O_CREAT`, `pwrite`, `ftruncate`, `fsync`, `rename`/`renameAt`,
/// `unlink`/`unlinkAt`, the attribute copy. Reads, plain opens and `close` change
/// nothing, so a kill after them equals a kill after the previous counted call.
final class KillingIO: FileIO {
    let real = SystemFileIO()
    let killAfter: Int?
    let armed = Atomic<Bool>(false)
    let count = Atomic<Int>(0)
    /// Whether a rollback journal (`.<name>.dpjournal`) was created: in-place writes are crash-safe only with one.
    let journaled = Atomic<Bool>(false)
    /// The measurement behind the database's chunk-journal decision (FORMAT.md, "Protected databases"): counted calls
    /// and fsyncs in all, and those on chunk-journal sidecars (descriptors opened on a `.dpjournal` name).
    let fsyncs = Atomic<Int>(0), journalCalls = Atomic<Int>(0), journalFsyncs = Atomic<Int>(0)
    let journalDescriptors = Mutex<Set<Int32>>([])

    func onJournal(_ fd: Int32) -> Bool { journalDescriptors.withLock { $0.contains(fd) } }

    init(killAfter: Int?) { self.killAfter = killAfter }

    func counted() {
        guard armed.load(ordering: .relaxed) else { return }
        let n = count.add(1, ordering: .relaxed).newValue
        if let k = killAfter, n >= k { raise(SIGKILL) }
    }

    func open(_ path: String, flags: Int32, mode: mode_t) throws(SystemError) -> Int32 {
        let fd = try real.open(path, flags: flags, mode: mode)
        if path.hasSuffix(".dpjournal") {
            journaled.store(true, ordering: .relaxed)
            journalDescriptors.withLock { _ = $0.insert(fd) }
            if flags & O_CREAT != 0 { journalCalls.add(1, ordering: .relaxed) }
        }
        if flags & O_CREAT != 0 { counted() }
        return fd
    }
    func close(_ fd: Int32) {
        journalDescriptors.withLock { _ = $0.remove(fd) }
        real.close(fd)
    }
    func pread(_ fd: Int32, into b: UnsafeMutableRawBufferPointer, at o: Int64) throws(SystemError) -> Int { try real.pread(fd, into: b, at: o) }
    func pwrite(_ fd: Int32, from b: UnsafeRawBufferPointer, at o: Int64) throws(SystemError) -> Int {
        if onJournal(fd) { journalCalls.add(1, ordering: .relaxed) }
        defer { counted() }
        return try real.pwrite(fd, from: b, at: o)
    }
    func fsync(_ fd: Int32) throws(SystemError) {
        try real.fsync(fd)
        fsyncs.add(1, ordering: .relaxed)
        if onJournal(fd) { journalCalls.add(1, ordering: .relaxed); journalFsyncs.add(1, ordering: .relaxed) }
        counted()
    }
    func ftruncate(_ fd: Int32, to s: Int64) throws(SystemError) {
        try real.ftruncate(fd, to: s)
        if onJournal(fd) { journalCalls.add(1, ordering: .relaxed) }
        counted()
    }
    func size(_ fd: Int32) throws(SystemError) -> Int64 { try real.size(fd) }
    func rename(_ a: String, to b: String) throws(SystemError) { try real.rename(a, to: b); counted() }
    func unlink(_ p: String) throws(SystemError) {
        try real.unlink(p)
        if p.hasSuffix(".dpjournal") { journalCalls.add(1, ordering: .relaxed) }
        counted()
    }
    func openAt(_ dir: Int32, _ name: String, flags: Int32, mode: mode_t) throws(SystemError) -> Int32 {
        let fd = try real.openAt(dir, name, flags: flags, mode: mode)
        if flags & O_CREAT != 0 { counted() }
        return fd
    }
    func renameAt(_ dir: Int32, _ a: String, to b: String) throws(SystemError) { try real.renameAt(dir, a, to: b); counted() }
    func unlinkAt(_ dir: Int32, _ name: String) throws(SystemError) { try real.unlinkAt(dir, name); counted() }
    func identityAt(_ dir: Int32, _ name: String) throws(SystemError) -> (device: UInt64, inode: UInt64) { try real.identityAt(dir, name) }
    func copyUserAttributes(at dir: Int32, from name: String, to fd: Int32) throws(SystemError) {
        try real.copyUserAttributes(at: dir, from: name, to: fd)
        counted()
    }
}

func say(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    var done = 0
    while done < bytes.count {
        let n = bytes.withUnsafeBytes { write(1, $0.baseAddress! + done, $0.count - done) }
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { return }
        done += n
    }
}

func fail(_ message: String) -> Never {
    let line = Array("crash-worker: error: \(message)\n".utf8)
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    exit(2)
}

let args = CommandLine.arguments
guard args.count >= 4, let op = CrashOp(rawValue: args[2]) else {
    fail("usage: crash-worker prepare|run|verify <\(CrashOp.allCases.map(\.rawValue).joined(separator: "|"))> <root> [acked]")
}
let scenario = Scenario(op, root: args[3])
switch args[1] {
case "prepare":
    do { try scenario.prepare() } catch { fail("prepare \(op.rawValue): \(error)") }
case "run":
    let killAfter = getenv("CRASH_KILL_AFTER").flatMap { Int(String(cString: $0)) }
    let io = KillingIO(killAfter: killAfter)
    do {
        let d = try scenario.open(io: io)
        let clock = ContinuousClock(), start = clock.now
        say("START")
        io.armed.store(true, ordering: .relaxed)
        try scenario.run(d) { say("ACK \($0)") }
        io.armed.store(false, ordering: .relaxed)
        let elapsed = clock.now - start
        say("IOOPS \(io.count.load(ordering: .relaxed))")
        say("JOURNALED \(io.journaled.load(ordering: .relaxed))")
        say("IOSPLIT fsyncs=\(io.fsyncs.load(ordering: .relaxed)) chunk-journal-calls=\(io.journalCalls.load(ordering: .relaxed)) chunk-journal-fsyncs=\(io.journalFsyncs.load(ordering: .relaxed))")
        say("ELAPSED_US \(elapsed.components.seconds * 1_000_000 + elapsed.components.attoseconds / 1_000_000_000_000)")
    } catch { fail("run \(op.rawValue): \(error)") }
case "verify":
    guard args.count >= 5, let acked = Int(args[4]) else { fail("verify needs the last acknowledged step") }
    let v = scenario.verify(acked: acked)
    say("VERDICT \(v.summary)")
    for line in v.details { say(line) }
    exit(v.ok ? 0 : 1)
default:
    fail("unknown command '\(args[1])'")
}
