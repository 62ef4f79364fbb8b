// checkAvailable in this process, and a refused keyring seen from a child run under keyctl-deny.
import Foundation
import KernelKeyring
import TestSupport
import XCTest

final class AvailabilityTests: KeyringTestCase {
    func testKeyringIsAvailableHere() throws {
        try Keyring.checkAvailable()
    }

    func testProbeSucceedsWithoutTheFilter() throws {
        let probe = try builtProduct("keyring-probe")
        let result = try runChild(probe, [])
        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderr)
        XCTAssertEqual(result.stdoutText, "checkAvailable: ok\nadd: ok\n")
    }

    func testSeccompRefusalIsReportedAsUnavailable() throws {
        let deny = try builtProduct("keyctl-deny")
        let probe = try builtProduct("keyring-probe")
        for errno in ["EPERM", "EACCES", "ENOSYS"] {
            let result = try runChild(deny, ["--errno=\(errno)", probe])
            let lines = result.stdoutText.split(separator: "\n")
            XCTAssertEqual(result.status, 69, "\(errno): \(result.stdoutText)\(result.stderr)")
            XCTAssertEqual(lines.count, 2, result.stdoutText)
            XCTAssertTrue(lines.first?.hasPrefix("checkAvailable: unavailable ") ?? false, result.stdoutText)
            XCTAssertTrue(lines.last?.hasPrefix("add: unavailable ") ?? false, result.stdoutText)
            for line in lines {
                XCTAssertTrue(line.contains("(\(errno))"), String(line))
                XCTAssertTrue(line.contains("the kernel keyring is blocked"), String(line))
                XCTAssertTrue(line.contains("seccomp profile"), String(line))
                XCTAssertTrue(line.contains("in-process key store"), String(line))
            }
            XCTAssertTrue(lines.last?.contains("user key 'keyring-probe:") ?? false, "the add message names the key")
        }
    }

    func testDenyToolRejectsBadUsage() throws {
        let deny = try builtProduct("keyctl-deny")
        XCTAssertEqual(try runChild(deny, []).status, 125)
        XCTAssertEqual(try runChild(deny, ["--errno=EBOGUS", "/bin/true"]).status, 125)
        XCTAssertEqual(try runChild(deny, ["/nonexistent/program"]).status, 127)
        XCTAssertEqual(try runChild(deny, ["/bin/true"]).status, 0)
    }
}
