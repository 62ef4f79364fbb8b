// The notes service run for real: HTTP on loopback, dpctl lock and unlock from outside, SIGTERM during uploads.
import Foundation
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class NotesServiceTests: NotesServiceTestCase {
    /// Notes read back exactly, per user, and are `complete` protected files on disk: no plaintext byte sequence of
    /// theirs is in the file; bad names and unknown users are refused; a delete removes the file.
    func testNotesReadBackExactlyPerUserAndAreCiphertextOnDisk() throws {
        let service = try startService()
        let alice = payload("alice note", 40_000), bob = payload("bob note", 3_000)
        XCTAssertEqual(try http("PUT", "\(service.url)/users/alice/notes/n1", alice).status, 204)
        XCTAssertEqual(try http("PUT", "\(service.url)/users/bob/notes/n1", bob).status, 204)
        assertSameBytes(try http("GET", "\(service.url)/users/alice/notes/n1").body, alice)
        assertSameBytes(try http("GET", "\(service.url)/users/bob/notes/n1").body, bob, "each user has their own n1")
        XCTAssertEqual(try http("GET", "\(service.url)/users/alice/notes").text, "n1\n")

        // On disk: a protected file of class complete holding the note's size, with no plaintext in it.
        for (user, note) in [("alice", alice), ("bob", bob)] {
            let raw = try rawBytes(user, "Documents/notes/n1")
            XCTAssertGreaterThan(raw.count, note.count)
            XCTAssertFalse(raw.containsBytes(Array(note.prefix(32))), "\(user)'s note is stored in plaintext")
            XCTAssertFalse(raw.containsBytes(Array(note.suffix(64))), "\(user)'s note is stored in plaintext")
            let h = try header(user, "Documents/notes/n1")
            XCTAssertEqual(h.protection, "complete")
            XCTAssertEqual(h.size, note.count)
        }

        // A replace is whole; the old note is gone, and no temporary file is left beside it.
        let again = payload("alice note, second version", 20_000)
        XCTAssertEqual(try http("PUT", "\(service.url)/users/alice/notes/n1", again).status, 204)
        assertSameBytes(try http("GET", "\(service.url)/users/alice/notes/n1").body, again)
        XCTAssertEqual(try entries("alice", "Documents/notes"), ["n1"])

        // Refusals, each with its status and a body that says why.
        let hidden = try http("PUT", "\(service.url)/users/alice/notes/.hidden", Array("x".utf8))
        XCTAssertEqual(hidden.status, 400)
        XCTAssertTrue(hidden.text.contains("not a valid name"), hidden.text)
        XCTAssertEqual(try http("PUT", "\(service.url)/users/alice/notes/\(String(repeating: "a", count: 129))", Array("x".utf8)).status, 400)
        XCTAssertEqual(try http("GET", "\(service.url)/users/mallory/notes/n1").status, 404)
        XCTAssertEqual(try http("GET", "\(service.url)/users/alice/notes/absent").status, 404)
        XCTAssertEqual(try entries("alice", "Documents/notes"), ["n1"], "a refused request leaves nothing behind")

        XCTAssertEqual(try http("DELETE", "\(service.url)/users/alice/notes/n1").status, 204)
        XCTAssertEqual(try http("GET", "\(service.url)/users/alice/notes/n1").status, 404)
        XCTAssertEqual(try entries("alice", "Documents/notes"), [])
        assertSameBytes(try http("GET", "\(service.url)/users/bob/notes/n1").body, bob, "bob's note is untouched")

        // The caches are excluded from backup by the container's own marker (CACHEDIR.TAG, which tar, borg and restic honour).
        XCTAssertTrue(FileManager.default.fileExists(atPath: onDisk("alice", "Library/Caches/CACHEDIR.TAG")))
        XCTAssertEqual(service.terminate(), 0)
    }

    /// `dpctl lock` from outside: alice's notes answer 423 with what to run and stay as they were on disk; bob's domain
    /// is not touched; an upload is still accepted, waits in the Inbox (ciphertext) while the worker waits for the
    /// unlock, and is processed into Documents after `dpctl unlock`.
    func testWhileLockedNotesAnswer423AndAQueuedUploadIsProcessedAfterUnlock() throws {
        let service = try startService()
        let note = payload("alice locked note", 30_000), bobNote = payload("bob", 500)
        XCTAssertEqual(try http("PUT", "\(service.url)/users/alice/notes/n1", note).status, 204)
        XCTAssertEqual(try http("PUT", "\(service.url)/users/bob/notes/n1", bobNote).status, 204)
        let stored = try rawBytes("alice", "Documents/notes/n1")

        try dpctl("alice", ["lock"])
        let read = try http("GET", "\(service.url)/users/alice/notes/n1")
        XCTAssertEqual(read.status, 423)
        for part in ["user 'alice'", "is locked", "run `dpctl unlock`", "DATAPROTECTION_HOME=\(home("alice"))"] {
            XCTAssertTrue(read.text.contains(part), "the 423 body lacks \(part): \(read.text)")
        }
        XCTAssertFalse(read.body.containsBytes(Array(note.prefix(16))), "a locked read returned plaintext")
        XCTAssertEqual(try http("PUT", "\(service.url)/users/alice/notes/n1", payload("overwrite", 100)).status, 423)
        XCTAssertEqual(try http("PUT", "\(service.url)/users/alice/notes/n2", payload("new", 100)).status, 423)
        assertSameBytes(try rawBytes("alice", "Documents/notes/n1"), stored, "a refused write changed the stored note")
        XCTAssertEqual(try entries("alice", "Documents/notes"), ["n1"], "a refused write left a file behind")
        XCTAssertTrue(try http("GET", "\(service.url)/users/alice/status").text.contains("\"locked\":true"))
        assertSameBytes(try http("GET", "\(service.url)/users/bob/notes/n1").body, bobNote, "bob's domain is his own")

        // An upload while locked: accepted into the Inbox, and the worker waits for the unlock.
        let upload = payload("alice upload", 50_000)
        let accepted = try http("PUT", "\(service.url)/users/alice/uploads/u1", upload)
        XCTAssertEqual(accepted.status, 202, accepted.text)
        XCTAssertTrue(accepted.text.contains("dpctl unlock"), accepted.text)
        let waiting = "worker: upload 'u1' of user 'alice' waits for unlock"
        XCTAssertTrue(service.said(waiting), service.lines.joined(separator: "\n"))
        XCTAssertEqual(try http("GET", "\(service.url)/users/alice/uploads/u1").status, 202)
        XCTAssertEqual(try http("PUT", "\(service.url)/users/alice/uploads/u1", upload).status, 409, "an upload's name is taken while it is queued")
        XCTAssertEqual(try entries("alice", "Documents/Inbox"), ["u1"])
        XCTAssertEqual(try entries("alice", "Documents/uploads"), [], "processed while locked")
        XCTAssertFalse(try rawBytes("alice", "Documents/Inbox/u1").containsBytes(Array(upload.prefix(24))), "the Inbox item is plaintext")
        XCTAssertEqual(try header("alice", "Documents/Inbox/u1").protection, "completeUnlessOpen")

        try dpctl("alice", ["unlock", "--passphrase-file", passphraseFile])
        XCTAssertTrue(try eventually(seconds: 30) { try http("GET", "\(service.url)/users/alice/uploads/u1").status == 200 })
        assertSameBytes(try http("GET", "\(service.url)/users/alice/uploads/u1").body, upload)
        XCTAssertTrue(service.lines.contains("worker: processed upload 'u1' of user 'alice'"))
        XCTAssertEqual(try entries("alice", "Documents/Inbox"), [], "the processed item is still in the Inbox")
        XCTAssertEqual(try entries("alice", "Documents/uploads"), ["u1"])
        XCTAssertEqual(try header("alice", "Documents/uploads/u1").protection, "complete")
        XCTAssertEqual(try header("alice", "Documents/uploads/u1").size, upload.count)
        XCTAssertFalse(try rawBytes("alice", "Documents/uploads/u1").containsBytes(Array(upload.prefix(24))))
        // Its preview, in the caches (not backed up), protected too.
        XCTAssertEqual(try header("alice", "Library/Caches/previews/u1").protection, "complete")
        XCTAssertEqual(try header("alice", "Library/Caches/previews/u1").size, 256)
        assertSameBytes(try http("GET", "\(service.url)/users/alice/notes/n1").body, note, "the note survived the lock")
        XCTAssertEqual(try http("PUT", "\(service.url)/users/alice/uploads/u1", upload).status, 409)
        XCTAssertEqual(service.terminate(), 0)
    }

    /// SIGTERM while uploads and note writes are in flight: the server stops accepting, finishes them, and every one it
    /// acknowledged is on disk whole; no file is torn and no temporary file is left; the domains' services shut down
    /// (keys wiped); after a restart the worker processes what was queued, and every upload reads back exactly.
    func testSIGTERMDuringUploadsLosesNothingAndTearsNothing() throws {
        let service = try startService()
        let port = service.url.split(separator: ":").last.map(String.init) ?? ""
        // Six uploads of 256 KiB and two notes of 192 KiB, each with half its body sent before SIGTERM and the rest
        // after: every one is in flight when the signal arrives, however slow the machine.
        let uploads = (0..<6).map { ("up\($0)", payload("upload \($0)", 256 << 10)) }
        let notes = (0..<2).map { ("note\($0)", payload("note \($0)", 192 << 10)) }
        let replies = Locked<[String: Reply]>([:])
        let halfSent = DispatchGroup(), finished = DispatchGroup()
        let rest = DispatchSemaphore(value: 0)
        // One thread per request: each blocks on its pipe (the global queue runs only as many blocking items at once
        // as there are cores).
        var threads: [Thread] = []
        for (name, bytes) in uploads + notes {
            let url = "\(service.url)/users/alice/\(name.hasPrefix("up") ? "uploads" : "notes")/\(name)"
            let scratch = dir, env = environment
            halfSent.enter()
            finished.enter()
            threads.append(Thread {
                var reply = Reply(status: -1, body: [])
                if let put = try? StreamedPut(url, length: bytes.count, scratch: scratch, environment: env) {
                    let half = bytes.count / 2
                    let sent = (try? put.send(bytes[..<half])) != nil
                    halfSent.leave()
                    rest.wait()
                    if sent { try? put.send(bytes[half...]) }
                    reply = put.finish()
                } else {
                    halfSent.leave()
                    rest.wait()
                }
                replies.withValue { $0[name] = reply }
                finished.leave()
            })
        }
        threads.forEach { $0.start() }
        let all = uploads.count + notes.count
        XCTAssertEqual(halfSent.wait(timeout: .now() + 60), .success, "curl did not take the first half of every body")
        // SIGTERM once every request's connection is established (seen by the kernel, not guessed by a sleep).
        XCTAssertTrue(eventually(seconds: 30) { established(port: port) >= all }, "the requests did not connect")
        kill(service.process.processIdentifier, SIGTERM)
        for _ in 0..<all { rest.signal() }
        XCTAssertEqual(finished.wait(timeout: .now() + 60), .success, "a request did not finish")
        XCTAssertEqual(service.waitForExit(), 0)
        let said = service.lines
        XCTAssertTrue(said.contains("notes-service: stopped"), said.joined(separator: "\n"))
        XCTAssertEqual(said.filter { $0.contains("data protection service shut down") }.count, users.count, said.joined(separator: "\n"))

        // Every request in flight at SIGTERM was finished and acknowledged.
        let got = replies.value
        for (name, _) in uploads { XCTAssertEqual(got[name]?.status, 202, "upload \(name): \(got[name]?.text ?? "no reply")") }
        for (name, _) in notes { XCTAssertEqual(got[name]?.status, 204, "note \(name): \(got[name]?.text ?? "no reply")") }
        // Nothing torn or temporary on disk: every file there is a whole protected file of one request.
        let queued = try entries("alice", "Documents/Inbox"), processed = try entries("alice", "Documents/uploads")
        XCTAssertEqual(Set(queued).union(processed), Set(uploads.map(\.0)), "queued \(queued), processed \(processed)")
        XCTAssertEqual(try entries("alice", "Documents/notes"), notes.map(\.0))
        let sizes = Dictionary(uniqueKeysWithValues: (uploads + notes).map { ($0.0, $0.1.count) })
        for name in queued { XCTAssertEqual(try header("alice", "Documents/Inbox/\(name)").size, sizes[name]) }
        for name in processed { XCTAssertEqual(try header("alice", "Documents/uploads/\(name)").size, sizes[name]) }
        // After SIGTERM the port is closed: nothing accepts a new request.
        XCTAssertEqual(try http("GET", "\(service.url)/health").status, 0)

        // A restart queues what the Inbox holds; every upload and note reads back exactly.
        let again = try startService()
        for (name, bytes) in uploads {
            XCTAssertTrue(try eventually(seconds: 60) { try http("GET", "\(again.url)/users/alice/uploads/\(name)").status == 200 }, name)
            assertSameBytes(try http("GET", "\(again.url)/users/alice/uploads/\(name)").body, bytes, name)
        }
        for (name, bytes) in notes { assertSameBytes(try http("GET", "\(again.url)/users/alice/notes/\(name)").body, bytes, name) }
        XCTAssertEqual(try entries("alice", "Documents/Inbox"), [])
        XCTAssertEqual(try entries("alice", "Documents/uploads"), uploads.map(\.0))
        XCTAssertEqual(again.terminate(), 0)
    }
}

