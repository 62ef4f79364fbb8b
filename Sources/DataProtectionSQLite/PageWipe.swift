internal import CSQLite
import DataProtection
import DataProtectionKeys
import Locking

#if canImport(Glibc)
import Glibc
#endif

/// Wipes the plaintext pages SQLite holds for a protected database when its class locks: a page cache over SQLite's
/// default that knows whose pages each cache holds, and an allocator that zeroes every block SQLite frees.
///
/// Installed once per process, by the first VFS registration (`ProtectedVFS.register`), before SQLite initializes:
/// `sqlite3_config` works only then. It is process-wide, so GRDB's connections (the same libsqlite3) get it too.
///
/// How a lock reaches the pages (SECURITY.md "Protected databases"):
/// - Each cache SQLite creates belongs to one pager, whose main file SQLite opens just before, on the same thread
///   (`sqlite3PagerOpen`: `xOpen`, then the cache's `xCreate`). The VFS's open of a protected main database names its
///   VFS and class on that thread (`expect`), and the next `xCreate` there takes them, before any page exists. A cache
///   SQLite makes again later for a new page size (made, then the old one destroyed, on one thread) inherits them.
/// - A lock revokes through `Revocation`, as for file handles: each open main database registers a `PageCacheHolder`,
///   whose `revoke` marks every cache of its VFS and of a locked class revoked and frees its unpinned pages (SQLite's
///   `xShrink`), which the allocator zeroes.
/// - A page pinned at that moment (a statement in progress holds it) is never zeroed under the statement: that would
///   hand SQLite zeros to parse as rows. It keeps its plaintext until released; a revoked cache discards (frees, so
///   zeroes) every page released while the class is locked. Its next page read fails `SQLITE_AUTH`, so a statement in
///   progress ends at its next page.
/// - A cache never serves a zeroed page: pages are freed (gone from the cache), never zeroed in place; a later fetch
///   misses and reads the file, which fails `SQLITE_AUTH` while locked and reads committed pages again after unlock.
/// - No bulk page allocation (`SQLITE_CONFIG_PAGECACHE` with no buffer), so a freed page goes back through the wiping
///   allocator rather than to the cache's own free list. Debian's SQLite has no lookaside (`OMIT_LOOKASIDE`).
enum PageWipe {
    /// Whether this process's SQLite runs with the wipe: false when SQLite was initialized before the first VFS
    /// registration, in which case class `complete` databases refuse to open (`ProtectedVFS.open`).
    static var installed: Bool { installation }

    /// Installs the wipe if SQLite is not initialized yet (once; later calls return the first answer).
    @discardableResult
    static func install() -> Bool { installation }

    private static let installation: Bool = {
        guard dp_sqlite3_config_get_pcache2(basePages) == SQLITE_OK, dp_sqlite3_config_get_malloc(baseMemory) == SQLITE_OK else { return false }
        var memory = sqlite3_mem_methods()
        memory.xMalloc = { n in baseMemory.pointee.xMalloc!(n) }
        memory.xFree = wipingFree
        memory.xRealloc = { p, n in
            guard let p else { return baseMemory.pointee.xMalloc!(n) }
            // Never the default realloc: it may move the block and free the old one unwiped.
            let old = Int(baseMemory.pointee.xSize!(p))
            guard let q = baseMemory.pointee.xMalloc!(n) else { return nil }
            q.copyMemory(from: p, byteCount: min(old, Int(n)))
            wipingFree(p)
            return q
        }
        memory.xSize = { p in baseMemory.pointee.xSize!(p) }
        memory.xRoundup = { n in baseMemory.pointee.xRoundup!(n) }
        memory.xInit = { a in baseMemory.pointee.xInit!(a) }
        memory.xShutdown = { a in baseMemory.pointee.xShutdown!(a) }
        memory.pAppData = baseMemory.pointee.pAppData
        var pages = sqlite3_pcache_methods2()
        pages.iVersion = 1
        pages.pArg = basePages.pointee.pArg
        pages.xInit = { a in basePages.pointee.xInit!(a) }
        pages.xShutdown = { a in basePages.pointee.xShutdown!(a) }
        pages.xCreate = createCache
        pages.xCachesize = { p, n in withCache(p) { basePages.pointee.xCachesize!($0.base, n) } }
        pages.xPagecount = { p in withCache(p) { basePages.pointee.xPagecount!($0.base) } }
        pages.xFetch = fetch
        pages.xUnpin = unpin
        pages.xRekey = { p, page, old, new in withCache(p) { basePages.pointee.xRekey!($0.base, page, old, new) } }
        pages.xTruncate = { p, limit in withCache(p) { basePages.pointee.xTruncate!($0.base, limit) } }
        pages.xDestroy = destroyCache
        pages.xShrink = { p in withCache(p) { basePages.pointee.xShrink!($0.base) } }
        let configured = withUnsafeMutablePointer(to: &memory) { m in withUnsafeMutablePointer(to: &pages) { p in
            dp_sqlite3_config_no_bulk_pages() == SQLITE_OK && dp_sqlite3_config_malloc(m) == SQLITE_OK && dp_sqlite3_config_pcache2(p) == SQLITE_OK
        } }
        return configured
    }()

