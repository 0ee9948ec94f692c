// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "mediafetch",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "mediafetch", targets: ["mediafetch"]),
        .executable(name: "mediafetch-origin", targets: ["mediafetch-origin"]),
        .library(name: "MediaFetch", targets: ["MediaFetch"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
    ],
    targets: [
        // C libraries, one system-library target each.
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]),
        // libsndfile's header only: `MediaCheck` loads the library when it
        // first decodes a sound (a run without sounds does not load it and
        // the seven codec libraries it brings: 1–1.5 ms of every start), and
        // `SampleMedia` links it.
        .systemLibrary(
            name: "CSndFile",
            providers: [.apt(["libsndfile1-dev"])]),

        // zlib, to undo a gzip or deflate `Content-Encoding` sent unasked
        // (libcurl links it already, so it costs no load of its own).
        .systemLibrary(
            name: "CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]),

        // syncfs(2), renameat2(2) and sync_file_range(2), which Swift's Glibc module does not export.
        .target(name: "CFileSync"),
        // What the executable does as it is loaded (standard descriptors) and
        // for the threads others make (their stack size): the process's, not a library's.
        .target(name: "CProcessStart"),
        // sqlite3_db_config, which is variadic (Swift does not call those); the system libsqlite3.
        .target(name: "CSQLiteTuning", linkerSettings: [.linkedLibrary("sqlite3")]),

        // The transfer engine: libcurl multi on one thread, scheduler, retry, resume.
        .target(name: "URLText"),
        .target(
            name: "Transfer",
            dependencies: ["CCurl", "CZlib", "CFileSync", "URLText", .product(name: "Crypto", package: "swift-crypto")]),
        // Content-addressed objects and the SQLite catalog. Knows nothing of the network.
        .target(
            name: "ContentStore",
            dependencies: [
                "CFileSync",
                "CSQLiteTuning",
                "URLText",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]),
        // What a body is: sounds decoded through libsndfile, images by their signatures.
        .target(name: "MediaCheck", dependencies: ["CSndFile", "CFileSync"]),
        // What users call: jobs that compose the engine and the store.
        .target(
            name: "MediaFetch",
            dependencies: ["Transfer", "ContentStore", "MediaCheck", "URLText", "CFileSync"]),
        // The thin executable: argument parsing and terminal output only.
        .executableTarget(
            name: "mediafetch",
            dependencies: [
                "MediaFetch",
                "CProcessStart",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]),

        // A real HTTP origin on loopback with fault switches, for tests and the demo.
        .target(name: "TestOrigin", dependencies: ["URLText"]),
        // Real media for tests and the demo: JPEG photos, and sounds written through libsndfile.
        .target(name: "SampleMedia", dependencies: ["CSndFile", "MediaCheck"], linkerSettings: [.linkedLibrary("sndfile")]),
        .executableTarget(name: "mediafetch-origin", dependencies: ["TestOrigin", "SampleMedia"]),
        // The test process ignores SIGPIPE from its start (a constructor), as `get` does.
        .target(name: "CTestProcess"),
        // Helpers shared by the test targets: temporary directories, fixtures, running the binary.
        .target(name: "TestSupport", dependencies: ["TestOrigin", "CFileSync", "CTestProcess", "CZlib"]),

        .testTarget(name: "TransferTests", dependencies: ["Transfer", "TestOrigin", "TestSupport", "URLText", "CFileSync"]),
        .testTarget(name: "ContentStoreTests", dependencies: [
            "ContentStore", "TestSupport", "CFileSync",
            .product(name: "GRDB", package: "GRDB.swift"),
        ]),
        .testTarget(name: "MediaFetchTests", dependencies: [
            "MediaFetch", "MediaCheck", "SampleMedia", "TestOrigin", "TestSupport", "URLText",
            // A second catalog writer that holds the lock, as another process would.
            .product(name: "GRDB", package: "GRDB.swift"),
        ]),
        .testTarget(name: "SampleMediaTests", dependencies: ["SampleMedia", "MediaCheck", "TestSupport"]),
        .testTarget(name: "MediaCheckTests", dependencies: ["MediaCheck", "SampleMedia", "TestSupport"]),
        // The executable's own logic (argument layout, the status line), through `@testable import`.
        .testTarget(name: "CommandLineTests", dependencies: ["mediafetch", "MediaFetch"]),
        .testTarget(name: "EndToEndTests", dependencies: [
            "TestOrigin", "TestSupport", "SampleMedia", "mediafetch",
            // Catalogs made damaged, foreign or newer, as a person or another version would leave them.
            .product(name: "GRDB", package: "GRDB.swift"),
        ]),
    ]
)
