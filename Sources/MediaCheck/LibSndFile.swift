import CSndFile
#if canImport(Glibc)
import Glibc
#endif

/// The libsndfile functions `MediaCheck` calls, found with dlopen(3) and
/// dlsym(3) the first time a sound is looked at. Loaded on demand, not
/// linked: libsndfile brings seven codec libraries (FLAC, Vorbis, Opus, Ogg,
/// mpg123, LAME), and loading them took 1–1.5 ms of every start, a run
/// without a sound and `list` included.
struct LibSndFile: @unchecked Sendable {
    // @unchecked: C function pointers, set once and never changed.
    /// `SNDFILE *sf_open(const char *path, int mode, SF_INFO *info)`: nil on failure.
    let open: @convention(c) (UnsafePointer<CChar>?, Int32, UnsafeMutablePointer<SF_INFO>?) -> OpaquePointer?
    /// `SNDFILE *sf_open_virtual(SF_VIRTUAL_IO *, int mode, SF_INFO *, void *user_data)`: nil on failure.
    let openVirtual: @convention(c) (UnsafeMutablePointer<SF_VIRTUAL_IO>?, Int32, UnsafeMutablePointer<SF_INFO>?,
                                     UnsafeMutableRawPointer?) -> OpaquePointer?
    /// `int sf_close(SNDFILE *)`.
    let close: @convention(c) (OpaquePointer?) -> Int32
    /// `sf_count_t sf_readf_float(SNDFILE *, float *frames, sf_count_t count)`:
    /// frames read, 0 at the end or on an error.
    let readFrames: @convention(c) (OpaquePointer?, UnsafeMutablePointer<Float>?, sf_count_t) -> sf_count_t
    /// `int sf_error(SNDFILE *)`: the file's last error, `SF_ERR_NO_ERROR` if none.
    let error: @convention(c) (OpaquePointer?) -> Int32
    /// `const char *sf_strerror(SNDFILE *)`: its words (of the last failed open for nil).
    let errorText: @convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?
    /// `int sf_command(SNDFILE *, int command, void *data, int size)`.
    let command: @convention(c) (OpaquePointer?, Int32, UnsafeMutableRawPointer?, Int32) -> Int32

    /// The library as loaded once, or why it could not be.
    private static let loaded: Result<LibSndFile, SoundFileError> = load()

    /// The library, or why there is none.
    static func get() throws(SoundFileError) -> LibSndFile { try loaded.get() }

    private static func load() -> Result<LibSndFile, SoundFileError> {
        // The name of the library's ABI (its soname), as the dynamic linker would have looked it up.
        guard let handle = dlopen("libsndfile.so.1", RTLD_NOW | RTLD_LOCAL) else {
            let reason = dlerror().map { String(cString: $0) } ?? "not found"
            return .failure(SoundFileError(description: "libsndfile cannot be loaded (\(reason)): install libsndfile1", unavailable: true))
        }
        func symbol<Function>(_ name: String, as type: Function.Type) -> Function? {
            dlsym(handle, name).map { unsafeBitCast($0, to: type) }
        }
        guard let open = symbol("sf_open", as: (@convention(c) (UnsafePointer<CChar>?, Int32, UnsafeMutablePointer<SF_INFO>?) -> OpaquePointer?).self),
              let openVirtual = symbol("sf_open_virtual", as: (@convention(c) (UnsafeMutablePointer<SF_VIRTUAL_IO>?, Int32,
                                                                              UnsafeMutablePointer<SF_INFO>?,
                                                                              UnsafeMutableRawPointer?) -> OpaquePointer?).self),
              let close = symbol("sf_close", as: (@convention(c) (OpaquePointer?) -> Int32).self),
              let readFrames = symbol("sf_readf_float",
                                      as: (@convention(c) (OpaquePointer?, UnsafeMutablePointer<Float>?, sf_count_t) -> sf_count_t).self),
              let error = symbol("sf_error", as: (@convention(c) (OpaquePointer?) -> Int32).self),
              let errorText = symbol("sf_strerror", as: (@convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?).self),
              let command = symbol("sf_command", as: (@convention(c) (OpaquePointer?, Int32, UnsafeMutableRawPointer?, Int32) -> Int32).self)
        else {
            return .failure(SoundFileError(description: "libsndfile.so.1 lacks the functions mediafetch calls", unavailable: true))
        }
        return .success(LibSndFile(open: open, openVirtual: openVirtual, close: close, readFrames: readFrames, error: error, errorText: errorText, command: command))
    }
}
