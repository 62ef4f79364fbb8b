import Foundation
import TestSupport
import XCTest

/// The key-residue scan (KeyResidueTests) for protected databases (issue 21): after `lock` returns, the memory of a
/// process with class-complete connections open (raw SQLite and GRDB) holds no plaintext of their pages (only the last
/// cell each connection wrote, in SQLite's b-tree scratch buffer), while its completeUnlessOpen connection keeps its
/// cache and keeps working.
extension KeyResidueTests {
    /// Starts the rig `product` with `arguments` in the test's environment, its standard input and output piped here.
    func startRig(_ product: String, _ arguments: [String]) throws -> (Process, input: Pipe, output: Pipe) {
        let s = try startProduct(product, arguments, environment: environment)
        return (s.process, s.input, s.output)
    }

    func testNoPlaintextPageOfACompleteDatabaseRemainsInItsProcessAfterLock() throws {
        _ = try initDomain()
        try ok(["unlock", "--passphrase-file", passphraseFile])
        let dbs = dir + "/databases"
        try FileManager.default.createDirectory(atPath: dbs, withIntermediateDirectories: true)
        let (p, input, output) = try startRig("database-hold", [home, devices, dbs])
        defer {
            try? input.fileHandleForWriting.close()
            p.waitUntilExit()
        }
        var pending = Data()
        func line() -> String {
            while !pending.contains(UInt8(ascii: "\n")) {
                let d = output.fileHandleForReading.availableData
                if d.isEmpty { break }
                pending += d
            }
            let end = pending.firstIndex(of: UInt8(ascii: "\n")) ?? pending.endIndex
            defer { pending = Data(pending[pending.index(after: min(end, pending.endIndex - 1))...]) }
            return String(decoding: pending[..<end], as: UTF8.self)
        }
        func ask(_ command: String) -> String {
            input.fileHandleForWriting.write(Data((command + "\n").utf8))
            return line()
        }
        let ready = line()
        let sums = ready.split(separator: " ").dropFirst().compactMap { Int($0) }
        guard ready.hasPrefix("READY "), sums.count == 3 else { return XCTFail("database-hold: \(ready)") }

        // The markers of every row of the three databases (the worker made them inside SQLite; none is spelled here
        // whole until now, and this process is not scanned).
        let tags = ["ARAW", "AGRDB", "BRAW"]
        var needles: [(String, [UInt8])] = []
        for tag in tags {
            for i in 1...300 { needles.append(("\(tag) \(i)", Array("PAGEWIPE-\(tag)-\(String(format: "%05d", i))-".utf8))) }
        }
        func counts(_ found: Set<String>) -> [String: Int] {
            Dictionary(uniqueKeysWithValues: tags.map { t in (t, found.filter { $0.hasPrefix(t + " ") }.count) })
        }

        // Control: before the lock every database's rows are in the worker's memory (its page caches).
        let before = counts(find(needles, in: try memory(of: p.processIdentifier)))
        for tag in tags { XCTAssertGreaterThan(before[tag]!, 0, "the memory scan cannot see the rows of \(tag) that are there") }

        let r = try ok(["lock"])
        let foundAfter = find(needles, in: try memory(of: p.processIdentifier))
        let after = counts(foundAfter)
        // The one cell SQLite keeps outside every page: the last row a connection inserted, in its b-tree's scratch
        // buffer (BtShared.pTmpSpace: allocated once per connection, overwritten by its next insert, freed at close; no
        // API or hook reaches it). SECURITY.md names it. Every page the connections read or wrote is gone.
        let left = foundAfter.filter { $0.hasPrefix("A") && $0 != "ARAW 300" && $0 != "AGRDB 300" }
        XCTAssertEqual(left.count, 0, "plaintext rows of a complete database left in memory after lock: \(left.count), e.g. \(left.sorted().prefix(5))")
        XCTAssertGreaterThan(after["BRAW"]!, 0, "the completeUnlessOpen connection's cache was wiped")

        // Locked: class complete fails (never zeros as rows); completeUnlessOpen keeps working on its cache and file.
        let locked = ask("check")
        XCTAssertEqual(locked, "araw=locked agrdb=locked braw=\(sums[2])")

        // After unlock the same connections read every committed row again (their caches were emptied, not zeroed),
        // and new connections read them too, with integrity_check ok.
        try ok(["unlock", "--passphrase-file", passphraseFile])
        let resumed = ask("check")
        XCTAssertEqual(resumed, "araw=\(sums[0]) agrdb=\(sums[1]) braw=\(sums[2])")
        let reopened = ask("reopen")
        XCTAssertEqual(reopened, "araw=\(sums[0]) agrdb=\(sums[1]) integrity=ok")
        print("database residue: \(needles.count) row markers sought; found before lock \(tags.map { "\($0) \(before[$0]!)" }.joined(separator: ", ")); after lock \(tags.map { "\($0) \(after[$0]!)" }.joined(separator: ", ")); locked: \(locked); after unlock: \(resumed); reopened: \(reopened); \(r.stderr.trimmingCharacters(in: .whitespacesAndNewlines))")
    }

    /// A process that initialized SQLite before registering the VFS cannot get the page wipe: a complete database refuses
    /// to open there (typed, naming the fix), rather than opening without it; other classes open as before.
    func testACompleteDatabaseRefusesToOpenWhereSQLiteWasInitializedFirst() throws {
        _ = try initDomain()
        try ok(["unlock", "--passphrase-file", passphraseFile])
        let (p, input, output) = try startRig("database-hold", [home, devices, dir, "initialized-first"])
        try input.fileHandleForWriting.close()
        let said = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        XCTAssertTrue(said.hasPrefix("installed=false complete=error("), said)
        XCTAssertTrue(said.contains("SQLite was initialized before the protected VFS was registered"), said)
        XCTAssertTrue(said.hasSuffix("completeUnlessOpen=1\n"), said)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/first-a.db"), "the refused open left a database file")
        print("initialized first: \(said.trimmingCharacters(in: .whitespacesAndNewlines))")
    }
}
