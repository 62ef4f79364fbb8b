import Foundation
import DataProtection
// @testable: checks the internal KeybagWatch (descriptor identity of the keybag) directly.
@testable import DataProtectionKeys
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A domain notices a keybag another process replaced (rotation, recovery), though it no longer looks the path up
/// on every open: it watches the file it read through a descriptor.
final class KeybagWatchTests: DomainTestCase {
    /// Two instances of one domain, as two processes would have: one rotates, the other's new files use the new
    /// generation at once, and its old files still open.
    func testAnotherInstanceSeesARotation() throws {
        try assertRotationSeen(keepingLink: false)
    }

    /// The same with a hard link to the old keybag kept (a backup made with `ln`): the old file keeps a link, and
    /// the change is still seen (unlinking a name sets the file's change time).
    func testARotationIsSeenWhileAnotherNameHoldsTheOldKeybag() throws {
        try assertRotationSeen(keepingLink: true)
    }

    private func assertRotationSeen(keepingLink: Bool) throws {
        let (a, _) = try makeDomain()
        try a.unlock(passphrase: try secret("correct horse"))
        let b = try ProtectionDomain.open(at: location, keyStore: store)
        let dir = root + "/files"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try b.files.write([1, 2, 3], to: dir + "/old", protection: .complete)
        XCTAssertEqual(try b.files.info(dir + "/old").classKeyGeneration, 1)
        if keepingLink { XCTAssertEqual(link(location.keybagPath, root + "/keybag.backup"), 0) }

        _ = try a.rotate(.complete, paths: [dir], passphrase: try secret("correct horse"))

        try b.files.write([4, 5], to: dir + "/new", protection: .complete)
        XCTAssertEqual(try b.files.info(dir + "/new").classKeyGeneration, 2, "b created with a retired generation: it missed the rotation")
        XCTAssertEqual(try b.files.read(dir + "/old"), [1, 2, 3])
        XCTAssertEqual(try a.files.read(dir + "/new"), [4, 5])
    }

    /// A file replaced by another of the same size and modification time is seen as changed; an untouched one is not.
    func testWatchSeesAReplacementWithTheSameSizeAndTimes() throws {
        let path = root + "/bag", tmp = root + "/bag.tmp"
        try writeBytes([UInt8](repeating: 1, count: 100), path)
        let watch = try XCTUnwrap(KeybagWatch(path))
        XCTAssertTrue(watch.isUnchanged)
        XCTAssertTrue(watch.isUnchanged, "asking twice changes nothing")

        var st = stat()
        XCTAssertEqual(stat(path, &st), 0)
        try writeBytes([UInt8](repeating: 2, count: 100), tmp)
        var times = [st.st_atim, st.st_mtim]
        XCTAssertEqual(utimensat(AT_FDCWD, tmp, &times, 0), 0)  // same size, same modification time
        XCTAssertEqual(rename(tmp, path), 0)
        XCTAssertFalse(watch.isUnchanged)

        let second = try XCTUnwrap(KeybagWatch(path))
        XCTAssertTrue(second.isUnchanged)
        XCTAssertEqual(unlink(path), 0)
        XCTAssertFalse(second.isUnchanged, "a removed keybag is not the current one")
        XCTAssertNil(KeybagWatch(path))
    }
}
