// The messages coordinators send presenters, their wire form between processes, and local delivery.
import Foundation
internal import PathSyntax

/// One callback a coordinator asks of a presenter.
enum PresenterMessage: Sendable, Hashable {
    case save
    case relinquishToReader(accessed: String, pid: Int32)
    case relinquishToWriter(accessed: String, pid: Int32)
    case accommodateDeletion
    case didMove(to: String)
    case didChange
    case subitemDidChange(at: String)

    /// Whether the presenter stays relinquished until the access ends (its reacquirer, if any, runs then).
    var holdsAccess: Bool {
        switch self {
        case .relinquishToReader, .relinquishToWriter, .accommodateDeletion: true
        default: false
        }
    }

    /// Whether the coordinator waits (up to the deadline) for the presenter to finish.
    var awaitsReply: Bool {
        switch self {
        case .save, .relinquishToReader, .relinquishToWriter, .accommodateDeletion: true
        default: false
        }
    }

    /// One line: verb, presented path, argument, pid, separated by tabs (paths with tabs or newlines are escaped).
    func wireLine(presentedPath: String) -> String {
        let (verb, argument, pid): (String, String, Int32) =
            switch self {
            case .save: ("save", "", 0)
            case .relinquishToReader(let accessed, let pid): ("relinquish-reader", accessed, pid)
            case .relinquishToWriter(let accessed, let pid): ("relinquish-writer", accessed, pid)
            case .accommodateDeletion: ("accommodate-deletion", "", 0)
            case .didMove(let to): ("did-move", to, 0)
            case .didChange: ("did-change", "", 0)
            case .subitemDidChange(let at): ("subitem-did-change", at, 0)
            }
        return [verb, Self.escape(presentedPath), Self.escape(argument), String(pid)].joined(separator: "\t") + "\n"
    }

    /// Parses a line made by `wireLine`; nil when malformed.
    static func parse(_ line: Substring) -> (message: PresenterMessage, presentedPath: String)? {
        let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
        guard fields.count == 4, let pid = Int32(fields[3]) else { return nil }
        let path = unescape(fields[1])
        let argument = unescape(fields[2])
        let message: PresenterMessage
        switch fields[0] {
        case "save": message = .save
        case "relinquish-reader": message = .relinquishToReader(accessed: argument, pid: pid)
        case "relinquish-writer": message = .relinquishToWriter(accessed: argument, pid: pid)
        case "accommodate-deletion": message = .accommodateDeletion
        case "did-move": message = .didMove(to: argument)
        case "did-change": message = .didChange
        case "subitem-did-change": message = .subitemDidChange(at: argument)
        default: return nil
        }
        return (message, path)
    }

    private static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\t", with: "\\t")
            .replacingOccurrences(of: "\n", with: "\\n")
    }

    private static func unescape(_ text: Substring) -> String {
        var result = ""
        var escaping = false
        for character in text {
            if escaping {
                result.append(character == "t" ? "\t" : character == "n" ? "\n" : character)
                escaping = false
            } else if character == "\\" {
                escaping = true
            } else {
                result.append(character)
            }
        }
        return result
    }

    /// What ends a relinquish or deletion lease for `registration`: the grace period starts.
    static func endOfAccess(for registration: PresenterRegistration) -> @Sendable () -> Void {
        let path = registration.presentedPath
        return { registration.hub.watcher?.quiet(path, until: monotonicNow() &+ ChangeWatcher.grace) }
    }

    /// Runs the callback on `registration`'s presenter (on the caller's thread: call it on the registration's queue).
    /// - Returns: the reacquirer of a relinquish callback.
    func deliver(to registration: PresenterRegistration) -> (@Sendable () -> Void)? {
        let presenter = registration.presenter
        let watcher = registration.hub.watcher
        let path = registration.presentedPath
        switch self {
        case .save, .relinquishToReader, .relinquishToWriter, .accommodateDeletion:
            // The coordinated access accounts for changes until it ends (see `endOfAccess`).
            watcher?.quiet(path, until: .max)
        case .didMove, .didChange, .subitemDidChange:
            watcher?.quiet(path, until: monotonicNow() &+ ChangeWatcher.grace)
        }
        switch self {
        case .save:
            try? presenter.savePresentedItemChanges()
            watcher?.quiet(path, until: monotonicNow() &+ ChangeWatcher.grace)
        case .relinquishToReader(let accessed, let pid):
            return presenter.relinquishPresentedItem(toReader: PresenterAccess(url: URL(fileURLWithPath: accessed), processID: pid))
        case .relinquishToWriter(let accessed, let pid):
            return presenter.relinquishPresentedItem(toWriter: PresenterAccess(url: URL(fileURLWithPath: accessed), processID: pid))
        case .accommodateDeletion:
            try? presenter.accommodatePresentedItemDeletion()
        case .didMove(let to):
            registration.moved(to: to)
            watcher?.watch(to)
            presenter.presentedItemDidMove(to: URL(fileURLWithPath: to))
        case .didChange:
            presenter.presentedItemDidChange()
        case .subitemDidChange(let at):
            presenter.presentedSubitemDidChange(at: URL(fileURLWithPath: at))
        }
        return nil
    }
}

/// How a presented path relates to an accessed path.
enum PresentedRelation: Equatable {
    /// The presented item is the accessed item.
    case same
    /// The presented item is inside the accessed directory.
    case inside
    /// The presented item is a directory containing the accessed item.
    case container

    init?(presented: String, accessed: String) {
        if samePath(presented, accessed) {
            self = .same
        } else if isPath(presented, inside: accessed) {
            self = .inside
        } else if isPath(accessed, inside: presented) {
            self = .container
        } else {
            return nil
        }
    }
}
