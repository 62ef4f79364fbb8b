import Foundation
import DataProtection
import XCTest

/// A fresh container under a temporary directory, with real random in-memory class keys.
func makeContainer(_ test: XCTestCase, policy: ContainerPolicy = .standard, name: String = #function) throws -> (Container, InMemoryClassKeys, String) {
    let dir = try temporaryDirectory(test, name)
    let keys = try InMemoryClassKeys.random()
    let root = dir + "/app"
    let c = try Container.create(at: root, keys: keys, policy: policy)
    test.addTeardownBlock { c.close() }
    return (c, keys, root)
}

/// Runs a command to completion; returns its exit status, standard output and standard error.
@discardableResult
func runTool(_ tool: String, _ args: [String], cwd: String? = nil, env: [String: String] = [:], file: StaticString = #filePath, line: UInt = #line) throws -> (status: Int32, out: String, err: String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: tool)
    p.arguments = args
    if let cwd { p.currentDirectoryURL = URL(fileURLWithPath: cwd) }
    p.environment = ProcessInfo.processInfo.environment.merging(env) { $1 }
    let out = Pipe(), err = Pipe()
    p.standardOutput = out
    p.standardError = err
    try p.run()
    let o = out.fileHandleForReading.readDataToEndOfFile()
    let e = err.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
}

/// Runs a command and fails the test unless it exits 0; returns its standard output.
@discardableResult
func runOK(_ tool: String, _ args: [String], cwd: String? = nil, env: [String: String] = [:], file: StaticString = #filePath, line: UInt = #line) throws -> String {
    let r = try runTool(tool, args, cwd: cwd, env: env)
    XCTAssertEqual(r.status, 0, "\(tool) \(args.joined(separator: " ")) failed: \(r.err)", file: file, line: line)
    return r.out
}

/// Every regular file under `dir`, relative to it, sorted.
func regularFiles(under dir: String) -> [String] {
    guard let e = FileManager.default.enumerator(atPath: dir) else { return [] }
    var out: [String] = []
    while let p = e.nextObject() as? String {
        var isDir: ObjCBool = false
        let full = dir + "/" + p
        if let a = try? FileManager.default.attributesOfItem(atPath: full), a[.type] as? FileAttributeType == .typeRegular,
           FileManager.default.fileExists(atPath: full, isDirectory: &isDir), !isDir.boolValue {
            out.append(p)
        }
    }
    return out.sorted()
}
