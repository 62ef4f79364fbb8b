// One coordination request from resolution to release: locks, nesting, snapshots and presenter phases.
import Foundation

/// The steps of one coordination, shared by the synchronous and async entry points.
struct CoordinationOperation: Sendable {
    let state: DomainState
    let items: [ResolvedItem]
    /// The coordination this one is nested in (same task or thread, same domain), if any.
    let outer: CoordinationContext?
    let scope: CancelScope
    let generation: UInt64
    let deadline: UInt64
    let excluded: UInt64?
    let presenterDeadline: Duration
    /// Per-slot needs in the global lock order, computed once.
    let plan: [(slot: UInt64, needs: SlotNeeds)]

    var hub: PresenterHub { state.presenters }

    private var writtenPaths: [String] { items.lazy.filter { !$0.isRead }.map(\.absolute) }

    func cursor(on lease: Lease) -> LockPlanCursor { LockPlanCursor(plan: plan, held: [:], fd: lease.fd) }

    func acquirer(lease: Lease, polls: Bool) -> LockAcquirer {
        LockAcquirer(
            lease: lease, deadline: deadline, scope: scope, generation: generation,
            items: items, polls: polls)
    }

    func context(lease: Lease) -> CoordinationContext {
        CoordinationContext(domain: state, lease: lease, held: plan, written: writtenPaths)
    }

    // MARK: Nesting

    /// Takes a nested request's extra locks on the outer lease (polling, never a kernel wait).
    func acquireNestedBlocking(in outer: CoordinationContext) throws(CoordinationError) -> LockPlanCursor {
        var cursor = LockPlanCursor(plan: plan, held: outer.heldBySlot(), fd: outer.lease.fd)
        do {
            try acquirer(lease: outer.lease, polls: true).acquireBlocking(&cursor)
        } catch {
            cursor.rollBack()
            throw error
        }
        commit(cursor, in: outer)
        return cursor
    }

    /// The async form of `acquireNestedBlocking(in:)`.
    func acquireNested(in outer: CoordinationContext) async throws(CoordinationError) -> LockPlanCursor {
        var cursor = LockPlanCursor(plan: plan, held: outer.heldBySlot(), fd: outer.lease.fd)
        do {
            try await acquirer(lease: outer.lease, polls: true).acquireAsync(&cursor)
        } catch {
            cursor.rollBack()
            throw error
        }
        commit(cursor, in: outer)
        return cursor
    }

    private func commit(_ cursor: LockPlanCursor, in outer: CoordinationContext) {
        outer.update(cursor.touched.map { ($0.slot, $0.after) })
        outer.written.withLock { $0.append(contentsOf: writtenPaths) }
    }

    /// Gives back what a nested request added, leaving the outer coordination's locks as they were.
    func endNested(_ cursor: LockPlanCursor, in outer: CoordinationContext) {
        cursor.rollBack()
        outer.update(cursor.touched.map { ($0.slot, $0.before) })
    }

    // MARK: forUploading snapshots

    /// Whether every intent is a `forUploading` read, so the locks go before the accessor runs.
    var releasesEarly: Bool { items.allSatisfy { $0.readingOptions.contains(.forUploading) } }

    /// The accessor's URLs: `forUploading` reads get a snapshot copy taken now, under the locks.
    /// - Throws: `.ioFailure` when a copy cannot be made.
    func snapshotsIfUploading() throws(CoordinationError) -> [URL] {
        if items.count == 1 && !items[0].readingOptions.contains(.forUploading) { return [items[0].accessorURL] }
        var urls: [URL] = []
        for item in items {
            guard item.readingOptions.contains(.forUploading) else {
                urls.append(item.accessorURL)
                continue
            }
            let directory = FileManager.default.temporaryDirectory
                .appendingPathComponent("file-coordination-upload-\(UUID().uuidString)", isDirectory: true)
            let copy = directory.appendingPathComponent(item.accessorURL.lastPathComponent)
            do {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                try FileManager.default.copyItem(at: item.accessorURL, to: copy)
            } catch {
                removeSnapshots(urls)
                try? FileManager.default.removeItem(at: directory)
                throw CoordinationError(
                    .ioFailure, path: item.absolute,
                    message: "cannot take the forUploading snapshot of '\(item.absolute)': \(error.localizedDescription)")
            }
            urls.append(copy)
        }
        return urls
    }

