import Foundation
import XCTest

/// Passphrases typed at a terminal: prompted on the tty, never echoed. A real pseudo-terminal from `script(1)`.
final class TerminalTests: DpctlTestCase {
    /// Runs `arguments` under a pseudo-terminal, answering each prompt that appears with the next line of `answers`.
    private func onTerminal(_ arguments: [String], answers: [String]) throws -> (status: Int32, transcript: String) {
        let command = ([dpctlPath] + arguments).map { "'\($0)'" }.joined(separator: " ")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        p.arguments = ["--quiet", "--return", "--command", command, "/dev/null"]
        p.environment = environment
        let input = Pipe(), output = Pipe()
        p.standardInput = input
        p.standardOutput = output
        p.standardError = output
        try p.run()
        var transcript = Data()
        var answered = 0
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }  // end of output: the command finished
            transcript += chunk
            let prompts = String(decoding: transcript, as: UTF8.self).components(separatedBy: "passphrase: ").count - 1
            while answered < min(prompts, answers.count) {
                input.fileHandleForWriting.write(Data((answers[answered] + "\n").utf8))
                answered += 1
            }
        }
        try input.fileHandleForWriting.close()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: transcript, as: UTF8.self))
    }

    func testPassphrasesArePromptedOnTheTerminalWithoutEcho() throws {
        let typed = "typed at a terminal 42"
        let created = try onTerminal(["init", "--kdf-preset", "minimum"], answers: [typed, typed])
        XCTAssertEqual(created.status, 0, created.transcript)
        XCTAssertTrue(created.transcript.contains("Enter passphrase: ") && created.transcript.contains("Repeat passphrase: "), created.transcript)
        XCTAssertFalse(created.transcript.contains(typed), "the passphrase was echoed: \(created.transcript)")

        let wrong = try onTerminal(["unlock"], answers: ["not it"])
        XCTAssertEqual(wrong.status, 77, wrong.transcript)
        XCTAssertFalse(wrong.transcript.contains("not it"), wrong.transcript)

        let opened = try onTerminal(["unlock"], answers: [typed])
        XCTAssertEqual(opened.status, 0, opened.transcript)
        XCTAssertFalse(opened.transcript.contains(typed), opened.transcript)
        XCTAssertEqual(try unlocked(), [true, true, true, true])

        let mismatch = try onTerminal(["passwd"], answers: [typed, "new one", "new 0ne"])
        XCTAssertEqual(mismatch.status, 64, mismatch.transcript)
        XCTAssertTrue(mismatch.transcript.contains("differ"), mismatch.transcript)
    }
}
