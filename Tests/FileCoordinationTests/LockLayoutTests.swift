// The pure arithmetic: path normalisation, ancestors, slots and merged plans.
@testable import FileCoordination
import XCTest

final class LockLayoutTests: XCTestCase {
    func testNormalizeRemovesDotsAndDuplicateSlashes() {
        XCTAssertEqual(LockLayout.normalize("/a//b/./c/"), "/a/b/c")
        XCTAssertEqual(LockLayout.normalize("/a/b/../c"), "/a/c")
        XCTAssertEqual(LockLayout.normalize("/../.."), "/")
        XCTAssertEqual(LockLayout.normalize("/plain/path"), "/plain/path")
        XCTAssertNil(LockLayout.normalize("relative/path"))
    }

    func testRelativeToRoot() {
        XCTAssertEqual(LockLayout.relative("/r/a/b", toRoot: "/r"), "a/b")
        XCTAssertEqual(LockLayout.relative("/r", toRoot: "/r"), "")
        XCTAssertNil(LockLayout.relative("/rx/a", toRoot: "/r"), "a sibling with a common prefix is outside")
        XCTAssertNil(LockLayout.relative("/other", toRoot: "/r"))
        XCTAssertEqual(LockLayout.relative("/a/b", toRoot: "/"), "a/b")
        XCTAssertEqual(LockLayout.relative("/r/é/ü", toRoot: "/r"), "é/ü")
    }

    func testAncestorsAreStrictAndBelowTheRoot() {
        XCTAssertEqual(LockLayout.ancestors(ofRelativePath: "a/b/c"), ["a", "a/b"])
        XCTAssertEqual(LockLayout.ancestors(ofRelativePath: "a"), [])
        XCTAssertEqual(LockLayout.ancestors(ofRelativePath: ""), [])
    }

    func testSlotsFitInAnOffset() {
        for name in ["", "a", "a/b", String(repeating: "z", count: 500)] {
            let slot = LockLayout.slot(forRelativePath: name)
            XCTAssertLessThan(slot, 1 << 60)
            XCTAssertGreaterThanOrEqual(LockLayout.offset(ofSlot: slot), 0)
        }
        XCTAssertNotEqual(LockLayout.slot(forRelativePath: "a"), LockLayout.slot(forRelativePath: "b"))
    }

    func testPlanMergesItemsAndAncestorIntents() {
        let plan = LockLayout.plan([("d/f", .read), ("d", .write), ("d/g", .writeSubtree)])
        let bySlot = Dictionary(uniqueKeysWithValues: plan.map { ($0.slot, $0.needs) })
        let d = LockLayout.slot(forRelativePath: "d")
        XCTAssertEqual(bySlot[d], SlotNeeds(item: .exclusive, subtree: .shared), "a written directory with accessed children")
        XCTAssertEqual(bySlot[LockLayout.slot(forRelativePath: "d/f")], SlotNeeds(item: .shared, subtree: nil))
        XCTAssertEqual(bySlot[LockLayout.slot(forRelativePath: "d/g")], SlotNeeds(item: .exclusive, subtree: .exclusive))
        XCTAssertEqual(plan.map(\.slot), plan.map(\.slot).sorted(), "the plan is in the global lock order")
    }

    func testPlanHashesAncestorsLikeTheirOwnPaths() {
        let plan = LockLayout.plan([("a/b/c", .read)])
        let expected = (LockLayout.ancestors(ofRelativePath: "a/b/c") + ["a/b/c"]).map { LockLayout.slot(forRelativePath: $0) }
        XCTAssertEqual(Set(plan.map(\.slot)), Set(expected))
        XCTAssertEqual(plan.filter { $0.needs == SlotNeeds(item: nil, subtree: .shared) }.count, 2)
    }

    func testCoverage() {
        let writer = SlotNeeds(item: .exclusive, subtree: nil)
        XCTAssertTrue(writer.covers(SlotNeeds(item: .shared, subtree: nil)))
        XCTAssertFalse(writer.covers(SlotNeeds(item: nil, subtree: .shared)))
        XCTAssertFalse(SlotNeeds(item: .shared, subtree: nil).covers(writer))
    }

    func testWireLinesRoundTrip() {
        let messages: [PresenterMessage] = [
            .save, .relinquishToReader(accessed: "/a\tb", pid: 12), .relinquishToWriter(accessed: "/x\\y", pid: 3),
            .accommodateDeletion, .didMove(to: "/new\nline"), .didChange, .subitemDidChange(at: "/d/e"),
        ]
        for message in messages {
            let line = message.wireLine(presentedPath: "/p\tq")
            XCTAssertEqual(line.filter { $0 == "\n" }.count, 1)
            let parsed = PresenterMessage.parse(line.dropLast())
            XCTAssertEqual(parsed?.message, message)
            XCTAssertEqual(parsed?.presentedPath, "/p\tq")
        }
        XCTAssertNil(PresenterMessage.parse("bogus\t/a\t\t0"))
    }

    func testPresentedRelations() {
        XCTAssertEqual(PresentedRelation(presented: "/a/b", accessed: "/a/b"), .same)
        XCTAssertEqual(PresentedRelation(presented: "/a/b/c", accessed: "/a/b"), .inside)
        XCTAssertEqual(PresentedRelation(presented: "/a", accessed: "/a/b"), .container)
        XCTAssertNil(PresentedRelation(presented: "/a/bc", accessed: "/a/b"))
    }
}