    /// Removes the snapshot copies made by `snapshotsIfUploading()`.
    func removeSnapshots(_ urls: [URL]) {
        for (item, url) in zip(items, urls) where item.readingOptions.contains(.forUploading) {
            try? FileManager.default.removeItem(at: url.deletingLastPathComponent())
        }
    }

    // MARK: Granting and releasing an outermost coordination

    /// What an outermost coordination holds while its accessor runs.
    struct Granted {
        let lease: Lease
        let context: CoordinationContext
        let reacquirers: ReacquirerList?
        /// The accessor's URLs (snapshot copies for `forUploading` reads).
        let urls: [URL]
    }

    /// Asks presenters to save, takes every lock (blocking this thread while waiting), asks
    /// presenters to relinquish and takes `forUploading` snapshots.
    /// - Throws: `CoordinationError`; nothing is held then.
    func grantBlocking() throws(CoordinationError) -> Granted {
        let missed = hub.requestSavesBlocking(items, excluding: excluded, deadline: presenterDeadline)
        let lease = try state.leases.checkout()
        var cursor = self.cursor(on: lease)
        do {
            try acquirer(lease: lease, polls: false).acquireBlocking(&cursor)
        } catch {
            state.leases.checkin(lease)
            throw error
        }
        return try locked(
            lease, hub.relinquishBlocking(items, excluding: excluded, skipping: missed, deadline: presenterDeadline))
    }

    /// The async form of `grantBlocking()`: waits suspend the task instead of blocking a thread.
    /// - Parameter polls: poll a busy lock from the task (no thread held while waiting) instead of a kernel wait on a
    ///   waiter thread (the default: it wakes at the release, where polling wakes up to 16 ms late).
    /// - Throws: `CoordinationError` (`.cancelled` on Task cancellation); nothing is held then.
    func grant(polls: Bool = false) async throws(CoordinationError) -> Granted {
        let missed = await hub.requestSaves(items, excluding: excluded, deadline: presenterDeadline)
        let lease = try state.leases.checkout()
        var cursor = self.cursor(on: lease)
        do {
            try await acquirer(lease: lease, polls: polls).acquireAsync(&cursor)
        } catch {
            state.leases.checkin(lease)
            throw error
        }
        return try locked(
            lease, await hub.relinquish(items, excluding: excluded, skipping: missed, deadline: presenterDeadline))
    }

    /// The common step once the locks are held: context and snapshots.
    private func locked(_ lease: Lease, _ reacquirers: ReacquirerList?) throws(CoordinationError) -> Granted {
        let context = self.context(lease: lease)
        do {
            return Granted(lease: lease, context: context, reacquirers: reacquirers, urls: try snapshotsIfUploading())
        } catch {
            finish(lease: lease, context: context, session: reacquirers)
            throw error
        }
    }

    /// Releases what `grant` took, then lets presenters reacquire and hear about changes.
    func release(_ granted: Granted) {
        finish(lease: granted.lease, context: granted.context, session: granted.reacquirers)
    }

    // MARK: The end

    /// Releases the locks, then lets presenters reacquire and hear about changes and moves.
    func finish(lease: Lease, context: CoordinationContext, session: ReacquirerList?) {
        context.end()
        state.leases.checkin(lease)
        hub.finish(
            session, items: items, moves: context.moves.withLock { $0 }, excluding: excluded, deadline: presenterDeadline)
    }
}
