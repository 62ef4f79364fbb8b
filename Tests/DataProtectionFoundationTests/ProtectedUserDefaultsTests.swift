// `UserDefaults`' shape over the container's protected, coordinated preferences: Apple's getters and defaults, every
// property-list type, registration, didChangeNotification, another process's writes, and a locked class.
import DataProtectionFoundation
import DataProtection
import DataProtectionFormat
import XCTest

final class ProtectedUserDefaultsTests: FoundationTestCase {
    /// A context posting to a center of this test's own, and its standard defaults.
    func defaults() -> (ProtectedUserDefaults, NotificationCenter, AppContext) {
        let center = NotificationCenter()
        let ctx = AppContext(domain: domain, container: context.container, notificationCenter: center)
        return (ProtectedUserDefaults.standard(of: ctx), center, ctx)
    }

    /// Absent keys give Apple's defaults; every property-list type round-trips; the file on disk is protected.
    func testGettersGiveApplesDefaultsAndEveryPropertyListTypeRoundTrips() throws {
        let (d, _, _) = defaults()
        XCTAssertFalse(d.bool(forKey: "k"))
        XCTAssertEqual(d.integer(forKey: "k"), 0)
        XCTAssertEqual(d.double(forKey: "k"), 0)
        XCTAssertEqual(d.float(forKey: "k"), 0)
        XCTAssertNil(d.string(forKey: "k"))
        XCTAssertNil(d.array(forKey: "k"))
        XCTAssertNil(d.dictionary(forKey: "k"))
        XCTAssertNil(d.data(forKey: "k"))
        XCTAssertNil(d.url(forKey: "k"))
        XCTAssertNil(d.object(forKey: "k"))

        let date = Date(timeIntervalSince1970: 1_764_000_000.25)
        d.set(true, forKey: "bool")
        d.set(42, forKey: "int")
        d.set(2.5, forKey: "double")
        d.set(Float(1.5), forKey: "float")
        d.set("Ada", forKey: "string")
        d.set(Data([0, 1, 2, 255]), forKey: "data")
        d.set(date, forKey: "date")
        d.set(["a", 1, true] as [Any], forKey: "array")
        d.set(["name": "Ada", "n": 3, "nested": ["x": [1, 2]]] as [String: Any], forKey: "dict")
        d.set(URL(fileURLWithPath: "/srv/app/a.txt"), forKey: "fileURL")
        d.set(URL(string: "https://example.com/a?b=1"), forKey: "webURL")
        d.set(NSNumber(value: 7), forKey: "nsnumber")
        d.set(UInt8(9), forKey: "uint8")

        XCTAssertTrue(d.bool(forKey: "bool"))
        XCTAssertEqual(d.integer(forKey: "int"), 42)
        XCTAssertEqual(d.double(forKey: "double"), 2.5)
        XCTAssertEqual(d.float(forKey: "float"), 1.5)
        XCTAssertEqual(d.string(forKey: "string"), "Ada")
        XCTAssertEqual(d.data(forKey: "data"), Data([0, 1, 2, 255]))
        XCTAssertEqual(d.object(forKey: "date") as? Date, date)
        let array = try XCTUnwrap(d.array(forKey: "array"))
        XCTAssertEqual(array.count, 3)
        XCTAssertEqual(array[0] as? String, "a")
        XCTAssertEqual(array[1] as? Int, 1)
        XCTAssertEqual(array[2] as? Bool, true)
        let dict = try XCTUnwrap(d.dictionary(forKey: "dict"))
        XCTAssertEqual(dict["name"] as? String, "Ada")
        XCTAssertEqual(dict["n"] as? Int, 3)
        XCTAssertEqual((dict["nested"] as? [String: Any])?["x"] as? [Int], [1, 2])
        XCTAssertEqual(d.url(forKey: "fileURL"), URL(fileURLWithPath: "/srv/app/a.txt"))
        XCTAssertEqual(d.url(forKey: "webURL"), URL(string: "https://example.com/a?b=1"))
        XCTAssertEqual(d.integer(forKey: "nsnumber"), 7)
        XCTAssertEqual(d.integer(forKey: "uint8"), 9)
        XCTAssertEqual(d.stringArray(forKey: "array"), nil, "not every element is a string")
        // Apple's conversions between kinds.
        XCTAssertEqual(d.integer(forKey: "double"), 2)
        XCTAssertEqual(d.string(forKey: "int"), "42")
        XCTAssertTrue(d.bool(forKey: "int"))
        XCTAssertEqual(d.integer(forKey: "bool"), 1)
        XCTAssertNil(d.data(forKey: "string"))

        // A value that is not a property list is refused and changes nothing (iOS raises an exception).
        XCTAssertThrowsError(try d.write(NSObject(), forKey: "string")) {
            XCTAssertEqual(($0 as? CocoaError)?.protectionError?.code, .invalidArgument)
        }
        XCTAssertEqual(d.string(forKey: "string"), "Ada")

        d.removeObject(forKey: "string")
        XCTAssertNil(d.string(forKey: "string"))
        XCTAssertTrue(d.synchronize())
        XCTAssertEqual(d.dictionaryRepresentation().count, 12)

        // Stored in the container's preferences store, protected on disk.
        let raw = rawBytes("Library/Preferences/standard.prefs")
        XCTAssertEqual(Array(raw.prefix(FileHeader.magic.count)), FileHeader.magic)
        XCTAssertNil(raw.firstRange(of: Array("Ada".utf8)), "plaintext on disk")
        XCTAssertEqual(try context.container.preferences().value(forKey: "int"), .integer(42))
    }

