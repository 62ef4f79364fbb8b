// The port test of issue 22: an iOS notes store (NotesStore.ios.swift.txt, as it compiles on iOS) ported to this layer
// (NotesStore.swift) by changing its imports and set-up; this file measures how many lines differ and drives the
// ported store: notes, the offline cache, preferences, types, and a lock and unlock from another process.
import DataProtectionFoundation
import DataProtection
import Foundation
import XCTest

final class NotesStorePortTests: FoundationTestCase {
    private var store: NotesStore?

    override func tearDown() {
        if let store { NSFileCoordinator.removeFilePresenter(store) }
        store = nil
        super.tearDown()
    }

    /// The ported store, made in this test's context (as an app makes it after `AppContext.bootstrap`).
    private func makeStore() -> NotesStore {
        let s = inContext { NotesStore() }
        store = s
        return s
    }

    // MARK: The diff

    /// The port differs from the iOS original only in imports, file-private typealiases and `NSHomeDirectory()` (the set-up) and the listed
    /// lines, and in at most 10% of the original's statement lines (blank and comment-only lines left out).
    func testThePortChangesAtMostTenPercentOfTheLines() throws {
        let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        let original = try statementLines(here.appendingPathComponent("NotesStore.ios.swift.txt"))
        let port = try statementLines(here.appendingPathComponent("NotesStore.swift"))
        let diff = LineDiff(original, port)
        let percent = Double(diff.removed.count + diff.added.count) * 100 / Double(original.count)
        print("port diff: \(original.count) statement lines in the iOS original, \(port.count) in the port; \(diff.removed.count) removed, \(diff.added.count) added (\(String(format: "%.1f", percent))% of the original's lines)")
        for line in diff.removed { print("  - \(line)") }
        for line in diff.added { print("  + \(line)") }
        XCTAssertGreaterThanOrEqual(original.count, 150, "the original must be a realistic module of at least 150 lines")
        XCTAssertLessThanOrEqual(percent, 10)
        // The listed gap: Foundation on Linux also declares `write(to:options:)` and ignores the protection options,
        // so this layer makes that call ambiguous (a compile error) and the port writes `write(protectedTo:options:)`.
        let listed = ["try data.write(protectedTo: url, options: [.atomic, .completeFileProtection])",
                      "try data.write(protectedTo: url, options: .completeFileProtectionUntilFirstUserAuthentication)"]
        for line in diff.added where !(line.hasPrefix("import ") || line.hasPrefix("fileprivate typealias ") || line.hasPrefix("fileprivate func NSHomeDirectory()") || listed.contains(line)) {
            XCTFail("a port line that is neither an import, set-up nor a listed gap: \(line)")
        }
        for line in diff.removed where !(line.hasPrefix("import ") || line.hasPrefix("try data.write(to: url, options:")) {
            XCTFail("an original line the port changed beyond the imports and the listed gap: \(line)")
        }
    }

