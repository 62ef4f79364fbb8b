// The pure arithmetic of the lock file: which bytes an access locks, and in which order.
internal import PathSyntax
internal import SystemLayer

/// A byte-range lock type (the system layer's OFD lock kind).
typealias LockType = OFDLock.Kind

/// The locks one slot needs: the item byte (the item itself) and the subtree byte (its contents).
struct SlotNeeds: Equatable, Sendable {
    /// Shared for a reader of the item, exclusive for a writer.
    var item: LockType?
    /// Shared while something inside the item is accessed, exclusive for a deleting, moving or replacing writer.
    var subtree: LockType?

    static let none = SlotNeeds(item: nil, subtree: nil)

    /// The weakest needs that satisfy both `self` and `other`.
    func merged(with other: SlotNeeds) -> SlotNeeds {
        SlotNeeds(item: Self.max(item, other.item), subtree: Self.max(subtree, other.subtree))
    }

    /// Whether holding `self` already satisfies `other`.
    func covers(_ other: SlotNeeds) -> Bool { merged(with: other) == self }

    /// Whether any byte is needed exclusively (the slot's gate is then taken exclusively).
    var isWriter: Bool { item == .exclusive || subtree == .exclusive }

    private static func max(_ a: LockType?, _ b: LockType?) -> LockType? {
        switch (a, b) {
        case (nil, let b): b
        case (let a, nil): a
        case (let a?, let b?): Swift.max(a, b)
        }
    }
}

/// Byte layout of one 4-byte slot in the domain lock file.
///
/// Offsets are chosen so that the common requests are one contiguous range: a reader locks
/// `item+gate`, a descendant's intent locks `gate+subtree`, a subtree writer locks all three.
enum SlotByte {
    static let item: Int64 = 0
    static let gate: Int64 = 1
    static let subtree: Int64 = 2
    static let width: Int64 = 4
}

/// How an intent touches the item it names.
enum ItemAccess: Sendable, Equatable {
    case read
    case write
    /// A write that also excludes everything inside the item (deleting, moving, replacing).
    case writeSubtree

    var needs: SlotNeeds {
        switch self {
        case .read: SlotNeeds(item: .shared, subtree: nil)
        case .write: SlotNeeds(item: .exclusive, subtree: nil)
        case .writeSubtree: SlotNeeds(item: .exclusive, subtree: .exclusive)
        }
    }
}

/// Pure helpers for paths and slots.
package enum LockLayout {
    /// The slot of an item, from its path relative to the domain root (FNV-1a, 60 bits).
    package static func slot(forRelativePath relative: String) -> UInt64 {
        var hash: UInt64 = fnvOffset
        for byte in relative.utf8 { hash = (hash ^ UInt64(byte)) &* fnvPrime }
        return hash >> 4
    }

    private static let fnvOffset: UInt64 = 0xcbf2_9ce4_8422_2325
    private static let fnvPrime: UInt64 = 0x0000_0100_0000_01b3

    /// The byte offset of a slot in the lock file.
    static func offset(ofSlot slot: UInt64) -> Int64 { Int64(slot) * SlotByte.width }

    /// The strict ancestors of a relative path that lie below the root: "a/b/c" gives ["a", "a/b"].
    ///
    /// Taken apart at the byte "/", as `plan` hashes it (see PathSyntax).
    static func ancestors(ofRelativePath relative: String) -> [String] {
        var result: [String] = []
        let u = relative.utf8
        var index = u.startIndex
        while let slash = u[index...].firstIndex(of: UInt8(ascii: "/")) {
            result.append(String(decoding: u[..<slash], as: UTF8.self))
            index = u.index(after: slash)
        }
        return result
    }

    /// The per-slot needs of a set of accesses, sorted by slot (the global lock order).
    ///
    /// One pass over each path hashes every prefix that ends at a "/", so ancestors cost no strings.
    static func plan(_ accesses: [(relative: String, access: ItemAccess)]) -> [(slot: UInt64, needs: SlotNeeds)] {
        var plan: [(slot: UInt64, needs: SlotNeeds)] = []
        func add(_ slot: UInt64, _ needs: SlotNeeds) {
            if let index = plan.firstIndex(where: { $0.slot == slot }) {
                plan[index].needs = plan[index].needs.merged(with: needs)
            } else {
                plan.append((slot, needs))
            }
        }
        let intent = SlotNeeds(item: nil, subtree: .shared)
        for (relative, access) in accesses {
            var hash: UInt64 = fnvOffset
            for byte in relative.utf8 {
                if byte == UInt8(ascii: "/") { add(hash >> 4, intent) }
                hash = (hash ^ UInt64(byte)) &* fnvPrime
            }
            add(hash >> 4, access.needs)
        }
        if plan.count > 1 { plan.sort { $0.slot < $1.slot } }
        return plan
    }

    /// Lexically normalises an absolute path: removes "." and empty components, resolves "..".
    /// - Returns: nil when the path is not absolute.
    static func normalize(_ path: String) -> String? {
        guard isAbsolutePath(path) else { return nil }
        if isNormal(path) { return path }
        var parts: [String] = []
        for part in pathComponents(of: path) {
            if samePath(part, ".") { continue }
            if samePath(part, "..") { _ = parts.popLast(); continue }
            parts.append(part)
        }
        return "/" + parts.joined(separator: "/")
    }

    /// Whether an absolute path has no "//", no "/." and no trailing "/" (then it is already normal).
    private static func isNormal(_ path: String) -> Bool {
        var previousWasSlash = false
        for byte in path.utf8 {
            if previousWasSlash && (byte == UInt8(ascii: "/") || byte == UInt8(ascii: ".")) { return false }
            previousWasSlash = byte == UInt8(ascii: "/")
        }
        return !previousWasSlash || path.utf8.count == 1
    }

    /// The path of `path` relative to `root`, "" for the root itself, nil when outside (compared as bytes: PathSyntax).
    static func relative(_ path: String, toRoot root: String) -> String? {
        samePath(path, root) ? "" : relativePath(of: path, inside: root)
    }
}
