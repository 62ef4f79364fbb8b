// The pure arithmetic: path normalisation, ancestors, slots and merged plans.
// @testable: unit-tests the lock file's internal slot arithmetic (SlotNeeds, plan) and the presenter wire lines, which no API exposes.
@testable import FileCoordination
import PathSyntax
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

    func testPathsAreSplitAtTheSeparatorByte() {
        // U+0600 is a Unicode prepend mark: "\u{600}/" is one Character, yet its "/" separates two names.
        XCTAssertEqual(LockLayout.ancestors(ofRelativePath: "a\u{600}/b"), ["a\u{600}"])
        XCTAssertEqual(LockLayout.normalize("/a\u{600}/../b"), "/b")
        XCTAssertEqual(LockLayout.normalize("/a/\u{600}/./b"), "/a/\u{600}/b")
        // The ancestor intents `plan` takes (hashed per byte) are the ancestors' own slots.
        let plan = LockLayout.plan([("a\u{600}/b", .read)]).map(\.slot)
        XCTAssertTrue(plan.contains(LockLayout.slot(forRelativePath: "a\u{600}")))
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
        XCTAssertEqual(PresentedRelation(presented: "/a", accessed: "/"), .inside)
        // A name that starts with a combining mark: "/\u{301}" is one Character, yet the "/" separates.
        XCTAssertEqual(PresentedRelation(presented: "/x/\u{301}b", accessed: "/x"), .inside)
        XCTAssertEqual(PresentedRelation(presented: "/x", accessed: "/x/\u{301}b"), .container)
        // "caf\u{e9}" and "cafe\u{301}" are equal Strings but two directories to the kernel.
        XCTAssertNil(PresentedRelation(presented: "/caf\u{e9}", accessed: "/cafe\u{301}"))
        XCTAssertNil(PresentedRelation(presented: "/caf\u{e9}/f", accessed: "/cafe\u{301}"))
    }

    func testPathRelationsAreByteWise() {
        XCTAssertEqual(relativePath(of: "/d/a/b", inside: "/d"), "a/b")
        XCTAssertEqual(relativePath(of: "/d/a", inside: "/d/"), "a")
        XCTAssertEqual(relativePath(of: "/a", inside: "/"), "a")
        XCTAssertNil(relativePath(of: "/d", inside: "/d"))
        XCTAssertNil(relativePath(of: "/d/", inside: "/d"))
        XCTAssertNil(relativePath(of: "/dx", inside: "/d"))
        XCTAssertNil(relativePath(of: "/", inside: "/"))
        XCTAssertTrue(isPath("/x/\u{301}b", inside: "/x"))
        XCTAssertFalse(isPath("/cafe\u{301}/b", inside: "/caf\u{e9}"))
        XCTAssertFalse(samePath("caf\u{e9}", "cafe\u{301}"))
        XCTAssertEqual(Set([PathKey("caf\u{e9}"), PathKey("cafe\u{301}"), PathKey("caf\u{e9}")]).count, 2)
        XCTAssertEqual(LockLayout.relative("/r/\u{301}x", toRoot: "/r"), "\u{301}x")
        XCTAssertNil(LockLayout.relative("/cafe\u{301}/x", toRoot: "/caf\u{e9}"))
    }
}
