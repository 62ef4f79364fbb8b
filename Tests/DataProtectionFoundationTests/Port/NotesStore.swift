// NotesStore.swift — the notes store of NotesStore.ios.swift.txt ported to Linux: its imports and set-up changed, and
// the lines the layer could not keep (NotesStorePortTests lists them).
import DataProtectionFoundation
import Foundation

fileprivate typealias FileManager = ProtectedFileManager
fileprivate typealias UIApplication = ProtectedApplication
fileprivate typealias URLResourceValues = ProtectedResourceValues
fileprivate typealias UserDefaults = ProtectedUserDefaults
fileprivate func NSHomeDirectory() -> String { ProtectedHomeDirectory() }

/// A note saved in the app's Documents folder.
struct Note: Equatable {
    var name: String
    var text: String
}

/// Keeps the user's notes in Documents/Notes, protected while the device is locked, with an offline cache in Caches.
/// Its state is guarded by `lock`: presenter callbacks and protected-data notifications arrive on other threads.
final class NotesStore: NSObject, NSFilePresenter, @unchecked Sendable {
    enum StoreError: Error {
        case locked
        case unsupportedType(String)
    }

    static let sortKey = "notes.sortByName"
    static let fontSizeKey = "notes.fontSize"
    static let lastOpenedKey = "notes.lastOpened"

    let notesFolder: URL
    let cacheFolder: URL
    let presentedItemOperationQueue = OperationQueue()
    var presentedItemURL: URL? { notesFolder }
    private let lock = NSLock()
    private var state = (isOpen: false, loaded: [String: Note](), changesSeen: 0)
    var isOpen: Bool { lock.withLock { state.isOpen } }
    var loadedNotes: [String: Note] { lock.withLock { state.loaded } }
    var changesSeen: Int { lock.withLock { state.changesSeen } }
    private var observers: [NSObjectProtocol] = []
    private let defaults = UserDefaults.standard

    override init() {
        let documents = try! FileManager.default.url(for: .documentDirectory, in: .userDomainMask, appropriateFor: nil, create: true)
        let caches = try! FileManager.default.url(for: .cachesDirectory, in: .userDomainMask, appropriateFor: nil, create: true)
        notesFolder = documents.appendingPathComponent("Notes", isDirectory: true)
        cacheFolder = caches.appendingPathComponent("Offline", isDirectory: true)
        super.init()
        presentedItemOperationQueue.maxConcurrentOperationCount = 1
        try? FileManager.default.createDirectory(at: notesFolder, withIntermediateDirectories: true, attributes: nil)
        try? FileManager.default.createDirectory(at: cacheFolder, withIntermediateDirectories: true, attributes: nil)
        defaults.register(defaults: [NotesStore.sortKey: true, NotesStore.fontSizeKey: 14.0])
        NSFileCoordinator.addFilePresenter(self)
        let center = NotificationCenter.default
        observers.append(center.addObserver(forName: UIApplication.protectedDataWillBecomeUnavailableNotification, object: nil, queue: nil) { [weak self] _ in
            self?.close()
        })
        observers.append(center.addObserver(forName: UIApplication.protectedDataDidBecomeAvailableNotification, object: nil, queue: nil) { [weak self] _ in
            self?.open()
        })
        if UIApplication.shared.isProtectedDataAvailable {
            open()
        }
    }

    deinit {
        observers.forEach(NotificationCenter.default.removeObserver)
        NSFileCoordinator.removeFilePresenter(self)
    }

    // MARK: Opening and closing

    /// Loads every note into memory; called at launch and when the device unlocks.
    func open() {
        var notes: [String: Note] = [:]
        for url in (try? noteURLs()) ?? [] {
            if let note = try? read(url.deletingPathExtension().lastPathComponent) {
                notes[note.name] = note
            }
        }
        lock.withLock { state.loaded = notes; state.isOpen = true }
    }

    /// Drops the notes from memory before the device locks.
    func close() {
        lock.withLock { state.loaded = [:]; state.isOpen = false }
    }

    // MARK: Notes

    func url(forNote name: String) -> URL {
        notesFolder.appendingPathComponent(name).appendingPathExtension("txt")
    }

    /// Saves a note, protected until the device is next unlocked, coordinating with other writers.
    func save(_ note: Note) throws {
        let url = url(forNote: note.name)
        let data = Data(note.text.utf8)
        var coordinationError: NSError?
        var writeError: Error?
        NSFileCoordinator(filePresenter: self).coordinate(writingItemAt: url, options: .forReplacing, error: &coordinationError) { url in
            do {
                try data.write(protectedTo: url, options: [.atomic, .completeFileProtection])
            } catch {
                writeError = error
            }
        }
        if let error = coordinationError ?? writeError {
            throw error
        }
        lock.withLock { state.loaded[note.name] = note }
        defaults.set(Date(), forKey: NotesStore.lastOpenedKey)
    }

