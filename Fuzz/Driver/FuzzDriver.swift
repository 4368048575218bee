import Foundation

#if canImport(Glibc)
import Glibc
#endif

#if FUZZING
// libFuzzer's entry point when the program keeps its own `main` (SwiftPM names an executable's `main`
// itself, so libFuzzer's would never run): LLVMFuzzerRunDriver(&argc, &argv, callback).
@_silgen_name("LLVMFuzzerRunDriver")
private func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
) -> Int32

/// The target of this process: libFuzzer's C callback cannot capture it. Set once before the fuzzer
/// starts, read only by the fuzzer's thread.
nonisolated(unsafe) private var target: ((UnsafeRawBufferPointer) -> Void)?

/// libFuzzer's usual entry point, which its driver references too.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    target?(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
#endif

/// Runs a fuzz target. Built with `scripts/fuzz` (the toolset `Fuzz/toolset.json`: `-sanitize=fuzzer,address`
/// and `-DFUZZING`) it is a libFuzzer program and takes libFuzzer's arguments; in a normal build it
/// replays files (or every file of directories) through the same function, to reproduce a crash found by
/// fuzzing in a debug build: `.build/debug/fuzz-push-head crash-1234`.
///
/// The function must not crash for any input; it checks what must hold of what it accepted with
/// `precondition`, which the fuzzer reports as a crash.
public enum FuzzDriver {
    public static func run(_ body: @escaping (UnsafeRawBufferPointer) -> Void) -> Never {
        #if FUZZING
        target = body
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv, fuzzTestOneInput))
        #else
        let paths = CommandLine.arguments.dropFirst()
        guard !paths.isEmpty else {
            FileHandle.standardError.write(Data("usage: \(CommandLine.arguments[0]) FILE|DIRECTORY ...\n".utf8))
            exit(2)
        }
        var count = 0
        for path in paths {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                FileHandle.standardError.write(Data("no such file: \(path)\n".utf8))
                exit(2)
            }
            let files = isDirectory.boolValue
                ? ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted().map { path + "/" + $0 }
                : [path]
            for file in files {
                guard let data = FileManager.default.contents(atPath: file) else { continue }
                data.withUnsafeBytes { body($0) }
                count += 1
            }
        }
        print("replayed \(count) input(s)")
        exit(0)
        #endif
    }
}
