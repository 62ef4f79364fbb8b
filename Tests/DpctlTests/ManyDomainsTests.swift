import Foundation
import XCTest

/// One non-root uid holds as many unlocked domains as its default kernel key quota allows at one key per domain,
/// `dpctl doctor` predicts that number, and the unlock past it fails with an error naming the sysctl to raise.
///
/// Runs `scripts/measure-domain-quota` (as root: it switches to the throwaway user `dpquotatest`, in a fresh session
/// keyring, keys under its @u) with this build's dpctl. Fails against the layout of a keyring plus a key per class,
/// where the 49th unlock hit `maxkeys`.
final class ManyDomainsTests: DpctlTestCase {
    func testOneUidHoldsAsManyDomainsAsTheDefaultQuotaAllowsAndTheErrorNamesTheSysctl() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: switches to the throwaway user dpquotatest; run `sudo swift test`") }
        let limits = try ["maxkeys", "maxbytes"].map { try String(contentsOfFile: "/proc/sys/kernel/keys/\($0)", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines) }
        guard limits == ["200", "20000"] else { throw XCTSkip("the kernel's key quota is not the default (maxkeys \(limits[0]), maxbytes \(limits[1]))") }
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("scripts/measure-domain-quota").path
        let r = try run(script, [dpctlPath, "400"])
        XCTAssertEqual(r.status, 0, r.stderr)
        print(r.out)
        func number(after prefix: String) -> Int? {
            r.out.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Int($0.dropFirst(prefix.count).prefix { $0.isNumber }) }
        }
        let room = try XCTUnwrap(number(after: "doctor: room "), r.out)
        let unlocked = try XCTUnwrap(number(after: "domains unlocked: "), r.out)
        // 48 domains before (a keyring and three keys each); at one 161-byte key each, maxbytes allows ≈ 120.
        XCTAssertGreaterThanOrEqual(unlocked, 115, "one key per domain should hold far more than the 48 of the old layout")
        XCTAssertGreaterThanOrEqual(unlocked, room, "dpctl doctor promised more room than there was")
        XCTAssertLessThanOrEqual(unlocked, room + 2, "dpctl doctor is conservative by at most two domains")
        XCTAssertEqual(number(after: "unlocked classes of domain 1: "), 4, "the first domain is still unlocked at the end")
        XCTAssertEqual(number(after: "unlocked classes of domain \(unlocked): "), 4)
        let failure = String(try XCTUnwrap(r.out.split(separator: "\n").first { $0.hasPrefix("unlock of domain \(unlocked + 1) failed") }, r.out))
        for needle in ["key quota is used up", "kernel.keys.maxbytes binds", "sysctl -w kernel.keys.maxbytes=", "dpctl doctor --domains N"] {
            XCTAssertTrue(failure.contains(needle), "the quota error should say '\(needle)': \(failure)")
        }
        // Every domain's key went with `lock --evict-all`: the uid holds no more than its own keyrings.
        let after = String(try XCTUnwrap(r.out.split(separator: "\n").first { $0.hasPrefix("after eviction:") }, r.out))
        let qnkeys = try XCTUnwrap(after.split(separator: " ").dropFirst(5).first.flatMap { Int($0.split(separator: "/")[0]) }, after)
        XCTAssertLessThan(qnkeys, 8, after)
    }
}
