import SystemLayer

#if canImport(Glibc)
import Glibc
#endif

/// The lock state every process of one domain shares on this host: the user words of its rendezvous's state page.
///
/// Layout (all fields 64-bit, native endian, accessed with sequentially
/// consistent atomics; offsets from the first user word, which is byte 8 of the
/// page: byte 0 is the rendezvous's membership generation):
///
/// | offset | field |
/// |---|---|
/// | 0 | magic `DPLIVE01` |
/// | 8 | lock epoch: +1 on every lock, so a handle compares one number per operation |
/// | 16 | locked-class mask: bit `rawValue` set while that class is locked |
/// | 24 | auto-lock deadline, Unix milliseconds (0: none; -1: being locked) |
/// | 32 | auto-lock grace, milliseconds: `willLock` goes out this long before the deadline |
/// | 40 | the auto-lock deadline whose `willLock` a process has claimed (0: none) |
///
/// A page written by an older version has zeros at 32 and 40: no grace, nothing claimed.
///
/// A fresh page (the runtime directory is emptied by every reboot) is the state before the first unlock since boot:
/// the process that creates it marks A, B and C locked (`bootLocked`) before it writes the magic, so no process ever
/// reads a page that says "unlocked" before an `unlock` said so. Every reader (admission, `isLocked`,
/// `isProtectedDataAvailable`, `dpctl status`) takes its answer from this one page.
///
/// The kernel keyring is per host, and so is this page: it lives in the
/// user's runtime directory, never on a shared filesystem.
final class LiveState: RevocationState, @unchecked Sendable {
    // @unchecked: the mapping is immutable after init; every access is atomic.
    static let magic: UInt64 = 0x3130_4556_494C_5044  // "DPLIVE01" little-endian
    /// The user words this layout needs (six).
    static let words = 6
    /// The rendezvous whose page this is (kept so the mapping lives as long as this state).
    private let rendezvous: RendezvousDirectory
    /// The first user word, kept here so the per-operation check is one load with no hop through the page object.
    private let base: UnsafeMutableRawPointer
    let path: String

    /// What word 0 holds while the process that created the page writes its boot state ("DPLIVE00").
    static let initializing: UInt64 = 0x3030_4556_494C_5044
    /// The classes a fresh page marks locked: every class with a passphrase-wrapped key (A, B and C), as after a
    /// reboot before the first unlock; D never locks.
    static let bootLocked: Set<ProtectionClass> = [.complete, .completeUnlessOpen, .completeUntilFirstUserAuthentication]

    /// Takes the lock state from the user words of `rendezvous`'s state page (at `path`, mode 0600).
    ///
    /// The first process to attach claims the zeroed page (0 → `initializing`, one compare-and-swap), writes the boot
    /// state (`bootLocked`), then the magic; a process that attaches meanwhile waits for the magic (two stores away),
    /// so none reads the mask of a page still being set up.
    init(rendezvous: RendezvousDirectory, path: String) throws(ProtectionError) {
        self.path = path
        self.rendezvous = rendezvous
        base = rendezvous.userBase
        if field(0).compareExchange(expected: 0, desired: Self.initializing) {
            field(16).store(Self.mask(Self.bootLocked))
            field(0).store(Self.magic)
        }
        var spins = 0
        while field(0).load() == Self.initializing, spins < 10_000 {
            sched_yield()
            spins += 1
        }
        guard field(0).load() == Self.magic else {
            throw ProtectionError(.io(EIO), "unable to use the lock state '\(path)': it is not a lock-state page (or its creator died setting it up); remove it and retry", path: path)
        }
    }

    @inline(__always) private func field(_ offset: Int) -> AtomicWord64 {
        AtomicWord64((base + offset).assumingMemoryBound(to: UInt64.self))
    }

    /// The current lock epoch (one atomic load: the per-operation check).
    @inline(__always) var epoch: UInt64 { field(8).load() }

    /// The classes currently locked.
    var lockedMask: UInt64 { field(16).load() }

    @inline(__always) func isLocked(_ c: ProtectionClass) -> Bool { lockedMask & (1 << UInt64(c.rawValue)) != 0 }

