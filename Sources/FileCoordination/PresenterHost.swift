// The presenter side of the rendezvous: requests from coordinators turned into local callbacks.
import Dispatch
internal import SystemLayer

/// Serves the requests of coordinators in other processes to this process's registrations.
///
/// Each conversation runs on a thread of its own (the rendezvous endpoint's): it delivers the request, replies `ok`,
/// and, for a relinquish, keeps the conversation as the lease of the access: the reacquirers run when the
/// coordinator sends `reacquire` or its connection closes (for example because it died).
enum PresenterHost {
    static func serve(_ request: [UInt8], on conversation: RendezvousConversation, hub: PresenterHub) {
        // The frame holds one `wireLine`, newline included.
        let line = String(decoding: request, as: UTF8.self)
        guard line.hasSuffix("\n"), let parsed = PresenterMessage.parse(line.dropLast()) else { return }
        let message = parsed.message
        let registrations = hub.localRegistrations(presenting: parsed.presentedPath)
        let group = DispatchGroup()
        let reacquirers = ReacquirerList()
        for registration in registrations {
            group.enter()
            registration.queue.async {
                if let reacquire = message.deliver(to: registration) { reacquirers.add(reacquire, on: registration.queue) }
                if message.holdsAccess { reacquirers.add(PresenterMessage.endOfAccess(for: registration), on: nil) }
                group.leave()
            }
        }
        // Callbacks the coordinator waits for are acknowledged once they ran; notifications once
        // they are queued, so the next message on this peer's queue cannot overtake them.
        if message.awaitsReply { _ = group.wait(timeout: .now() + .seconds(120)) }
        _ = conversation.send(Array("ok".utf8))
        guard message.holdsAccess else {
            reacquirers.runAll()
            return
        }
        // The conversation is the access's lease: "reacquire", end of stream or an error all end it. The
        // reacquirers are queued before the acknowledgement, so they run before later messages.
        _ = conversation.receive(timeoutMilliseconds: -1)
        reacquirers.runAll()
        _ = conversation.send(Array("ok".utf8))
    }
}