    /// Names the owner (a `ProtectedVFS`) and class of the page cache SQLite creates next on this thread: called by
    /// the VFS's open of a main database, whose pager creates its cache right after.
    static func expect(owner: UnsafeRawPointer, protection: ProtectionClass) {
        let t = thread()
        t.pointee.owner = owner
        t.pointee.protection = protection
    }

    /// Forgets an expectation no cache took (the open failed before SQLite made its cache; called by `xClose`).
    static func forgetExpectation(owner: UnsafeRawPointer) {
        let t = thread()
        if t.pointee.owner == owner { t.pointee.owner = nil }
    }

    /// Frees (the allocator zeroes) every unpinned page of every cache of `owner` whose class `locked` says is locked,
    /// and marks those caches revoked (pages released later are discarded while the class stays locked).
    /// - Returns: the pages still pinned in those caches (kept until their statement releases them).
    @discardableResult
    static func wipe(owner: UnsafeRawPointer, where locked: (ProtectionClass) -> Bool) -> Int {
        var pinned = 0
        caches.withLock { r in
            for c in r.all {
                lock(c)
                if c.pointee.live, c.pointee.owner == owner, let cls = c.pointee.protection, locked(cls) {
                    c.pointee.revoked = true
                    basePages.pointee.xShrink!(c.pointee.base)
                    pinned += Int(basePages.pointee.xPagecount!(c.pointee.base))
                }
                unlock(c)
            }
        }
        return pinned
    }

    /// The pages of `owner`'s caches of a class `locked` says is locked (the test of the wipe counts them).
    static func pages(owner: UnsafeRawPointer, where locked: (ProtectionClass) -> Bool) -> Int {
        caches.withLock { r in
            r.all.reduce(0) { n, c in
                lock(c)
                defer { unlock(c) }
                guard c.pointee.live, c.pointee.owner == owner, let cls = c.pointee.protection, locked(cls) else { return n }
                return n + Int(basePages.pointee.xPagecount!(c.pointee.base))
            }
        }
    }
}

/// One page cache SQLite made (a pager's): the default cache behind it, its lock, and whose pages it holds.
///
/// Kept in raw memory that is never freed (a destroyed cache is reused by the next), so the thread-local pointer to
/// the last cache made on a thread is always safe to follow.
struct PageCache {
    /// First, so that the cache's address is the mutex's.
    var mutex = pthread_mutex_t()
    var base: OpaquePointer?
    var pageSize = 0
    /// The `ProtectedVFS` whose file the pages come from (unretained: a VFS lives for the process).
    var owner: UnsafeRawPointer?
    var protection: ProtectionClass?
    /// A lock freed its pages; pages released while its class stays locked are discarded.
    var revoked = false
    var live = false
}

/// Unregisters nothing and holds no key: takes a lock's revocation to the page caches of one VFS (one per open main
/// database, registered by `ProtectedVFS.open`, unregistered by its `xClose`).
///
/// Registered after the handle's admission rather than inside it: a lock that completes first revoked the handle, so no
/// page can be read into a cache until an unlock, and by the next lock this holder is registered.
final class PageCacheHolder: KeyHolder, @unchecked Sendable {  // immutable
    let owner: UnsafeRawPointer
    init(owner: UnsafeRawPointer) { self.owner = owner }
    func revoke(where locked: (ProtectionClass) -> Bool) { PageWipe.wipe(owner: owner, where: locked) }
}

// MARK: - The C entry points (no captures)

nonisolated(unsafe) private let basePages: UnsafeMutablePointer<sqlite3_pcache_methods2> = {  // written once, before use
    let m = UnsafeMutablePointer<sqlite3_pcache_methods2>.allocate(capacity: 1)
    m.initialize(to: sqlite3_pcache_methods2())
    return m
}()
nonisolated(unsafe) private let baseMemory: UnsafeMutablePointer<sqlite3_mem_methods> = {  // written once, before use
    let m = UnsafeMutablePointer<sqlite3_mem_methods>.allocate(capacity: 1)
    m.initialize(to: sqlite3_mem_methods())
    return m
}()

private let caches = Locked<(all: [UnsafeMutablePointer<PageCache>], free: [UnsafeMutablePointer<PageCache>])>(([], []))

/// Per thread: the owner and class the next cache takes (`PageWipe.expect`), and the last cache made.
private struct ThreadCaches {
    var owner: UnsafeRawPointer?
    var protection: ProtectionClass?
    var created: UnsafeMutablePointer<PageCache>?
}

