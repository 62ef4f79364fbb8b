import DataProtectionFormat
import KernelKeyring

/// The keyring layout of dpctl 0.1: a keyring `dataprotection:<id>` holding one `user` key per class and generation.
///
/// This version neither reads nor writes it: a domain unlocked only by an older dpctl reads as locked (run `dpctl
/// unlock` again, which removes the old keys). It is still evicted, so that `lock` after an upgrade leaves no class
/// key behind that an older process could read.
struct LegacyDomainKeyring: Sendable {
    let ring: DomainKeyring

    private var ringName: String { "dataprotection:\(ring.id)" }
    private func keyName(_ c: ProtectionClass, _ g: UInt32) -> String { "dataprotection:\(ring.id):\(c.name):\(g)" }
    private var deadlineName: String { "dataprotection:\(ring.id):auto-lock-deadline" }

    /// Invalidates every generation of `classes` (the generations the keybag lists) and the deadline record;
    /// `all` also invalidates the keyring itself.
    func evict(_ classes: Set<ProtectionClass>, generations: [ProtectionClass: [UInt32]], all: Bool) throws(ProtectionError) {
        guard let r = try ring.find(.keyring, ringName) else { return }  // the common case: nothing of the old layout
        for c in classes {
            for g in generations[c] ?? [] {
                if let k = try ring.find(.user, keyName(c, g)) { try ring.invalidate(k) }
            }
        }
        if let k = try ring.find(.user, deadlineName) { try ring.invalidate(k) }
        if all { try ring.invalidate(r) }
    }
}
