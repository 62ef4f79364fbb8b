// The HTTP API: notes and uploads per user, and what each library error answers.
import DataProtection
import Hummingbird

/// The routes:
///
///     GET    /health                       200 "ok"
///     GET    /users/:user/status           200 JSON: locked, pending uploads
///     GET    /users/:user/notes            200 the note names, one a line
///     PUT    /users/:user/notes/:name      204 stored (an atomic replace), 423 while locked
///     GET    /users/:user/notes/:name      200 the note, 404, 423 while locked
///     DELETE /users/:user/notes/:name      204, 404
///     PUT    /users/:user/uploads/:name    202 queued (also while locked), 409 when the name is taken
///     GET    /users/:user/uploads/:name    200 the processed upload, 202 still queued, 404, 423 while locked
func makeRouter(users: [String: UserSpace], queue: UploadQueue, maxBody: Int) -> Router<BasicRequestContext> {
    let router = Router()
    router.get("health") { _, _ in "ok\n" }
    let user = router.group("users/:user")
    user.get("status") { _, context in
        try await answer(users, context) { u in
            let pending = try await u.pendingUploads().count
            return text(.ok, "{\"user\":\"\(u.name)\",\"domain\":\"\(u.domain.id)\",\"locked\":\(u.isLocked),\"pendingUploads\":\(pending)}\n",
                        type: "application/json")
        }
    }
    user.get("notes") { _, context in
        try await answer(users, context) { u in text(.ok, try await u.noteNames().map { $0 + "\n" }.joined()) }
    }
    user.put("notes/:name") { request, context in
        try await answer(users, context) { u in
            let name = try itemName(context)
            try await u.writeNote(name, try await body(request, maxBody))
            return Response(status: .noContent)
        }
    }
    user.get("notes/:name") { _, context in
        try await answer(users, context) { u in bytes(try await u.readNote(try itemName(context))) }
    }
    user.delete("notes/:name") { _, context in
        try await answer(users, context) { u in
            try await u.deleteNote(try itemName(context))
            return Response(status: .noContent)
        }
    }
    user.put("uploads/:name") { request, context in
        try await answer(users, context) { u in
            let name = try itemName(context)
            try await u.deliverUpload(name, try await body(request, maxBody))
            queue.enqueue(u.name, name)
            return text(.accepted, "queued: upload '\(name)' is in the Inbox; it is processed into Documents/uploads\(u.isLocked ? " after `dpctl unlock`" : "")\n")
        }
    }
    user.get("uploads/:name") { _, context in
        try await answer(users, context) { u in
            let name = try itemName(context)
            switch try await u.uploadState(name) {
            case .processed: return bytes(try await u.readUpload(name))
            case .pending: return text(.accepted, "pending: upload '\(name)' is queued\(u.isLocked ? " until `dpctl unlock`" : "")\n")
            case .absent: throw ProtectionError(.notFound, "no upload '\(name)'")
            }
        }
    }
    return router
}

/// Runs `body` for the request's user and turns a `ProtectionError` into the response that says what to do.
private func answer(_ users: [String: UserSpace], _ context: BasicRequestContext, _ body: (UserSpace) async throws -> Response) async throws -> Response {
    let name = try context.parameters.require("user")
    guard let user = users[name] else { return text(.notFound, "no user '\(name)' on this service\n") }
    do { return try await body(user) } catch let e as ProtectionError {
        return failure(e, user)
    }
}

/// The response for a library error; the body says which domain and which command fixes it, never file contents.
func failure(_ e: ProtectionError, _ user: UserSpace) -> Response {
    switch e.code {
    case .locked:
        return text(.init(code: 423, reasonPhrase: "Locked"), """
            locked: the protection domain of user '\(user.name)' (domain \(user.domain.id), \(user.domain.location.home)) is locked, \
            so their notes and processed uploads are unavailable; run `dpctl unlock` for that domain \
            (DATAPROTECTION_HOME=\(user.domain.location.home)) and retry. Uploads are still accepted and processed after the unlock.
            detail: \(e.message)

            """)
    case .shuttingDown: return text(.serviceUnavailable, "shutting down: \(e.message)\n")
    case .notFound: return text(.notFound, "not found: \(e.message)\n")
    case .alreadyExists: return text(.conflict, "conflict: \(e.message)\n")
    case .invalidArgument, .escapesContainer, .readOnly: return text(.badRequest, "bad request: \(e.message)\n")
    default: return text(.internalServerError, "error (\(e.code)): \(e.message)\n")
    }
}

/// The `:name` of a note or upload: 1–128 of `A-Z a-z 0-9 . _ -`, not starting with a dot (no hidden or temporary
/// names, no path). The container confines every path anyway; this keeps the API's names plain.
private func itemName(_ context: BasicRequestContext) throws -> String {
    let name = try context.parameters.require("name")
    let allowed = name.utf8.allSatisfy { c in
        (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2E || c == 0x5F || c == 0x2D
    }
    guard allowed, (1...128).contains(name.utf8.count), !name.hasPrefix(".") else {
        throw ProtectionError(.invalidArgument, "'\(name)' is not a valid name: use 1 to 128 of A-Z a-z 0-9 . _ -, not starting with a dot")
    }
    return name
}

/// The request body, whole (at most `limit` bytes: a larger one is answered 413 by Hummingbird).
private func body(_ request: Request, _ limit: Int) async throws -> [UInt8] {
    Array(try await request.body.collect(upTo: limit).readableBytesView)
}

private func text(_ status: HTTPResponse.Status, _ s: String, type: String = "text/plain; charset=utf-8") -> Response {
    Response(status: status, headers: [.contentType: type], body: .init(byteBuffer: ByteBuffer(string: s)))
}

private func bytes(_ b: [UInt8]) -> Response {
    Response(status: .ok, headers: [.contentType: "application/octet-stream"], body: .init(byteBuffer: ByteBuffer(bytes: b)))
}
