// mediafetch-origin: serves a directory over HTTP on 127.0.0.1 for demos and scripts.
//
//   mediafetch-origin --root DIR [--port N] [--port-file PATH] [--rate-limit N[/SECONDS]]
//   mediafetch-origin --make-samples DIR [--photos N]
//
// Prints `serving DIR at http://127.0.0.1:PORT` once listening, then serves until
// SIGINT or SIGTERM. With --port 0 (the default) a free port is chosen; --port-file
// writes it to PATH for scripts. --rate-limit serves at most N requests in each
// window of SECONDS (default 1) and answers the rest 429 Too Many Requests with
// Retry-After, as a rate-limited API or CDN does.
//
// --make-samples fills DIR with real media to serve, and exits: N JPEG photos
// (default 200, each with other bytes) in photos/, the first of them again as
// photos/copy-of-000.jpg (as many zeros as the other names have digits: 0000
// from 1,001 photos), and a sound in each format libsndfile writes for the
// tests (WAV, AIFF, FLAC, Ogg Vorbis, MP3) in sounds/.

import Foundation
import SampleMedia
import TestOrigin

let usage = """
    usage: mediafetch-origin --root DIR [--port N] [--port-file PATH] [--rate-limit N[/SECONDS]]
           mediafetch-origin --make-samples DIR [--photos N]
    """

let help = """
    mediafetch-origin: serves a directory over HTTP on 127.0.0.1, for demos and scripts
    (the tests start the same origin in-process, with fault switches of their own).

    \(usage)

      --root DIR            serve the files under DIR (GET and HEAD), with Range,
                            ETag and Last-Modified, If-Range and conditional requests
      --port N              listen on port N; 0 (the default) picks a free port
      --port-file PATH      write the port chosen to PATH once listening
      --rate-limit N[/S]    serve at most N requests in each window of S seconds
                            (default 1); answer the rest 429 with Retry-After
      --make-samples DIR    write real media into DIR and exit: N JPEG photos in
                            photos/ (the first again as photos/copy-of-000.jpg,
                            with more zeros past 1,000 photos) and a sound
                            in each of WAV, AIFF, FLAC, Ogg Vorbis and MP3 in sounds/
      --photos N            how many photos --make-samples writes (default 200)

    Prints `serving DIR at http://127.0.0.1:PORT` once listening; serves until
    SIGINT or SIGTERM.
    """

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("mediafetch-origin: \(message)\n\(usage)\n".utf8))
    exit(2)
}

var root: String?
var port: UInt16 = 0
var portFile: String?
var samplesDirectory: String?
var photoCount: Int?
var rateLimit: (requests: Int, seconds: Double)?

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
    case "--rate-limit":
        let parts = arguments.popFirst()?.split(separator: "/", omittingEmptySubsequences: false) ?? []
        guard (1...2).contains(parts.count), let requests = Int(parts[0]), requests >= 0,
              let seconds = parts.count == 2 ? Double(parts[1]) : 1, seconds > 0, seconds.isFinite else {
            fail("--rate-limit needs N or N/SECONDS: N requests (0 or more) in each window of SECONDS (above 0)")
        }
        rateLimit = (requests, seconds)
    case "--make-samples":
        guard let value = arguments.popFirst() else { fail("--make-samples needs a directory") }
        samplesDirectory = value
    case "--photos":
        guard let value = arguments.popFirst(), let number = Int(value), number >= 1 else { fail("--photos needs a number from 1") }
        photoCount = number
    case "-h", "--help":
        print(help)
        exit(0)
    default:
        fail("unexpected argument \(argument)")
    }
}

/// Writes the sample media into `directory` (see the top of this file).
func makeSamples(in directory: String, photos: Int) throws {
    let base = URL(fileURLWithPath: directory, isDirectory: true)
    let photoFolder = base.appendingPathComponent("photos", isDirectory: true)
    let soundFolder = base.appendingPathComponent("sounds", isDirectory: true)
    try FileManager.default.createDirectory(at: photoFolder, withIntermediateDirectories: true)
    try FileManager.default.createDirectory(at: soundFolder, withIntermediateDirectories: true)
    let digits = max(3, String(photos - 1).count)
    func photoName(_ number: Int) -> String {
        let text = String(number)
        return String(repeating: "0", count: max(0, digits - text.count)) + text + ".jpg"
    }
    for number in 0..<photos {
        // Every fourth is the larger, progressive picture, as albums mix sizes.
        let picture: SamplePhotos.Picture = number % 4 == 3 ? .medium : .small
        try SamplePhotos.photo(number, of: picture).write(to: photoFolder.appendingPathComponent(photoName(number)))
    }
    try SamplePhotos.photo(0).write(to: photoFolder.appendingPathComponent("copy-of-\(photoName(0))"))
    for (index, format) in SoundFormat.allCases.enumerated() {
        let name = "0\(index).\(format.rawValue)"
        try SampleSounds.write(format, to: soundFolder.appendingPathComponent(name).path, seconds: 20, seed: UInt64(index + 1))
    }
}

if let samplesDirectory {
    guard root == nil, port == 0, portFile == nil, rateLimit == nil else {
        fail("--make-samples writes files and exits: it takes no --root, --port, --port-file or --rate-limit")
    }
    do {
        try makeSamples(in: samplesDirectory, photos: photoCount ?? 200)
    } catch {
        FileHandle.standardError.write(Data("mediafetch-origin: cannot make samples in \(samplesDirectory): \(error)\n".utf8))
        exit(1)
    }
    exit(0)
}
guard photoCount == nil else { fail("--photos goes with --make-samples") }
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
if let rateLimit { origin.limitRate(to: rateLimit.requests, per: rateLimit.seconds) }

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