    /// The non-blank lines of a Swift file that are not only a comment, trimmed.
    private func statementLines(_ url: URL) throws -> [String] {
        try String(contentsOf: url, encoding: .utf8).split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.hasPrefix("//") }
    }

    // MARK: Behaviour

    /// Notes are saved `.completeFileProtection` inside a coordinated write, listed through `FileManager` (the type
    /// check leaves out an image in the folder), read back with `Data(contentsOf:)`, ciphertext on disk, and deleted.
    func testNotesSaveListReadAndAreCiphertextOnDisk() throws {
        let store = makeStore()
        XCTAssertTrue(store.isOpen)
        let notes = [Note(name: "shopping", text: "milk, eggs, secret sauce"), Note(name: "diary", text: "dear diary, a secret"), Note(name: "ideas", text: "a secret idea")]
        try inContext {
            for n in notes { try store.save(n) }
            try Data([0x89, 0x50, 0x4E, 0x47]).write(to: store.notesFolder.appendingPathComponent("photo.png"))
            XCTAssertEqual(try store.noteNames(), ["diary", "ideas", "shopping"])
            XCTAssertEqual(try store.noteTitles(), ["diary", "ideas", "shopping"], "displayName(atPath:) hides the known extension")
            let home = try ProtectedFileManager.default.homeDirectoryForCurrentUser.path
            XCTAssertEqual(store.exportFolder().path, home + "/Documents/Exports", "NSHomeDirectory() is the container's root")
            for n in notes { XCTAssertEqual(try store.read(n.name), n) }
            let attributes = try ProtectedFileManager.default.attributesOfItem(atPath: store.url(forNote: "diary").path)
            XCTAssertEqual((attributes[.protectionKey] as? FileProtectionType)?.rawValue, FileProtectionType.complete.rawValue)
        }
        XCTAssertEqual(store.loadedNotes.count, 3)
        for n in notes {
            let raw = rawBytes("Documents/Notes/\(n.name).txt")
            XCTAssertGreaterThan(raw.count, n.text.utf8.count)
            XCTAssertNil(Data(raw).range(of: Data("secret".utf8)), "plaintext of '\(n.name)' on disk")
        }
        XCTAssertEqual(store.search("SECRET"), ["diary", "ideas", "shopping"])
        try inContext { try store.rename("shopping", to: "groceries") }
        XCTAssertEqual(try inContext { try store.read("groceries") }, Note(name: "groceries", text: notes[0].text))
        XCTAssertEqual(store.loadedNotes["groceries"]?.text, notes[0].text)
        XCTAssertEqual(store.search("sauce"), ["groceries"])
        XCTAssertThrowsError(try inContext { try store.read("shopping") })
        try inContext { try store.rename("groceries", to: "shopping") }
        try inContext { try store.delete("ideas") }
        XCTAssertEqual(try inContext { try store.noteNames() }, ["diary", "shopping"])
        XCTAssertNil(store.loadedNotes["ideas"])
        print("port notes: \(notes.count) notes saved .complete, listed, read back; no plaintext in \(notes.map { rawBytes("Documents/Notes/\($0.name).txt").count }.reduce(0, +)) bytes on disk")
    }

    /// The offline cache: text and images only (`UTType`), class C, excluded from backup by its own flag (set through
    /// `URLResourceValues`), ciphertext on disk.
    func testOfflineCacheIsClassCExcludedFromBackupAndTypeChecked() throws {
        let store = makeStore()
        let url = try inContext { try store.cache(Data("cached secret page".utf8), named: "page.txt") }
        _ = try inContext { try store.cache(Data([0xFF, 0xD8, 0xFF]), named: "map.jpeg") }
        XCTAssertThrowsError(try inContext { try store.cache(Data("x".utf8), named: "tool.exe") }) {
            guard case NotesStore.StoreError.unsupportedType("tool.exe")? = $0 as? NotesStore.StoreError else { return XCTFail("\($0)") }
        }
        XCTAssertTrue(store.canAttach("photo.PNG"))
        XCTAssertTrue(store.canAttach("notes.txt"))
        XCTAssertFalse(store.canAttach("archive.zip"))
        XCTAssertEqual(inContext { store.cachedData(named: "page.txt") }, Data("cached secret page".utf8))

        // The same `setResourceValues` sets the item's own flag, not only the Caches policy: on a note in Documents
        // (backed up) it takes the note out of the container's backup plan.
        try inContext { try store.save(Note(name: "draft", text: "not for backups")) }
        XCTAssertTrue(try context.container.backupPlan().contains { $0.path == "Documents/Notes/draft.txt" && $0.isIncluded })
        var note = store.url(forNote: "draft")
        var exclude = ProtectedResourceValues()
        exclude.isExcludedFromBackup = true
        try inContext { try note.setResourceValues(exclude) }
        XCTAssertTrue(try context.container.isExcludedFromBackup("Documents/Notes/draft.txt"))
        XCTAssertFalse(try context.container.backupPlan().contains { $0.path == "Documents/Notes/draft.txt" && $0.isIncluded })
        let values = try inContext { try url.protectedResourceValues(forKeys: [.isExcludedFromBackupKey, .fileProtectionKey]) }
        XCTAssertEqual(values.isExcludedFromBackup, true)
        XCTAssertEqual(values.fileProtection?.rawValue, FileProtectionType.completeUntilFirstUserAuthentication.rawValue)
        XCTAssertFalse(try context.container.backupPlan().contains { $0.path == "Library/Caches/Offline/page.txt" && $0.isIncluded })
        XCTAssertNil(Data(rawBytes("Library/Caches/Offline/page.txt")).range(of: Data("secret".utf8)))
    }

    /// Preferences: registered defaults show through, set values are stored protected in Library/Preferences and read
    /// by a fresh read of the store (another instance), and `save` records `lastOpened` as a Date.
    func testPreferencesRegisterSetAndPersist() throws {
        let store = makeStore()
        XCTAssertTrue(store.sortsByName)
        XCTAssertEqual(store.fontSize, 14)
        XCTAssertNil(store.lastOpened)
        store.fontSize = 17.5
        store.sortsByName = false
        try inContext { try store.save(Note(name: "a", text: "b")) }
        let prefs = try context.container.preferences(named: "standard")
        XCTAssertEqual(try prefs.value(forKey: NotesStore.fontSizeKey), .double(17.5))
        XCTAssertEqual(try prefs.value(forKey: NotesStore.sortKey), .bool(false))
        let opened = try XCTUnwrap(store.lastOpened)
        XCTAssertLessThan(abs(opened.timeIntervalSinceNow), 60)
        let again = makeStore()
        XCTAssertFalse(again.sortsByName)
        XCTAssertEqual(again.fontSize, 17.5)
    }

    /// The store presents its folder: its own coordinated saves do not message it, another writer's save does
    /// (`presentedSubitemDidChange(at:)` or `presentedItemDidChange()`, on its queue).
    func testTheStoreHearsAnotherWritersChangesButNotItsOwn() throws {
        let store = makeStore()
        try inContext { try store.save(Note(name: "mine", text: "by the store")) }
        func anotherWriterSaves() {
            var error: NSError?
            var writeError: Error?
            inContext {
                NSFileCoordinator().coordinate(writingItemAt: store.url(forNote: "theirs"), options: [], error: &error) { url in
                    do { try Data("by another writer".utf8).write(to: url) } catch { writeError = error }
                }
            }
            XCTAssertNil(error)
            XCTAssertNil(writeError)
        }
        anotherWriterSaves()
        XCTAssertTrue(eventually { store.changesSeen > 0 }, "the presenter heard nothing of another writer's save")
        let seen = store.changesSeen
        // The store's own save, then another writer's: only the second is heard (in order, on the presenter's queue).
        try inContext { try store.save(Note(name: "mine", text: "again by the store")) }
        anotherWriterSaves()
        XCTAssertTrue(eventually { store.changesSeen >= 2 * seen })
        store.presentedItemOperationQueue.waitUntilAllOperationsAreFinished()
        XCTAssertEqual(store.changesSeen, 2 * seen, "the store was messaged about its own save")
        XCTAssertEqual(try inContext { try store.noteNames() }, ["mine", "theirs"])
        print("port presenter: \(seen) change message(s) for another writer's save, none for the store's own")
    }

    /// `dpctl lock` in another process: the store hears `protectedDataWillBecomeUnavailableNotification` and closes
    /// (drops its notes from memory); reads fail as iOS reports them (`CocoaError.fileReadNoPermission`, the store's
    /// `.locked`), a save fails and leaves the note as it was, while the class-C cache and preferences still read.
    /// `dpctl unlock`: `protectedDataDidBecomeAvailableNotification` reopens the store with every note read back.
    /// Against the layer before this change the reopen finds no app context on the posting thread and loads nothing.
    func testLockFromAnotherProcessClosesAndUnlockReopens() throws {
        let store = makeStore()
        let notes = [Note(name: "one", text: "first secret"), Note(name: "two", text: "second secret")]
        try inContext {
            for n in notes { try store.save(n) }
            _ = try store.cache(Data("offline".utf8), named: "offline.txt")
        }
        store.fontSize = 20
        XCTAssertTrue(store.isOpen)

        try dpctl(["lock"])
        XCTAssertTrue(eventually { !store.isOpen }, "the store did not close on protectedDataWillBecomeUnavailableNotification")
        XCTAssertTrue(store.loadedNotes.isEmpty)
        XCTAssertFalse(ProtectedApplication(context: context).isProtectedDataAvailable)
        assertCocoa(.fileReadNoPermission, .locked) { _ = try inContext { try Data(contentsOf: store.url(forNote: "one")) } }
        XCTAssertThrowsError(try inContext { try store.read("one") }) {
            guard case NotesStore.StoreError.locked? = $0 as? NotesStore.StoreError else { return XCTFail("\($0)") }
        }
        assertCocoa(.fileWriteNoPermission, .locked) { try inContext { try store.save(Note(name: "one", text: "overwritten while locked")) } }
        XCTAssertEqual(inContext { store.cachedData(named: "offline.txt") }, Data("offline".utf8), "class C must stay readable")
        XCTAssertEqual(store.fontSize, 20)

        try dpctlUnlock()
        XCTAssertTrue(eventually { store.isOpen && store.loadedNotes.count == notes.count }, "the store did not reopen on protectedDataDidBecomeAvailableNotification")
        XCTAssertEqual(store.loadedNotes, Dictionary(uniqueKeysWithValues: notes.map { ($0.name, $0) }))
        XCTAssertEqual(try inContext { try store.read("one") }, notes[0])
        print("port lock: closed on will-become-unavailable (reads .fileReadNoPermission, save .fileWriteNoPermission, cache and preferences read); reopened on did-become-available with \(store.loadedNotes.count) notes")
    }
}

/// A line diff by longest common subsequence: the lines of `a` it removes and the lines of `b` it adds.
struct LineDiff {
    var removed: [String] = []
    var added: [String] = []

    init(_ a: [String], _ b: [String]) {
        // lcs[i][j]: the longest common subsequence of a[i...] and b[j...].
        var lcs = Array(repeating: Array(repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in stride(from: a.count - 1, through: 0, by: -1) {
            for j in stride(from: b.count - 1, through: 0, by: -1) {
                lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : max(lcs[i + 1][j], lcs[i][j + 1])
            }
        }
        var (i, j) = (0, 0)
        while i < a.count || j < b.count {
            if i < a.count, j < b.count, a[i] == b[j] {
                (i, j) = (i + 1, j + 1)
            } else if j < b.count, i == a.count || lcs[i][j + 1] >= lcs[i + 1][j] {
                added.append(b[j]); j += 1
            } else {
                removed.append(a[i]); i += 1
            }
        }
    }
}
