// guarantee-worker HOME DEVICES DIRECTORY ENTRY CLASS TIMING
//
// Runs one cell of the guarantee matrix in a process of its own, for GuaranteeMatrixTests: opens the domain (keys in
// the session keyring it inherited), runs the cell's driver and prints `RESULT <line>`. With TIMING
// locked-while-open it prints `OPENED` when the lock should happen: after a handle's open (it then waits for a line on
// standard input), or inside a whole-file call once its key was obtained (it then waits for the lock to begin).
@_spi(Testing) import DataProtection
import Foundation
import GuaranteeMatrix
import Synchronization

func say(_ s: String) {
    print(s)
    fflush(nil)
}

let args = CommandLine.arguments
guard args.count == 7, let e = Int(args[4]).flatMap(ProtectedDataEntryPoint.init(rawValue:)),
      let c = UInt8(args[5]).flatMap(ProtectionClass.init(rawValue:)), let timing = LockTiming(rawValue: args[6])
else {
    FileHandle.standardError.write(Data("usage: guarantee-worker HOME DEVICES DIRECTORY ENTRY CLASS TIMING\n".utf8))
    exit(64)
}
let cell = MatrixCell(e, c, timing)
let fixture: MatrixFixture
do {
    let domain = try ProtectionDomain.open(at: DomainLocation(home: args[1], deviceDirectory: args[2]), keyStore: .kernel(.session))
    fixture = try MatrixFixture(domain: domain, directory: args[3], create: false)
} catch {
    say("SETUP \(error)")
    exit(70)
}
let once = Atomic<Bool>(false)
/// Between a handle's open and its use: the parent locks, then says GO.
let waitForGo: @Sendable (ProtectionClass) -> Void = { _ in
    say("OPENED")
    _ = readLine()
}
/// Inside a whole-file call, with its key obtained and its handle not yet registered: the parent locks now. This
/// process's listener cannot revoke until the call leaves the acquisition, so the parent's lock waits for it; the call
/// goes on once the shared lock state says locked (the lock has begun). Bounded.
let waitForLockToBegin: @Sendable (ProtectionClass) -> Void = { _ in
    guard !once.exchange(true, ordering: .relaxed) else { return }
    say("OPENED")
    let limit = Date().addingTimeInterval(20)
    while !fixture.domain.liveLock.isLocked(.complete) && Date() < limit { usleep(200) }
}
ProtectedDataEntryPoint.resetObserved()
let result: CellResult
switch timing {
case .lockedWhileOpen where cell.opensHandle:
    result = CellResult {
        let h = try fixture.open(cell)
        waitForGo(c)
        return try fixture.use(cell, h)
    }
case .lockedWhileOpen:
    result = AdmissionProbe.with(waitForLockToBegin) { CellResult { try fixture.use(cell, nil) } }
case .unlocked, .lockedBeforeOpen:
    result = CellResult { try fixture.use(cell, try fixture.open(cell)) }
}
say("OBSERVED " + ProtectedDataEntryPoint.observed.map { String($0.rawValue) }.sorted().joined(separator: ","))
say("RESULT " + result.line)
// Stay attached until the parent closes standard input: a lock the parent started meanwhile gets this process's
// acknowledgement (a process that exits mid-lock counts as one that did not answer).
while readLine() != nil {}
