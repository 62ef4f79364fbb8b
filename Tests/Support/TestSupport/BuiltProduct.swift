// Finding the executables the tests run (dpctl, the rigs of this package, the example service) next to the test bundle.
import Foundation

/// An executable the tests run was not found next to the test bundle.
public struct MissingProduct: Error, CustomStringConvertible {
    /// The product name that was looked for.
    public let name: String
    /// The directories searched, nearest first.
    public let searched: [String]

    public var description: String {
        "the executable '\(name)' is missing next to the tests (looked in \(searched.joined(separator: ", "))); "
            + "run `swift build --build-tests` before `swift test --skip-build`"
    }
}

/// The path of an executable built by this package, next to the running test bundle.
///
/// SwiftPM puts every product of a build in one directory, the one holding the test bundle's
/// executable (`/proc/self/exe`); the three directories above it are searched too, for bundle
/// layouts that nest the executable (`X.xctest/Contents/MacOS/X`).
/// - Parameter name: the product name, as declared in Package.swift (`crash-worker`).
/// - Throws: `MissingProduct`, naming where it looked and the build command, so a test that needs
///   the product fails with the fix instead of being skipped.
public func builtProduct(_ name: String) throws -> String {
    let bundle = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
    var directory = URL(fileURLWithPath: bundle).deletingLastPathComponent()
    var searched: [String] = []
    for _ in 0..<4 {
        let path = directory.appendingPathComponent(name).path
        if FileManager.default.isExecutableFile(atPath: path) { return path }
        searched.append(directory.path)
        directory = directory.deletingLastPathComponent()
    }
    throw MissingProduct(name: name, searched: searched)
}

/// A built product started with its standard input and output (and, when asked, its standard error) piped to the test.
public struct StartedProduct {
    /// The running process.
    public let process: Process
    /// Its standard input: closing the writing end tells a rig to finish.
    public let input: Pipe
    /// Its standard output.
    public let output: Pipe
    /// Its standard error, when captured (otherwise it goes to the test's).
    public let error: Pipe?
}

/// Starts the built product `name` (a rig, dpctl) with `arguments` and `environment`.
/// - Parameter captureError: pipe its standard error to the test too (read it, or a chatty process blocks).
/// - Throws: `MissingProduct`, or the error of starting it.
public func startProduct(_ name: String, _ arguments: [String], environment: [String: String], captureError: Bool = false) throws -> StartedProduct {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: try builtProduct(name))
    p.arguments = arguments
    p.environment = environment
    let input = Pipe(), output = Pipe(), error = captureError ? Pipe() : nil
    p.standardInput = input
    p.standardOutput = output
    if let error { p.standardError = error }
    try p.run()
    return StartedProduct(process: p, input: input, output: output, error: error)
}
