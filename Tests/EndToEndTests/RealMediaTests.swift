import Crypto
import Foundation
import SampleMedia
import Testing
import TestOrigin
import TestSupport

/// Real photos (JPEGs made by libjpeg) and real sounds (written through
/// libsndfile in four formats) through the built binary: what lands in the
/// cache is the same file, and still opens as what it was.
@Suite struct RealMediaTests {
    private static let contentTypes: [SoundFormat: String] = [
        .wav: "audio/wav", .aiff: "audio/aiff", .flac: "audio/flac", .ogg: "audio/ogg",
    ]

    /// Writes a sound through libsndfile and serves it at `/sounds/<name>`.
    private func serveSound(_ format: SoundFormat, named name: String, seconds: Double, seed: UInt64,
                            origin: TestOrigin, directory: TemporaryDirectory) throws -> (bytes: Data, sound: SoundDescription) {
        let path = directory.appending("served-\(seed)-\(name)")
        try SampleSounds.write(format, to: path, seconds: seconds, seed: seed)
        let bytes = try #require(FileManager.default.contents(atPath: path))
        origin.addResource("/sounds/\(name)", data: bytes, contentType: Self.contentTypes[format] ?? "audio/\(format.rawValue)")
        return (bytes, try SampleSounds.describe(path))
    }

    @Test func photosAndSoundsArriveWholeAndStillOpen() async throws {
        try await withOrigin { origin, directory in
            var photos: [String: (bytes: Data, dimensions: JPEGDimensions)] = [:]
            for number in 0..<6 {
                let picture: SamplePhotos.Picture = number.isMultiple(of: 2) ? .small : .medium
                let bytes = SamplePhotos.photo(number, of: picture)
                photos["/photos/\(number).jpg"] = (bytes, picture.dimensions)
            }
            // The same photo published under a second URL.
            photos["/photos/again-0.jpg"] = photos["/photos/0.jpg"]
            for (path, photo) in photos { origin.addResource(path, data: photo.bytes, contentType: "image/jpeg") }
            var sounds: [String: (bytes: Data, sound: SoundDescription)] = [:]
            for (index, format) in SoundFormat.allCases.enumerated() {
                let name = "walk-\(index).\(format.rawValue)"
                sounds["/sounds/\(name)"] = try serveSound(format, named: name, seconds: 3, seed: UInt64(10 + index),
                                                         origin: origin, directory: directory)
            }
            let cache = directory.appending("cache")
            let urls = (photos.keys.sorted() + sounds.keys.sorted()).map(origin.url)

            let result = try await BuiltProducts.run(["get", "--cache", cache, "--collection", "trip"] + urls)

            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stderr.contains("11 downloaded, 0 already cached, 0 failed"), "\(result.stderr)")
            let entries = try await listJSON(cache)
            #expect(entries.count == 11)
            for entry in entries {
                let url = try #require(entry["url"] as? String)
                let path = try #require(entry["path"] as? String)
                let hash = try #require(entry["hash"] as? String)
                let cached = try #require(FileManager.default.contents(atPath: path))
                #expect(SHA256.hash(data: cached).map { String(format: "%02x", $0) }.joined() == hash)
                let served = String(url.dropFirst(origin.baseURL.count))
                if let photo = photos[served] {
                    #expect(cached == photo.bytes, "\(url)")
                    #expect(JPEGStructure.dimensions(of: cached) == photo.dimensions, "\(url)")
                } else {
                    let sound = try #require(sounds[served], "\(url) was not served")
                    #expect(cached == sound.bytes, "\(url)")
                    let reopened = try SampleSounds.describe(path)
                    #expect(reopened == sound.sound, "\(url)")
                    #expect(reopened.decodedFrames == 132_300, "\(url)")
                }
            }
            // Photo 0 came twice and is stored once.
            #expect(try objectPaths(inCache: cache).count == 10)
        }
    }

    @Test func aSoundCutOffInOneRunIsFinishedByTheNextAndPlaysToTheEnd() async throws {
        try await withOrigin { origin, directory in
            let served = try serveSound(.flac, named: "river.flac", seconds: 8, seed: 21, origin: origin, directory: directory)
            let cut = served.bytes.count / 2
            origin.setFault("/sounds/river.flac", .dropAfter(bytes: cut), times: 1)
            let cache = directory.appending("cache")
            let arguments = ["get", "--cache", cache, "--retries", "0", origin.url("/sounds/river.flac")]

            let first = try await BuiltProducts.run(arguments)
            #expect(first.status == 1)
            #expect(first.stderrLines.contains { $0.contains(origin.url("/sounds/river.flac")) }, "\(first.stderr)")
            // Half a FLAC is not an object: nothing is in the store or the list.
            #expect(try objectPaths(inCache: cache).isEmpty)
            #expect(try await listJSON(cache).isEmpty)

            let second = try await BuiltProducts.run(arguments)
            #expect(second.status == 0, "\(second.stderr)")
            #expect(origin.requests(for: "/sounds/river.flac").last?.header("range")
                == resumeRange(from: resumeOffset(afterCutAt: cut, in: cache)))
            let path = try #require(try await listJSON(cache).first?["path"] as? String)
            #expect(FileManager.default.contents(atPath: path) == served.bytes)
            let sound = try SampleSounds.describe(path)
            #expect(sound.decodedFrames == 8 * 44_100)
            #expect(sound == served.sound)
        }
    }

    @Test func aSoundReplacedBetweenRunsIsStoredAsTheNewOneNotStitched() async throws {
        try await withOrigin { origin, directory in
            let old = try serveSound(.wav, named: "square.wav", seconds: 4, seed: 31, origin: origin, directory: directory)
            origin.setFault("/sounds/square.wav", .dropAfter(bytes: old.bytes.count / 3), times: 1)
            let cache = directory.appending("cache")
            let arguments = ["get", "--cache", cache, "--retries", "0", origin.url("/sounds/square.wav")]
            #expect(try await BuiltProducts.run(arguments).status == 1)

            // A new recording under the same URL: its validator differs, so the partial is not continued.
            let new = try serveSound(.wav, named: "square.wav", seconds: 5, seed: 32, origin: origin, directory: directory)
            let second = try await BuiltProducts.run(arguments)

            #expect(second.status == 0, "\(second.stderr)")
            // The partial was offered (Range + If-Range) and the origin answered with the whole new file.
            let resumed = try #require(origin.requests(for: "/sounds/square.wav").last)
            #expect(resumed.header("range") == resumeRange(from: resumeOffset(afterCutAt: old.bytes.count / 3, in: cache)))
            #expect(resumed.header("if-range") != nil)
            let path = try #require(try await listJSON(cache).first?["path"] as? String)
            #expect(FileManager.default.contents(atPath: path) == new.bytes)
            #expect(try SampleSounds.describe(path) == new.sound)
            #expect(try objectPaths(inCache: cache).count == 1)
        }
    }
}