private let threadKey: pthread_key_t = {
    var k = pthread_key_t()
    pthread_key_create(&k) { p in p?.deallocate() }
    return k
}()

private func thread() -> UnsafeMutablePointer<ThreadCaches> {
    if let p = pthread_getspecific(threadKey) { return p.assumingMemoryBound(to: ThreadCaches.self) }
    let t = UnsafeMutablePointer<ThreadCaches>.allocate(capacity: 1)
    t.initialize(to: ThreadCaches())
    pthread_setspecific(threadKey, t)
    return t
}

@inline(__always) private func lock(_ c: UnsafeMutablePointer<PageCache>) {
    pthread_mutex_lock(UnsafeMutableRawPointer(c).assumingMemoryBound(to: pthread_mutex_t.self))
}

@inline(__always) private func unlock(_ c: UnsafeMutablePointer<PageCache>) {
    pthread_mutex_unlock(UnsafeMutableRawPointer(c).assumingMemoryBound(to: pthread_mutex_t.self))
}

@inline(__always) private func withCache<R>(_ p: OpaquePointer?, _ body: (inout PageCache) -> R) -> R {
    let c = UnsafeMutablePointer<PageCache>(p!)
    lock(c)
    defer { unlock(c) }
    return body(&c.pointee)
}

/// Zeroes a block SQLite frees (pages, row values, statement memory), then frees it.
private func wipingFree(_ p: UnsafeMutableRawPointer?) {
    guard let p else { return }
    explicit_bzero(p, Int(baseMemory.pointee.xSize!(p)))
    baseMemory.pointee.xFree!(p)
}

private func createCache(_ pageSize: Int32, _ extra: Int32, _ purgeable: Int32) -> OpaquePointer? {
    guard let base = basePages.pointee.xCreate!(pageSize, extra, purgeable) else { return nil }
    let c: UnsafeMutablePointer<PageCache> = caches.withLock { r in
        if let c = r.free.popLast() { return c }
        let c = UnsafeMutablePointer<PageCache>.allocate(capacity: 1)
        c.initialize(to: PageCache())
        pthread_mutex_init(UnsafeMutableRawPointer(c).assumingMemoryBound(to: pthread_mutex_t.self), nil)
        r.all.append(c)
        return c
    }
    let t = thread()
    lock(c)
    c.pointee.base = base
    c.pointee.pageSize = Int(pageSize)
    c.pointee.owner = t.pointee.owner
    c.pointee.protection = t.pointee.owner == nil ? nil : t.pointee.protection
    c.pointee.revoked = false
    c.pointee.live = true
    unlock(c)
    t.pointee.owner = nil
    t.pointee.created = c
    return OpaquePointer(c)
}

/// Destroys a cache (its pages freed, so zeroed). A protected cache passes its owner and class to the cache made last
/// on this thread if that one has none: SQLite replaces a pager's cache for a new page size by making the new one, then
/// destroying the old (an unrelated cache wrongly taken is only wiped more often, never less).
private func destroyCache(_ p: OpaquePointer?) {
    let c = UnsafeMutablePointer<PageCache>(p!)
    lock(c)
    basePages.pointee.xDestroy!(c.pointee.base)  // frees every page: the allocator zeroes them
    let owner = c.pointee.owner, protection = c.pointee.protection
    c.pointee.base = nil
    c.pointee.live = false
    c.pointee.owner = nil
    unlock(c)
    let t = thread()
    if let owner, let n = t.pointee.created, n != c {
        lock(n)
        if n.pointee.live, n.pointee.owner == nil {
            n.pointee.owner = owner
            n.pointee.protection = protection
        }
        unlock(n)
    }
    if t.pointee.created == c { t.pointee.created = nil }
    caches.withLock { $0.free.append(c) }
}

/// The default's page, under the cache's lock (a lock's wipe may run on another thread).
private func fetch(_ p: OpaquePointer?, _ key: UInt32, _ create: Int32) -> UnsafeMutablePointer<sqlite3_pcache_page>? {
    let c = UnsafeMutablePointer<PageCache>(p!)
    lock(c)
    let page = basePages.pointee.xFetch!(c.pointee.base, key, create)
    unlock(c)
    return page
}

/// Unpins; a revoked cache whose class is still locked discards the page (freed, so zeroed) instead of keeping it.
private func unpin(_ p: OpaquePointer?, _ page: UnsafeMutablePointer<sqlite3_pcache_page>?, _ discard: Int32) {
    let c = UnsafeMutablePointer<PageCache>(p!)
    lock(c)
    var drop = discard
    if _slowPath(c.pointee.revoked) {
        let vfs = Unmanaged<ProtectedVFS>.fromOpaque(c.pointee.owner!).takeUnretainedValue()
        if vfs.files.keys.revocation.revokes(c.pointee.protection!) { drop = 1 } else { c.pointee.revoked = false }
    }
    basePages.pointee.xUnpin!(c.pointee.base, page, drop)
    unlock(c)
}
