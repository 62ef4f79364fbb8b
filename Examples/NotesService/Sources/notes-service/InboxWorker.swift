// The background work: process each uploaded Inbox item into Documents, waiting for unlock while a domain is locked.
import DataProtection
import Logging
import ServiceLifecycle

/// The queue of uploads to process, fed by the upload handler and by the Inbox scan at start.
final class UploadQueue: Sendable {
    struct Job: Sendable { let user: String, upload: String }
    let jobs: AsyncStream<Job>
    private let continuation: AsyncStream<Job>.Continuation

    init() { (jobs, continuation) = AsyncStream.makeStream() }

    func enqueue(_ user: String, _ upload: String) { continuation.yield(Job(user: user, upload: upload)) }
}

/// Processes queued uploads one at a time. While a user's domain is locked the job waits for its `didUnlock` (the
/// live lock's notification, through `LiveLock.retryAfterUnlock`) and then resumes.
///
/// At graceful shutdown it stops taking jobs and stops waiting; a job cut short leaves its item in the Inbox, and the
/// next start queues every Inbox item again, so accepted uploads are processed exactly once in effect.
struct InboxWorker: Service {
    let users: [String: UserSpace]
    let queue: UploadQueue
    let logger: Logger

    func run() async throws {
        // What an earlier run accepted but did not process is still in the Inboxes.
        for user in users.values.sorted(by: { $0.name < $1.name }) {
            for upload in try await user.pendingUploads() { queue.enqueue(user.name, upload) }
        }
        for await job in queue.jobs.cancelOnGracefulShutdown() {
            guard let user = users[job.user] else { continue }
            await process(job.upload, of: user)
        }
    }

    private func process(_ upload: String, of user: UserSpace) async {
        do {
            try await cancelWhenGracefulShutdown {
                try await user.domain.liveLock.retryAfterUnlock(.complete) {
                    do { try await user.processUpload(upload) } catch let e as ProtectionError where e.code == .locked {
                        say("worker: upload '\(upload)' of user '\(user.name)' waits for unlock: domain \(user.domain.id) is locked")
                        throw e
                    }
                }
            }
            say("worker: processed upload '\(upload)' of user '\(user.name)'")
        } catch let e as ProtectionError where e.code == .notFound {
            // Queued twice (by the scan at start and by its upload): the first run processed it.
        } catch is CancellationError {
            say("worker: stopping; upload '\(upload)' of user '\(user.name)' stays in the Inbox for the next start")
        } catch {
            // Left in the Inbox (a tampered or unreadable item): an operator looks at it; the worker goes on.
            logger.error("unable to process an upload", metadata: ["user": "\(user.name)", "upload": "\(upload)", "error": "\(error)"])
            say("worker: upload '\(upload)' of user '\(user.name)' failed: \(error)")
        }
    }
}
