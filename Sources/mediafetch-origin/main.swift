// mediafetch-origin: serves a directory over HTTP on 127.0.0.1 for demos and scripts.
//
//   mediafetch-origin --root DIR [--port N] [--port-file PATH]
//
// Prints `serving DIR at http://127.0.0.1:PORT` once listening, then serves until
// SIGINT or SIGTERM. With --port 0 (the default) a free port is chosen; --port-file
// writes it to PATH for scripts.

import Foundation
import TestOrigin

let usage = "usage: mediafetch-origin --root DIR [--port N] [--port-file PATH]"

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("mediafetch-origin: \(message)\n\(usage)\n".utf8))
    exit(2)
}

var root: String?
var port: UInt16 = 0
var portFile: String?

var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--root":
        guard let value = arguments.popFirst() else { fail("--root needs a directory") }
        root = value
    case "--port":
        guard let value = arguments.popFirst(), let number = UInt16(value) else { fail("--port needs a number 0-65535") }
        port = number
    case "--port-file":
        guard let value = arguments.popFirst() else { fail("--port-file needs a path") }
        portFile = value
    case "-h", "--help":
        print(usage)
        exit(0)
    default:
        fail("unexpected argument \(argument)")
    }
}
guard let root else { fail("--root is required") }

// Block the stop signals before the origin starts its threads (they inherit the mask),
// so that they are only ever delivered to the sigwait below.
var stopSignals = sigset_t()
sigemptyset(&stopSignals)
sigaddset(&stopSignals, SIGINT)
sigaddset(&stopSignals, SIGTERM)
pthread_sigmask(SIG_BLOCK, &stopSignals, nil)

let origin: TestOrigin
do {
    origin = try TestOrigin(root: URL(fileURLWithPath: root, isDirectory: true), port: port)
} catch {
    FileHandle.standardError.write(Data("mediafetch-origin: \(error)\n".utf8))
    exit(1)
}

if let portFile {
    do {
        // Atomic, so a script polling for the file never reads it half-written.
        try Data("\(origin.port)\n".utf8).write(to: URL(fileURLWithPath: portFile), options: .atomic)
    } catch {
        FileHandle.standardError.write(Data("mediafetch-origin: cannot write \(portFile): \(error)\n".utf8))
        exit(1)
    }
}
// Unbuffered, so a script reading our stdout through a pipe sees the line at once.
FileHandle.standardOutput.write(Data("serving \(root) at \(origin.baseURL)\n".utf8))

var received: Int32 = 0
sigwait(&stopSignals, &received)
origin.shutdown()
