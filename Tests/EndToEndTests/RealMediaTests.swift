import Crypto
import Foundation
import SampleMedia
import Testing
import TestOrigin
import TestSupport

/// Real photos (JPEGs made by libjpeg) and real sounds (written through
/// libsndfile in five formats) through the built binary: what lands in the
/// cache is the same file, and still opens as what it was; a sound that
/// does not decode is refused.
@Suite struct RealMediaTests {
    private static let contentTypes: [SoundFormat: String] = [
        .wav: "audio/wav", .aiff: "audio/aiff", .flac: "audio/flac", .ogg: "audio/ogg", .mp3: "audio/mpeg",
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
            #expect(result.stderr.contains("12 downloaded, 0 already cached, 0 failed"), "\(result.stderr)")
            let entries = try await listJSON(cache)
            #expect(entries.count == 12)
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
                    #expect(entry["kind"] as? String == "photo", "\(url)")
                    #expect(entry["durationSeconds"] == nil, "\(url)")
                } else {
                    let sound = try #require(sounds[served], "\(url) was not served")
                    #expect(cached == sound.bytes, "\(url)")
                    let reopened = try SampleSounds.describe(path)
                    #expect(reopened == sound.sound, "\(url)")
                    #expect(reopened.decodedFrames == 132_300, "\(url)")
                    // What libsndfile found is listed with it.
                    #expect(entry["kind"] as? String == "sound", "\(url)")
                    #expect(entry["format"] as? String == reopened.format.rawValue, "\(url)")
                    #expect(entry["durationSeconds"] as? Double == 3.0, "\(url)")
                    #expect(entry["sampleRate"] as? Int == 44_100, "\(url)")
                    #expect(entry["channels"] as? Int == 2, "\(url)")
                }
            }
            // Photo 0 came twice and is stored once.
            #expect(try objectPaths(inCache: cache).count == 11)
            let soundsListed = try await BuiltProducts.run(["list", "--cache", cache, "--kind", "sound"])
            #expect(soundsListed.stdout.split(separator: "\n").count == 1 + sounds.count, "\(soundsListed.stdout)")
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
            let entry = try #require(try await listJSON(cache).first)
            let path = try #require(entry["path"] as? String)
            #expect(FileManager.default.contents(atPath: path) == served.bytes)
            let sound = try SampleSounds.describe(path)
            #expect(sound.decodedFrames == 8 * 44_100)
            #expect(sound == served.sound)
            // Checked whole, though its first bytes came in the run before (read back from the partial).
            #expect(entry["kind"] as? String == "sound")
            #expect(entry["durationSeconds"] as? Double == 8.0)
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

    /// A sound asked for (by its name or its type) that libsndfile cannot
    /// decode is refused in one line with libsndfile's reason, and nothing of
    /// it is kept; what `get` was not told is a sound is stored as it came,
    /// as a photo where it opens as one and a sound where it decodes. The
    /// decoder's own notes on the damaged MP3 (libmpg123 prints them) do not
    /// reach the terminal.
    @Test func aSoundThatDoesNotDecodeIsRefusedAndTheRestAreStoredAsWhatTheyAre() async throws {
        try await withOrigin { origin, directory in
            let whole = try serveSound(.flac, named: "whole.flac", seconds: 2, seed: 51, origin: origin, directory: directory)
            let cut = whole.bytes.prefix(whole.bytes.count * 6 / 10)
            let cutSize = String(format: "%.1f KiB", Double(cut.count) / 1024)
            origin.addResource("/sounds/cut.flac", data: cut, contentType: "audio/flac")
            origin.addResource("/sounds/noise.mp3", data: fixtureBytes(count: 30_000, seed: 52), contentType: "audio/mpeg")
            // A WAV cut short by its server: libsndfile would play half of it.
            let long = try serveSound(.wav, named: "long.wav", seconds: 2, seed: 57, origin: origin, directory: directory)
            origin.addResource("/sounds/half.wav", data: long.bytes.prefix(200_044), contentType: "audio/wav")
            // The same where nobody said it was a sound: its header says it is one, cut short.
            origin.addResource("/files/half.bin", data: long.bytes.prefix(200_044))
            // An Ogg Vorbis file cut short: libsndfile decodes what is there without a word; its pages say it is cut.
            let vorbis = try serveSound(.ogg, named: "whole.ogg", seconds: 3, seed: 59, origin: origin, directory: directory)
            let cutOgg = vorbis.bytes.prefix(vorbis.bytes.count * 2 / 3)
            origin.addResource("/sounds/cut.ogg", data: cutOgg, contentType: "audio/ogg")
            // A FLAC libsndfile does not implement (32 bits a sample): no damage shown, stored as it came.
            origin.addResource("/sounds/true32.flac", data: Data(SampleSounds.flac32BitHeader), contentType: "audio/flac")
            // An MP3 cut short by its server: what is there plays, but its header (Xing) says how long it is.
            let song = try serveSound(.mp3, named: "song.mp3", seconds: 2, seed: 56, origin: origin, directory: directory)
            let short = song.bytes.prefix(song.bytes.count / 2)
            origin.addResource("/sounds/short.mp3", data: short, contentType: "audio/mpeg")
            // An MP3 broken mid-way (200,000 bytes of zeros), sent as a sound, and as a file nobody said was one.
            var broken = try serveSound(.mp3, named: "long.mp3", seconds: 20, seed: 58, origin: origin, directory: directory).bytes
            broken.replaceSubrange(300_000..<500_000, with: Data(count: 200_000))
            origin.addResource("/sounds/broken.mp3", data: broken)
            origin.addResource("/files/broken.bin", data: broken)
            let tone = try serveSound(.wav, named: "tone.wav", seconds: 1, seed: 53, origin: origin, directory: directory)
            origin.addResource("/files/tone.bin", data: tone.bytes)
            origin.addResource("/files/noise.bin", data: fixtureBytes(count: 30_000, seed: 54))
            // A WAV's first bytes, then no format chunk: libsndfile does not read it, and nobody said it was a sound.
            origin.addResource("/files/header.bin", data: Data("RIFF\u{0}\u{10}\u{0}\u{0}WAVEjunk".utf8) + fixtureBytes(count: 4_000, seed: 55))
            origin.addResource("/files/picture.bin", data: SamplePhotos.photo(3))
            let cache = directory.appending("cache")
            let paths = ["/sounds/cut.flac", "/sounds/noise.mp3", "/sounds/half.wav", "/sounds/short.mp3", "/sounds/broken.mp3",
                         "/sounds/whole.flac", "/files/tone.bin", "/files/noise.bin", "/files/header.bin", "/files/picture.bin",
                         "/files/broken.bin", "/files/half.bin", "/sounds/true32.flac", "/sounds/cut.ogg"]

            let result = try await BuiltProducts.run(["get", "--cache", cache, "--retries", "0"] + paths.map(origin.url))

            #expect(result.status == 1)
            // (Where libFLAC loses sync, about 1.1 s in, is its own: only the words around it are checked.)
            let cutLine = try #require(result.stderrLines.first { $0.contains("/sounds/cut.flac") }, "\(result.stderr)")
            #expect(cutLine.hasPrefix("mediafetch: failed \(origin.url("/sounds/cut.flac")): the server sent a damaged "
                + "sound (Error : flac decoder lost sync after "), "\(cutLine)")
            #expect(cutLine.hasSuffix(" s of audio; audio/flac, \(cutSize)) where a sound was asked for; not stored"), "\(cutLine)")
            #expect(result.stderrLines.contains("mediafetch: failed \(origin.url("/sounds/noise.mp3")): the server sent data that "
                + "libsndfile does not read as a sound (Format not recognised; audio/mpeg, 29.3 KiB) "
                + "where a sound was asked for; not stored"), "\(result.stderr)")
            #expect(result.stderrLines.contains("mediafetch: failed \(origin.url("/sounds/half.wav")): the server sent a sound "
                + "cut short (its header announces 352800 bytes of audio, 200000 are there; "
                + "audio/wav, 195.4 KiB) where a sound was asked for; not stored"), "\(result.stderr)")
            #expect(result.stderrLines.contains("mediafetch: failed \(origin.url("/sounds/short.mp3")): the server sent a sound "
                + "cut short (its header announces \(song.bytes.count) bytes of audio, \(short.count) are there; "
                + "audio/mpeg, \(String(format: "%.1f KiB", Double(short.count) / 1024))) where a sound was asked for; not stored"),
                    "\(result.stderr)")
            // libmpg123 gives up where the zeros begin, some 7 s in.
            let brokenLine = try #require(result.stderrLines.first { $0.contains("/sounds/broken.mp3") })
            #expect(brokenLine.hasPrefix("mediafetch: failed \(origin.url("/sounds/broken.mp3")): the server sent a damaged sound ("),
                    "\(brokenLine)")
            #expect(brokenLine.contains(" s of audio; ") && brokenLine.hasSuffix(") where a sound was asked for; not stored"), "\(brokenLine)")
            #expect(result.stderrLines.contains("mediafetch: failed \(origin.url("/files/half.bin")): the server sent a sound "
                + "cut short (its header announces 352800 bytes of audio, 200000 are there; "
                + "application/octet-stream, 195.4 KiB); not stored"), "\(result.stderr)")
            #expect(result.stderrLines.contains("mediafetch: failed \(origin.url("/sounds/cut.ogg")): the server sent a sound "
                + "cut short (it ends inside an Ogg page; audio/ogg, \(String(format: "%.1f KiB", Double(cutOgg.count) / 1024))) "
                + "where a sound was asked for; not stored"), "\(result.stderr)")
            #expect(result.stderrLines.count == 8, "\(result.stderr)")
            #expect(result.stderrLines.last?.hasPrefix("7 downloaded, 0 already cached, 7 failed") == true, "\(result.stderr)")
            var kinds: [String: String] = [:]
            for entry in try await listJSON(cache) {
                let url = try #require(entry["url"] as? String)
                kinds[String(url.dropFirst(origin.baseURL.count))] = entry["kind"] as? String
                if url.hasSuffix("/tone.bin") {
                    #expect(entry["format"] as? String == "wav")
                    #expect(entry["durationSeconds"] as? Double == 1.0)
                }
            }
            #expect(kinds == ["/sounds/whole.flac": "sound", "/files/tone.bin": "sound", "/files/noise.bin": "file",
                              "/files/header.bin": "file", "/files/picture.bin": "photo", "/files/broken.bin": "file",
                              "/sounds/true32.flac": "sound"])
            #expect(try objectPaths(inCache: cache).count == 7)
            #expect(partialDirectoryFiles(cache + "/tmp").isEmpty)
            let failed = try await BuiltProducts.run(["list", "--cache", cache, "--failed", "--format", "csv"])
            #expect(failed.stdout.split(separator: "\n").count == 8, "\(failed.stdout)")
        }
    }

    /// Whole sounds in libsndfile's own containers, laid out as it does not
    /// open them (BW64, two `data` chunks, `fmt ` last, a CAF from a pipe,
    /// FLAC in Ogg), are stored as sounds as they came, without facts; the
    /// same cut short are refused in one line each, and nothing of them is
    /// kept.
    @Test func wholeSoundsLibsndfileDoesNotOpenAreStoredAndCutOnesRefused() async throws {
        try await withOrigin { origin, directory in
            var whole: [String] = [], cut: [String] = [], served: [String: Data] = [:]
            for layout in UnopenedLayout.allCases {
                let name = "\(layout.rawValue).\(layout.fileExtension)"
                try layout.write(to: directory.appending(name), seconds: 1, seed: 63)
                let bytes = try Data(contentsOf: URL(fileURLWithPath: directory.appending(name)))
                origin.addResource("/sounds/\(name)", data: bytes)
                // An odd count of bytes off: not whole frames (a piped CAF cut between frames looks whole).
                origin.addResource("/sounds/cut-\(name)", data: bytes.prefix(bytes.count - (bytes.count / 3 | 1)))
                whole.append("/sounds/\(name)")
                served["/sounds/\(name)"] = bytes
                cut.append("/sounds/cut-\(name)")
            }
            let cache = directory.appending("cache")

            let result = try await BuiltProducts.run(["get", "--cache", cache, "--retries", "0"] + (whole + cut).map(origin.url))

            #expect(result.status == 1)
            for path in cut {
                let line = try #require(result.stderrLines.first { $0.contains(origin.url(path) + ":") }, "\(path): \(result.stderr)")
                // An Ogg file's pages say where it is cut, whatever its codec.
                let what = path.hasSuffix(".ogg") ? "a sound cut short (it ends inside an Ogg page; "
                    : "data that libsndfile does not read as a sound ("
                #expect(line.hasPrefix("mediafetch: failed \(origin.url(path)): the server sent \(what)"), "\(line)")
                #expect(line.hasSuffix(") where a sound was asked for; not stored"), "\(line)")
            }
            #expect(result.stderrLines.count == cut.count + 1, "\(result.stderr)")
            #expect(result.stderrLines.last?.hasPrefix("5 downloaded, 0 already cached, 5 failed") == true, "\(result.stderr)")
            let entries = try await listJSON(cache)
            #expect(Set(entries.compactMap { ($0["url"] as? String).map { String($0.dropFirst(origin.baseURL.count)) } }) == Set(whole))
            for entry in entries {
                #expect(entry["kind"] as? String == "sound", "\(entry)")
                #expect(entry["durationSeconds"] == nil, "\(entry)")
                let path = try #require(entry["path"] as? String)
                let url = try #require(entry["url"] as? String)
                #expect(FileManager.default.contents(atPath: path) == served[String(url.dropFirst(origin.baseURL.count))], "\(url)")
            }
            #expect(try objectPaths(inCache: cache).count == whole.count)
            #expect(partialDirectoryFiles(cache + "/tmp").isEmpty)
        }
    }

    /// A photo cut short where HTTP cannot tell (a connection closed early
    /// with no length given, a length short of the file) opens all the
    /// same, and its URL would never be fetched again: it is refused in one
    /// line, nothing of it kept, and the next run stores it whole. A photo
    /// with bytes after its end (a motion photo's video) is whole.
    @Test func aPhotoCutShortIsRefusedAndTheNextRunStoresItWhole() async throws {
        try await withOrigin { origin, directory in
            let photo = SamplePhotos.photo(21, of: .medium), other = SamplePhotos.photo(22)
            origin.addResource("/photos/dropped.jpg", data: photo, contentType: "image/jpeg")
            origin.setFault("/photos/dropped.jpg", .noLength(dropAfter: photo.count / 2), times: 1)
            origin.addResource("/photos/short.jpg", data: other, contentType: "image/jpeg")
            origin.setFault("/photos/short.jpg", .lengthText(String(other.count - 100)), times: 1)
            let motion = SamplePhotos.photo(23) + fixtureBytes(count: 20_000, seed: 24)
            origin.addResource("/photos/motion.jpg", data: motion, contentType: "image/jpeg")
            let cache = directory.appending("cache")
            let urls = ["/photos/dropped.jpg", "/photos/short.jpg", "/photos/motion.jpg"].map(origin.url)

            let first = try await BuiltProducts.run(["get", "--cache", cache] + urls)

            #expect(first.status == 1)
            #expect(first.stderrLines.contains("mediafetch: failed \(origin.url("/photos/dropped.jpg")): the server sent a photo cut "
                + "short (a JPEG without its end marker; image/jpeg, \(String(format: "%.1f KiB", Double(photo.count / 2) / 1024))); "
                + "not stored"), "\(first.stderr)")
            #expect(first.stderrLines.contains("mediafetch: failed \(origin.url("/photos/short.jpg")): the server sent a photo cut "
                + "short (a JPEG without its end marker; image/jpeg, \(String(format: "%.1f KiB", Double(other.count - 100) / 1024))); "
                + "not stored"), "\(first.stderr)")
            #expect(first.stderrLines.last?.hasPrefix("1 downloaded, 0 already cached, 2 failed") == true, "\(first.stderr)")
            #expect(try objectPaths(inCache: cache).count == 1)
            #expect(partialDirectoryFiles(cache + "/tmp").isEmpty)

            let second = try await BuiltProducts.run(["get", "--cache", cache] + urls)

            #expect(second.status == 0, "\(second.stderr)")
            #expect(second.stderrLines.last?.hasPrefix("2 downloaded, 1 already cached, 0 failed") == true, "\(second.stderr)")
            var stored: [String: Data] = [:]
            for entry in try await listJSON(cache) {
                let url = try #require(entry["url"] as? String), path = try #require(entry["path"] as? String)
                #expect(entry["kind"] as? String == "photo", "\(url)")
                stored[String(url.dropFirst(origin.baseURL.count))] = FileManager.default.contents(atPath: path)
            }
            #expect(stored == ["/photos/dropped.jpg": photo, "/photos/short.jpg": other, "/photos/motion.jpg": motion])
        }
    }

    /// A photo and a sound a server gzips unasked (an S3 object uploaded
    /// gzipped, with that label) land in the cache as the photo and the
    /// sound, which still open; a damaged one is refused in one line.
    @Test func photosAndSoundsGzippedUnaskedAreStoredDecoded() async throws {
        try await withOrigin { origin, directory in
            let photo = SamplePhotos.photo(31, of: .medium)
            let (sound, described) = try serveSound(.flac, named: "creek.flac", seconds: 2, seed: 32, origin: origin, directory: directory)
            var damaged = Compression.compress(photo, .gzip)
            damaged[damaged.count - 6] ^= 0xFF  // its CRC-32: every zlib finds that, at the end
            let answers: [String: (body: Data, type: String)] = [
                "/photos/peak.jpg": (Compression.compress(photo, .gzip), "image/jpeg"),
                "/sounds/creek-gz.flac": (Compression.compress(sound, .gzip), "audio/flac"),
                "/photos/damaged.jpg": (damaged, "image/jpeg"),
            ]
            for (path, answer) in answers {
                origin.route(path) { _ in
                    OriginResponse(headers: [("Content-Type", answer.type), ("Content-Encoding", "gzip")], body: answer.body)
                }
            }
            let cache = directory.appending("cache")

            let result = try await BuiltProducts.run(["get", "--cache", cache] + answers.keys.sorted().map(origin.url))

            #expect(result.status == 1)
            let damagedLine = try #require(result.stderrLines.first { $0.contains("/photos/damaged.jpg") }, "\(result.stderr)")
            #expect(damagedLine.hasPrefix("mediafetch: failed \(origin.url("/photos/damaged.jpg")): the server sent a damaged gzip-coded body (its gzip stream fails near byte "), "\(damagedLine)")
            #expect(damagedLine.contains(": incorrect data check; "), "\(damagedLine)")
            #expect(damagedLine.hasSuffix("; image/jpeg, \(String(format: "%.1f KiB", Double(damaged.count) / 1024)) as sent); not stored"), "\(damagedLine)")
            #expect(result.stderrLines.last?.hasPrefix("2 downloaded, 0 already cached, 1 failed") == true, "\(result.stderr)")
            var stored: [String: Data] = [:]
            for entry in try await listJSON(cache) {
                let url = try #require(entry["url"] as? String), path = try #require(entry["path"] as? String)
                stored[String(url.dropFirst(origin.baseURL.count))] = FileManager.default.contents(atPath: path)
                if url.hasSuffix(".jpg") {
                    #expect(entry["kind"] as? String == "photo")
                    #expect(JPEGStructure.dimensions(of: FileManager.default.contents(atPath: path) ?? Data()) == SamplePhotos.Picture.medium.dimensions)
                } else {
                    #expect(entry["kind"] as? String == "sound")
                    #expect(try SampleSounds.describe(path) == described)
                }
            }
            #expect(stored == ["/photos/peak.jpg": photo, "/sounds/creek-gz.flac": sound])
            #expect(partialDirectoryFiles(cache + "/tmp").isEmpty)
        }
    }

    /// A sound already cached that goes into another collection is a sound
    /// there too, with its facts: the kind is the URL's, not the run's.
    @Test func aCachedSoundGoesIntoAnotherCollectionAsASound() async throws {
        try await withOrigin { origin, directory in
            _ = try serveSound(.ogg, named: "bells.ogg", seconds: 2, seed: 61, origin: origin, directory: directory)
            let cache = directory.appending("cache")
            let url = origin.url("/sounds/bells.ogg")
            #expect(try await BuiltProducts.run(["get", "--cache", cache, "--collection", "first", url]).status == 0)

            let second = try await BuiltProducts.run(["get", "--cache", cache, "--collection", "second", url])

            #expect(second.status == 0, "\(second.stderr)")
            #expect(second.stderr.contains("0 downloaded, 1 already cached, 0 failed"), "\(second.stderr)")
            let entry = try #require(try await listJSON(cache, ["--collection", "second"]).first)
            #expect(entry["kind"] as? String == "sound")
            #expect(entry["format"] as? String == "ogg")
            #expect(entry["durationSeconds"] as? Double == 2.0)
            #expect(origin.requests(for: "/sounds/bells.ogg").count == 1)
        }
    }

    /// What follows a sound's check (storing it, starting the next download)
    /// runs with the process's descriptors, not the check thread's own: with
    /// one transfer at a time, a list that opens with sounds (one refused)
    /// and goes on with twenty files stores each file whole, and leaves no
    /// partial behind.
    @Test func theDownloadsAfterSoundChecksAreStoredWhole() async throws {
        try await withOrigin { origin, directory in
            _ = try serveSound(.flac, named: "a.flac", seconds: 1, seed: 71, origin: origin, directory: directory)
            _ = try serveSound(.mp3, named: "b.mp3", seconds: 1, seed: 72, origin: origin, directory: directory)
            origin.addResource("/sounds/bad.wav", data: fixtureBytes(count: 5_000, seed: 73), contentType: "audio/wav")
            let files = origin.addFixtures(count: 20, size: 50_000, firstSeed: 80, prefix: "/files/f")
            let cache = directory.appending("cache")
            let urls = ["/sounds/a.flac", "/sounds/bad.wav", "/sounds/b.mp3"].map(origin.url) + files

            let result = try await BuiltProducts.run(["get", "--cache", cache, "--jobs", "1", "--retries", "0"] + urls)

            #expect(result.status == 1)
            #expect(result.stderrLines.last?.hasPrefix("22 downloaded, 0 already cached, 1 failed") == true, "\(result.stderr)")
            let entries = try await listJSON(cache)
            #expect(entries.count == 22)
            for (index, url) in files.enumerated() {
                let entry = try #require(entries.first { $0["url"] as? String == url })
                let path = try #require(entry["path"] as? String)
                #expect(FileManager.default.contents(atPath: path) == fixtureBytes(count: 50_000, seed: 80 + UInt64(index)), "\(url)")
            }
            #expect(try objectPaths(inCache: cache).count == 22)
            #expect(partialDirectoryFiles(cache + "/tmp").isEmpty)
        }
    }
}
