import DataProtectionKeys
import DataProtectionFiles
import SystemLayer
import FileCoordination
import struct Foundation.URL

#if canImport(Glibc)
import Glibc
#endif

/// Which file coordination a container's operations take part in.
public enum ContainerCoordination: Sendable {
    /// The machine-wide domain that `ProtectionDomain` (and so `dpctl put`/`cat`) uses: the default.
    case machineWide
    /// A domain rooted at the container, locks in `<root>/.coordination`: for a container shared
    /// between hosts over NFSv4 or CephFS (every process must choose it).
    case containerRoot
    /// A coordinator the caller made.
    case custom(FileCoordinator)

    /// The coordination domain for the container at `root`.
    func domain(root: String) throws(ProtectionError) -> CoordinationDomain {
        do throws(CoordinationError) {
            switch self {
            case .machineWide: return try CoordinationDomain.machineWide()
            case .containerRoot: return try CoordinationDomain(root: URL(fileURLWithPath: root, isDirectory: true))
            case .custom(let c): return c.domain
            }
        } catch {
            throw ProtectionError(.coordinationFailed, "unable to set up file coordination for the container '\(root)': \(error.message)", path: root, underlying: error)
        }
    }

    /// The coordinator container operations use (waiting up to 30 s for other holders).
    func coordinator(root: String) throws(ProtectionError) -> FileCoordinator {
        if case .custom(let c) = self { return c }
        return FileCoordinator(domain: try domain(root: root))
    }
}

/// How a container operation accesses an item under coordination.
enum CoordinatedAccess {
    case reading, replacing, deleting
}

extension Container {
    /// The coordination domain every operation of this container coordinates in (its `ContainerCoordination`), for
    /// presenters and coordinators of the container's items.
    public var coordinationDomain: CoordinationDomain { coordinator.domain }

    /// Runs `body` under a coordinated access of the item at `path` (container-relative, or absolute inside the root).
    func coordinated<R>(_ path: String, _ access: CoordinatedAccess, _ action: String, _ body: () throws(ProtectionError) -> R) throws(ProtectionError) -> R {
        do {
            return try coordinator.coordinateBlocking(with: [intent(path, access)]) { _ in try body() }
        } catch {
            throw Self.translate(error, action, path)
        }
    }

    /// The async form of `coordinated(_:_:_:_:)`: the wait for coordination holds no thread, then `body` (the
    /// synchronous call, whose own coordination nests in this one) runs on `threads`.
    /// - Throws: as the synchronous form (the same `.coordinationFailed` on a time-out), what `body` throws, or
    ///   `CancellationError` when the task is cancelled before `body` starts (nothing done).
    func coordinated<R: Sendable>(
        _ path: String, _ access: CoordinatedAccess, _ action: String, on threads: BlockingThreads, _ body: @escaping @Sendable () throws -> R
    ) async throws -> R {
        do {
            return try await coordinator.coordinate(with: [intent(path, access)], on: threads, body)
        } catch let e as CoordinationError where e.code == .cancelled && Task.isCancelled {
            throw CancellationError()
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw Self.translate(error, action, path)
        }
    }

    /// What an access of the item at `path` coordinates.
    private func intent(_ path: String, _ access: CoordinatedAccess) -> FileAccessIntent {
        let url = URL(fileURLWithPath: confinement.absolute(path))
        switch access {
        case .reading: return .readingIntent(with: url)
        case .replacing: return .writingIntent(with: url, options: .forReplacing)
        case .deleting: return .writingIntent(with: url, options: .forDeleting)
        }
    }

    /// Runs `body` under a coordinated move of `source` to `destination`, telling presenters of the move.
    func coordinatedMove(_ source: String, _ destination: String, _ body: () throws(ProtectionError) -> Void) throws(ProtectionError) {
        let from = URL(fileURLWithPath: confinement.absolute(source)), to = URL(fileURLWithPath: confinement.absolute(destination))
        do {
            try coordinator.coordinate(writingItemAt: from, options: .forMoving, writingItemAt: to, options: .forReplacing) { _, _ in
                try body()
                try coordinator.item(at: from, didMoveTo: to)
            }
        } catch {
            throw Self.translate(error, "move", source)
        }
    }

    static func translate(_ error: any Error, _ action: String, _ path: String) -> ProtectionError {
        switch error {
        case let e as ProtectionError: return e
        case let e as CoordinationError:
            return ProtectionError(.coordinationFailed, "unable to \(action) '\(path)': \(e.message)", path: path, underlying: e)
        default:
            return ProtectionError(.io(EIO), "unable to \(action) '\(path)': \(error)", path: path)
        }
    }
}

extension Purge {
    /// Removes `path` under a coordinated delete that gives up at once if anyone else reads or writes it.
    /// - Returns: false when the item is under coordinated access (left in place).
    static func removeUncontended(_ c: Confinement, _ path: String, coordination: ContainerCoordination) throws(ProtectionError) -> Bool {
        let domain = try coordination.domain(root: c.root)
        let coordinator = FileCoordinator(domain: domain, timeout: .zero, presenterDeadline: .milliseconds(200))
        do {
            try coordinator.coordinate(writingItemAt: URL(fileURLWithPath: c.absolute(path)), options: .forDeleting) { _ in
                do throws(SystemError) { try c.remove(path) } catch where error.errno == ENOENT {} catch { throw c.failure(error.errno, "purge", path) }
            }
            return true
        } catch let e as CoordinationError where e.code == .timedOut {
            return false
        } catch {
            throw Container.translate(error, "purge", path)
        }
    }
}
