import DataProtectionFormat
import ExamplePrograms
import Foundation
import TestSupport
import XCTest

/// The README's "Running it in a container" (issue 25, item 8), run for real: the example service
/// (Examples/ContainerService) under `keyctl-deny`, which refuses add_key, keyctl and request_key with EPERM as
/// Docker's default seccomp profile does.
final class ContainerExampleTests: DpctlTestCase {
    var example = ""
    var deny = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        example = try builtProduct(ExamplePrograms.containerExample)
        deny = try builtProduct("keyctl-deny")
    }

    func testWhereSeccompRefusesTheKeyringTheServiceRunsOnTheInProcessStore() throws {
        let state = dir + "/state"
        let r = try run(deny, [example, state])
        XCTAssertEqual(r.status, 0, r.stderr)
        let lines = r.out.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.filter { $0.hasPrefix("key store:") }, ["key store: kernel keyring", "key store: in-process"], r.out)
        XCTAssertTrue(lines.contains { $0.hasPrefix("the kernel keyring is refused here") }, r.out)
        XCTAssertTrue(lines.contains("read after lock: refused (locked)"), r.out)
        XCTAssertTrue(lines.contains("read after unlock: kept in a container"), r.out)
        // The file it wrote is protected on disk: no plaintext byte of it is there.
        let onDisk = try bytes(state + "/note.txt")
        XCTAssertNil(onDisk.range(of: Data("kept in a container".utf8)), "plaintext on disk")
        let header = try FileHeader.parse(Array(onDisk.prefix(FileHeader.size)))
        XCTAssertEqual(header.protectionClass, .complete)
    }

    func testTheKernelStoreUnderSeccompStopsWithOneErrorNamingBothFixesAndWritesNothing() throws {
        let state = dir + "/state"
        let r = try run(deny, [example, state, "--key-store", "kernel"])
        XCTAssertEqual(r.status, 69, r.out + r.stderr)
        XCTAssertEqual(r.stderr.components(separatedBy: "dp-container-example:").count, 2, "one error: \(r.stderr)")
        for fix in ["seccomp", "add_key, keyctl and request_key", "keyStore: .inProcess"] {
            XCTAssertTrue(r.stderr.contains(fix), "the error lacks '\(fix)': \(r.stderr)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: state), "something was written under \(state)")
    }

    func testWithTheKeyringAllowedTheServiceKeepsItsKeysInTheKernel() throws {
        let r = try run(example, [dir + "/state"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.out.split(separator: "\n").filter { $0.hasPrefix("key store:") }, ["key store: kernel keyring"], r.out)
        XCTAssertTrue(r.out.contains("read after lock: refused (locked)"), r.out)
    }

    /// The seccomp rule the README gives allows exactly the system calls `keyctl-deny` refuses (the calls whose
    /// refusal the two tests above show the library needs) and that the library's error names.
    func testTheSeccompRuleAllowsExactlyTheKeyringSystemCalls() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized
        let profile = try JSONSerialization.jsonObject(with: try Data(contentsOf: root.appendingPathComponent("docs/container/seccomp-keyring.json")))
        let rules = try XCTUnwrap((profile as? [String: Any])?["syscalls"] as? [[String: Any]])
        XCTAssertEqual(rules.count, 1)
        XCTAssertEqual(rules.first?["action"] as? String, "SCMP_ACT_ALLOW")
        let allowed = Set(try XCTUnwrap(rules.first?["names"] as? [String]))
        let rig = try String(contentsOf: root.appendingPathComponent("Tests/Support/keyctl-deny/main.c"), encoding: .utf8)
        let denied = Set(["add_key", "keyctl", "request_key"].filter { rig.contains("__NR_\($0)") })
        XCTAssertEqual(allowed, denied, "docs/container/seccomp-keyring.json and keyctl-deny disagree")
        XCTAssertEqual(allowed, ["add_key", "keyctl", "request_key"])
    }
}