extension NotesServiceTests {
    /// SIGTERM while the worker waits for an unlock: the service stops at once (the wait ends, the item stays in the
    /// Inbox); after `dpctl unlock` a restart processes it from the Inbox.
    func testSIGTERMWhileAJobWaitsForUnlockKeepsItForTheNextStart() throws {
        let service = try startService()
        try dpctl("alice", ["lock"])
        let upload = payload("queued across a restart", 20_000)
        XCTAssertEqual(try http("PUT", "\(service.url)/users/alice/uploads/u1", upload).status, 202)
        XCTAssertTrue(service.said("worker: upload 'u1' of user 'alice' waits for unlock"), service.lines.joined(separator: "\n"))
        XCTAssertEqual(service.terminate(), 0)
        XCTAssertTrue(service.lines.contains("worker: stopping; upload 'u1' of user 'alice' stays in the Inbox for the next start"),
                      service.lines.joined(separator: "\n"))
        XCTAssertEqual(try entries("alice", "Documents/Inbox"), ["u1"])
        XCTAssertEqual(try entries("alice", "Documents/uploads"), [])

        try dpctl("alice", ["unlock", "--passphrase-file", passphraseFile])
        let again = try startService()
        XCTAssertTrue(try eventually(seconds: 30) { try http("GET", "\(again.url)/users/alice/uploads/u1").status == 200 })
        assertSameBytes(try http("GET", "\(again.url)/users/alice/uploads/u1").body, upload)
        XCTAssertEqual(try entries("alice", "Documents/Inbox"), [])
        XCTAssertEqual(again.terminate(), 0)
    }
}

/// How many TCP connections to loopback `port` are established (`ss`, from iproute2).
func established(port: String) -> Int {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/ss")
    p.arguments = ["-Htn", "state", "established", "( sport = :\(port) )"]
    let o = Pipe()
    p.standardOutput = o
    guard (try? p.run()) != nil else { return 0 }
    let out = o.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return String(decoding: out, as: UTF8.self).split(separator: "\n").count
}