    /// Marks `classes` locked, then advances the epoch; returns the new epoch.
    ///
    /// The mask is set first, so any handle that sees the new epoch also sees the mask.
    @discardableResult
    func lock(_ classes: Set<ProtectionClass>) -> UInt64 {
        field(16).fetchOr(Self.mask(classes))
        return field(8).fetchAdd(1) + 1
    }

    /// Clears `classes` from the locked mask (the epoch is unchanged: unlocking revokes nothing).
    func unlock(_ classes: Set<ProtectionClass>) {
        field(16).fetchAnd(~Self.mask(classes))
    }

    /// Whether keys of class `c` must be dropped now: A and C when locked, or A when the auto-lock deadline has
    /// passed and no process has applied it yet (B keeps open files; D never locks).
    @inline(__always) func revokes(_ c: ProtectionClass) -> Bool {
        guard c == .complete || c == .completeUntilFirstUserAuthentication else { return false }
        if isLocked(c) { return true }
        return autoLockPassed && LiveLock.lockClasses.contains(c)
    }

    /// Whether no key of class `c` may be used now, not even one already in this process: `c` is marked locked, or
    /// it is one of the classes an auto-lock locks and that lock's deadline has passed (`ClassKeyCache`, `LiveLock.isLocked`).
    @inline(__always) func refusesKey(_ c: ProtectionClass) -> Bool {
        isLocked(c) || (autoLockPassed && LiveLock.lockClasses.contains(c))
    }

    /// Whether an auto-lock deadline has passed, or its lock is running (`lockingMarker`).
    @inline(__always) var autoLockPassed: Bool {
        let d = autoLockDeadline
        return d != 0 && d <= unixMillis()
    }

    /// The auto-lock deadline in Unix milliseconds, 0 for none, or `lockingMarker` while its lock runs.
    var autoLockDeadline: Int64 {
        get { Int64(bitPattern: field(24).load()) }
        set { field(24).store(UInt64(bitPattern: newValue)) }
    }

    /// What the deadline field holds while an auto-lock's lock step runs: already passed, so every
    /// per-operation check treats the classes as locked until the mask says so.
    static let lockingMarker: Int64 = -1

    /// How long before the auto-lock deadline `willLock` goes out, in milliseconds.
    var autoLockGraceMillis: Int64 {
        get { Int64(bitPattern: field(32).load()) }
        set { field(32).store(UInt64(bitPattern: newValue)) }
    }

    /// Sets the auto-lock deadline (0: none) and its grace; the grace is written first, so whoever sees the deadline sees its grace.
    func setAutoLock(deadline: Int64, graceMillis: Int64) {
        autoLockGraceMillis = graceMillis
        autoLockDeadline = deadline
    }

    /// Claims the warning of the auto-lock at `deadline`: true for exactly one caller per deadline, host-wide.
    func claimWarning(_ deadline: Int64) -> Bool {
        let claimed = field(40).load()
        return claimed != UInt64(bitPattern: deadline) && field(40).compareExchange(expected: claimed, desired: UInt64(bitPattern: deadline))
    }

    /// The deadline whose warning was claimed (0: none).
    var warnedDeadline: Int64 { Int64(bitPattern: field(40).load()) }

    /// Locks `classes` for the auto-lock at `deadline`, at most once: the first caller wins the compare-and-swap.
    ///
    /// Returns the new epoch, or nil when the deadline is no longer `deadline`
    /// (an unlock set another, a `lock` cleared it, or another process won).
    /// The deadline reads "being locked" until the mask and epoch are set, so no
    /// per-operation check sees the classes unlocked in between.
    func lockAtDeadline(_ deadline: Int64, _ classes: Set<ProtectionClass>) -> UInt64? {
        guard deadline > 0, field(24).compareExchange(expected: UInt64(bitPattern: deadline), desired: UInt64(bitPattern: Self.lockingMarker)) else { return nil }
        let epoch = lock(classes)
        _ = field(24).compareExchange(expected: UInt64(bitPattern: Self.lockingMarker), desired: 0)  // an unlock meanwhile keeps its own deadline
        return epoch
    }

    static func mask(_ classes: Set<ProtectionClass>) -> UInt64 { classes.reduce(0) { $0 | (1 << UInt64($1.rawValue)) } }
}

/// Unix time in milliseconds (CLOCK_REALTIME_COARSE: a vDSO read, no syscall).
@inline(__always)
func unixMillis() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME_COARSE, &ts)
    return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
}
