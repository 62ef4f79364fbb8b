import Foundation
@_spi(Testing) import DataProtection  // the testing SPI: the file-system seam, test hooks
import FuzzHarnesses
import XCTest

/// Replays the fuzzers' committed corpora and every input that ever crashed them
/// (`Fuzz/Corpus/<target>`, `Fuzz/Regressions/<target>`): protected files through the real
/// reader (plaintext or a typed `ProtectionError`, never a crash); keybags through the fuzz
/// target's own harness (the FuzzHarnesses target, which Fuzz/ links as a product) and path
/// layouts through FuzzPath's (the same target), so the replay
/// keeps the fuzzers' oracles: typed keybag errors, no escape from a container root.
final class FuzzRegressionTests: XCTestCase {
    let fuzz = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fuzz")

    /// The committed inputs of one target: its seed corpus, then its regressions.
    func inputs(_ target: String) -> [(name: String, bytes: [UInt8])] {
        ["Corpus/\(target)", "Regressions/\(target)"].flatMap { sub in
            let dir = fuzz.appendingPathComponent(sub)
            return ((try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []).sorted().filter { !$0.hasPrefix(".") }.compactMap { name in
                (try? Data(contentsOf: dir.appendingPathComponent(name))).map { ("\(sub)/\(name)", [UInt8]($0)) }
            }
        }
    }

    func testCorpusAndRegressionsEndInPlaintextOrTypedErrors() throws {
        // The fuzz targets' keys (FuzzHarnesses): class c's secret is 32 bytes of value c.
        let files = ProtectedFiles(keys: try fuzzKeys())
        var replayed = 0, authenticated = 0
        for sub in ["Corpus/header", "Regressions/header", "Regressions/chunks"] {
            let dir = fuzz.appendingPathComponent(sub)
            for name in (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? [] where !name.hasPrefix(".") {
                let path = dir.appendingPathComponent(name).path
                do {
                    _ = try files.read(path)
                    authenticated += 1
                } catch {
                    XCTAssertFalse(error.message.isEmpty)  // typed throws: always a ProtectionError
                }
                replayed += 1
            }
        }
        XCTAssertGreaterThanOrEqual(replayed, 12, "the committed corpus is missing")
        XCTAssertGreaterThanOrEqual(authenticated, 12, "the seed corpus should authenticate under the fuzz keys")
        print("fuzz regressions: \(replayed) inputs replayed, \(authenticated) authenticated, the rest typed errors")
    }

    func testKeybagCorpusAndRegressionsKeepTheKeybagOracles() throws {
        let harness = try KeybagFuzzHarness()
        let inputs = inputs("keybag")
        XCTAssertGreaterThanOrEqual(inputs.count, 3, "the committed keybag corpus is missing")
        for (name, bytes) in inputs { XCTAssertNil(harness.run(bytes), name) }
        // The seeds are valid keybags under the harness's secrets: every one authenticates and unwraps.
        for seed in try harness.seeds() { XCTAssertNil(harness.run(seed)) }
    }

    func testPathCorpusAndRegressionsNeverEscapeTheRoot() throws {
        let harness = PathFuzzHarness()
        defer { harness.remove() }
        let inputs = inputs("path")
        XCTAssertGreaterThanOrEqual(inputs.count, 7, "the committed path corpus is missing")
        for (name, bytes) in inputs { XCTAssertNil(harness.run(bytes), name) }
        // The oracle itself: an escape through an unconfined open is caught.
        let escape = try XCTUnwrap(harness.check(open(harness.outside, Confinement.pathOnly | O_DIRECTORY), "open", "../outside"))
        XCTAssertTrue(escape.contains("escaped the root"), escape)
    }
}
