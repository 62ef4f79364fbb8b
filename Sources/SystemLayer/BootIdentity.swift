#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Which boot of the machine this is: the kernel's random boot ID (`/proc/sys/kernel/random/boot_id`), 16 bytes.
///
/// A rollback journal that logs commits without fsyncs (FORMAT.md §6.7.2, kind 3) records it with each commit mark: a
/// mark written in this boot describes bytes still in the page cache, whatever the disk holds, so recovery may keep
/// what it marks; after a reboot (a power loss, a kernel crash) only what was fsynced counts.
package enum BootIdentity {
    private static let value = Mutex<[UInt8]?>(nil)

    /// This boot's ID. Read once per process; when the kernel does not offer it, 16 random bytes made once per
    /// process, which is safe (every mark then counts as another boot's, so recovery keeps only what was fsynced).
    package static var current: [UInt8] {
        value.withLock { v in
            if let v { return v }
            let read = readBootID() ?? randomBytes()
            v = read
            return read
        }
    }

    /// Makes the next `current` a new, random ID, as after a reboot: the power-loss model's cut (PowerLossTests), whose
    /// rebooted files are then recovered in the same process.
    package static func simulateReboot() {
        value.withLock { $0 = randomBytes() }
        simulated.withLock { $0 = true }
    }

    /// Whether `simulateReboot()` ran in this process: what the crash scenarios judge a lost acknowledged transaction by.
    package static var rebooted: Bool { simulated.withLock { $0 } }
    private static let simulated = Mutex(false)

    /// The boot ID's 36-character text as 16 bytes, or nil.
    private static func readBootID() -> [UInt8]? {
        let fd = Glibc.open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        var text = [UInt8](repeating: 0, count: 64)
        let n = text.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        guard n >= 32 else { return nil }
        var out: [UInt8] = []
        var high: UInt8?
        for c in text[0..<n] {
            let d: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = c - UInt8(ascii: "a") + 10
            default: continue
            }
            if let h = high { out.append(h << 4 | d); high = nil } else { high = d }
        }
        return out.count == 16 ? out : nil
    }

    private static func randomBytes() -> [UInt8] {
        var g = SystemRandomNumberGenerator()
        return (0..<16).map { _ in UInt8.random(in: .min ... .max, using: &g) }
    }
}