    /// Reads a note from disk; fails with `StoreError.locked` while protected data is unavailable.
    func read(_ name: String) throws -> Note {
        do {
            let data = try Data(contentsOf: url(forNote: name))
            return Note(name: name, text: String(decoding: data, as: UTF8.self))
        } catch let error as CocoaError where error.code == .fileReadNoPermission {
            throw StoreError.locked
        }
    }

    /// The URLs of the saved notes, sorted as the user prefers.
    func noteURLs() throws -> [URL] {
        let urls = try FileManager.default.contentsOfDirectory(at: notesFolder, includingPropertiesForKeys: nil, options: [.skipsHiddenFiles])
        let notes = urls.filter { UTType(filenameExtension: $0.pathExtension)?.conforms(to: .text) ?? false }
        if defaults.bool(forKey: NotesStore.sortKey) {
            return notes.sorted { $0.lastPathComponent < $1.lastPathComponent }
        }
        return notes
    }

    func noteNames() throws -> [String] {
        try noteURLs().map { $0.deletingPathExtension().lastPathComponent }
    }

    /// The titles the list shows: each note's name as the system displays it (its extension hidden).
    func noteTitles() throws -> [String] {
        try noteURLs().map { FileManager.default.displayName(atPath: $0.path) }
    }

    /// Where "Export all" puts its copies: a folder of Documents, found from the app's home.
    func exportFolder() -> URL {
        URL(fileURLWithPath: NSHomeDirectory()).appendingPathComponent("Documents/Exports", isDirectory: true)
    }

    func delete(_ name: String) throws {
        try FileManager.default.removeItem(at: url(forNote: name))
        lock.withLock { state.loaded[name] = nil }
    }

    /// Renames a note, coordinating the move so that presenters of either name hear of it.
    func rename(_ name: String, to newName: String) throws {
        let source = url(forNote: name)
        let destination = url(forNote: newName)
        var coordinationError: NSError?
        var moveError: Error?
        let coordinator = NSFileCoordinator(filePresenter: self)
        coordinator.coordinate(writingItemAt: source, options: .forMoving, writingItemAt: destination, options: .forReplacing, error: &coordinationError) { from, to in
            do {
                try FileManager.default.moveItem(at: from, to: to)
                coordinator.item(at: from, didMoveTo: to)
            } catch {
                moveError = error
            }
        }
        if let error = coordinationError ?? moveError {
            throw error
        }
        lock.withLock {
            state.loaded[newName] = state.loaded.removeValue(forKey: name).map { Note(name: newName, text: $0.text) }
        }
    }

    /// The names of the loaded notes whose text contains `text`.
    func search(_ text: String) -> [String] {
        loadedNotes.values.filter { $0.text.localizedCaseInsensitiveContains(text) }.map(\.name).sorted()
    }

    // MARK: Attachments

    /// Whether a file can be attached to a note: text or an image.
    func canAttach(_ fileName: String) -> Bool {
        guard let type = UTType(filenameExtension: (fileName as NSString).pathExtension) else {
            return false
        }
        return type.conforms(to: .text) || type.conforms(to: .image)
    }

    // MARK: Offline cache

    /// Keeps downloaded data for offline use: readable after the first unlock, never backed up.
    func cache(_ data: Data, named name: String) throws -> URL {
        guard canAttach(name) else {
            throw StoreError.unsupportedType(name)
        }
        var url = cacheFolder.appendingPathComponent(name)
        try data.write(protectedTo: url, options: .completeFileProtectionUntilFirstUserAuthentication)
        var values = URLResourceValues()
        values.isExcludedFromBackup = true
        try url.setResourceValues(values)
        return url
    }

    func cachedData(named name: String) -> Data? {
        try? Data(contentsOf: cacheFolder.appendingPathComponent(name))
    }

    // MARK: Preferences

    var sortsByName: Bool {
        get { defaults.bool(forKey: NotesStore.sortKey) }
        set { defaults.set(newValue, forKey: NotesStore.sortKey) }
    }

    var fontSize: Double {
        get { defaults.double(forKey: NotesStore.fontSizeKey) }
        set { defaults.set(newValue, forKey: NotesStore.fontSizeKey) }
    }

    var lastOpened: Date? {
        defaults.object(forKey: NotesStore.lastOpenedKey) as? Date
    }

    // MARK: NSFilePresenter

    func presentedSubitemDidChange(at url: URL) {
        lock.withLock { state.changesSeen += 1 }
    }

    func presentedItemDidChange() {
        lock.withLock { state.changesSeen += 1 }
    }

    func savePresentedItemChanges(completionHandler: @escaping (Error?) -> Void) {
        completionHandler(nil)
    }
}