    /// `register(defaults:)` shows where nothing is stored; a stored value wins; removing it shows the registered one
    /// again; `standard` resolves through the current context and shares its registration domain.
    func testRegisteredDefaultsShowThroughAndStandardFollowsTheContext() throws {
        let (d, center, ctx) = defaults()
        d.register(defaults: ["theme": "light", "fontSize": 12, "sync": true, "bad": NSObject()])
        XCTAssertEqual(d.string(forKey: "theme"), "light")
        XCTAssertEqual(d.integer(forKey: "fontSize"), 12)
        XCTAssertTrue(d.bool(forKey: "sync"))
        XCTAssertNil(d.object(forKey: "bad"))
        d.set("dark", forKey: "theme")
        XCTAssertEqual(d.string(forKey: "theme"), "dark")
        d.removeObject(forKey: "theme")
        XCTAssertEqual(d.string(forKey: "theme"), "light")

        let changes = Guarded(0)
        let token = center.addObserver(forName: ProtectedUserDefaults.didChangeNotification, object: d, queue: nil) { _ in changes.withLock { $0 += 1 } }
        defer { center.removeObserver(token) }
        AppContext.withCurrent(ctx) {
            XCTAssertTrue(ProtectedUserDefaults.standard === d)
            ProtectedUserDefaults.standard.set(14, forKey: "fontSize")
            let suite = ProtectedUserDefaults(suiteName: "com.example.shared")
            XCTAssertEqual(suite?.integer(forKey: "fontSize"), 12, "a suite shares the registration domain, not the values")
            XCTAssertNil(ProtectedUserDefaults(suiteName: "../escape"))
        }
        XCTAssertEqual(d.integer(forKey: "fontSize"), 14)
        XCTAssertEqual(changes.withLock { $0 }, 1)
    }

    /// Another process's write is read by the next call here, and this process's write is read there: no cache on
    /// either side (a real second process, `container-hold prefs`, on the same domain and container).
    func testValuesAreCoherentAcrossProcesses() throws {
        let (d, _, _) = defaults()
        let root = context.container.root
        var r = try runProduct("container-hold", [root, "prefs", "set", "counter", "41"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(d.integer(forKey: "counter"), 41)
        d.set(d.integer(forKey: "counter") + 1, forKey: "counter")
        d.set("from the app", forKey: "note")
        r = try runProduct("container-hold", [root, "prefs", "get", "counter"])
        XCTAssertEqual(r.stdout, "integer 42\n", r.stderr)
        r = try runProduct("container-hold", [root, "prefs", "get", "note"])
        XCTAssertEqual(r.stdout, "string from the app\n", r.stderr)
        r = try runProduct("container-hold", [root, "prefs", "set", "note", "from the other process"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(d.string(forKey: "note"), "from the other process")
        print("defaults across processes: other process set 41, this one read \(41) and wrote 42, the other read 42; strings both ways")
    }

    /// While the store's class is locked (`dpctl lock --evict-all` locks class C, the Preferences default) values read
    /// as absent (registered ones show through), writes are refused without a notification, and after unlock every
    /// stored value is still there. Against the old structure (no such layer) there was only the throwing store.
    func testALockedClassReadsAsAbsentAndRefusesWritesWithoutLosingValues() throws {
        let (d, center, _) = defaults()
        d.register(defaults: ["name": "Guest"])
        d.set("Ada", forKey: "name")
        d.set(7, forKey: "count")
        d.set(true, forKey: "flag")
        let changes = Guarded(0)
        let token = center.addObserver(forName: ProtectedUserDefaults.didChangeNotification, object: d, queue: nil) { _ in changes.withLock { $0 += 1 } }
        defer { center.removeObserver(token) }

        try dpctl(["lock", "--evict-all"])
        XCTAssertEqual(d.string(forKey: "name"), "Guest", "the registered value shows through")
        XCTAssertEqual(d.integer(forKey: "count"), 0)
        XCTAssertFalse(d.bool(forKey: "flag"))
        XCTAssertNil(d.object(forKey: "count"))
        XCTAssertEqual(d.dictionaryRepresentation() as? [String: String], ["name": "Guest"])
        d.set("Eve", forKey: "name")
        d.removeObject(forKey: "count")
        assertCocoa(.fileWriteNoPermission, .locked) { try d.write(8, forKey: "count") }
        XCTAssertEqual(changes.withLock { $0 }, 0, "a refused write posted didChangeNotification")

        try dpctlUnlock()
        XCTAssertEqual(d.string(forKey: "name"), "Ada")
        XCTAssertEqual(d.integer(forKey: "count"), 7)
        XCTAssertTrue(d.bool(forKey: "flag"))
        print("defaults while locked: name read 'Guest' (registered), count 0, flag false; 3 writes refused, 0 notifications; after unlock Ada/7/true")
    }
}
