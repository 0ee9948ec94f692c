import CCurl
import Foundation

/// An error reported by libcurl, with the text of `CURLOPT_ERRORBUFFER` when there is one.
public struct CurlError: Error, Sendable, CustomStringConvertible {
    /// The `CURLcode` value.
    public let code: Int
    /// What libcurl said: the error buffer when set, else `curl_easy_strerror`.
    public let message: String

    init(_ code: CURLcode, detail: String? = nil) {
        self.code = Int(code.rawValue)
        if let detail, !detail.isEmpty {
            self.message = detail
        } else {
            self.message = String(cString: curl_easy_strerror(code))
        }
    }

    public var description: String { message }
}

/// Process-wide libcurl set-up. `curl_global_init` is not thread-safe before
/// 7.84, so it runs exactly once, before the first handle is made.
enum CurlGlobal {
    static let initialized: Bool = {
        curl_global_init(Int(CURL_GLOBAL_ALL)) == CURLE_OK
    }()
}

/// Owns one `CURL*` easy handle. Used only on the engine's loop thread, so it
/// needs no locking; `deinit` frees the handle with `curl_easy_cleanup`.
final class CurlEasy {
    /// The raw handle; `CURL` is `void` in curl.h, so this is a raw pointer.
    let handle: UnsafeMutableRawPointer
    /// `CURLOPT_ERRORBUFFER` storage: libcurl writes up to CURL_ERROR_SIZE bytes here
    /// and keeps the pointer until the option is reset, so it lives as long as the handle.
    let errorBuffer: UnsafeMutablePointer<CChar>

    init() throws {
        guard CurlGlobal.initialized, let handle = curl_easy_init() else {
            throw CurlError(CURLE_FAILED_INIT)
        }
        self.handle = handle
        self.errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
    }

    deinit {
        curl_easy_cleanup(handle)
        errorBuffer.deallocate()
    }

    /// Whether the options every transfer shares are set (see `CurlLoop.configure`).
    var hasSharedOptions = false

    /// Makes the handle ready for the next transfer: the options that belong
    /// to one transfer (its URL, callbacks' context, range and extra headers)
    /// are cleared; the options every transfer shares stay, so they are not
    /// set again for each of thousands of small files. The connection and DNS
    /// caches stay with the multi handle.
    func prepareForReuse() {
        // Clearing an option cannot fail.
        _ = mf_easy_setopt_pointer(handle, CURLOPT_WRITEDATA, nil)
        _ = mf_easy_setopt_pointer(handle, CURLOPT_HEADERDATA, nil)
        _ = mf_easy_setopt_string(handle, CURLOPT_RANGE, nil)
        _ = mf_easy_setopt_slist(handle, CURLOPT_HTTPHEADER, nil)
        errorBuffer[0] = 0
    }

    var errorText: String { String(cString: errorBuffer) }

    func set(_ option: CURLoption, _ value: Int) throws {
        try check(mf_easy_setopt_long(handle, option, value))
    }

    func set(_ option: CURLoption, large value: Int64) throws {
        try check(mf_easy_setopt_off(handle, option, curl_off_t(value)))
    }

    func set(_ option: CURLoption, _ value: String) throws {
        try check(value.withCString { mf_easy_setopt_string(handle, option, $0) })
    }

    func set(_ option: CURLoption, pointer: UnsafeMutableRawPointer?) throws {
        try check(mf_easy_setopt_pointer(handle, option, pointer))
    }

    func set(_ option: CURLoption, list: UnsafeMutablePointer<curl_slist>?) throws {
        try check(mf_easy_setopt_slist(handle, option, list))
    }

    func set(_ option: CURLoption, callback: curl_write_callback) throws {
        try check(mf_easy_setopt_write_callback(handle, option, callback))
    }

    /// Sets CURLOPT_PREREQFUNCTION; false where libcurl has no such option (before 7.80).
    func setConnectionReady(_ callback: mf_prereq_callback) -> Bool {
        mf_easy_setopt_prereq_callback(handle, callback) == CURLE_OK
    }

    /// Sets CURLOPT_QUICK_EXIT; nothing where libcurl has no such option
    /// (before 7.87: a stop then waits for name lookups under way).
    func setQuickExit() {
        _ = mf_easy_setopt_quick_exit(handle)
    }

    /// Sets CURLOPT_PREREQDATA, what that callback gets as its context.
    func setConnectionReadyData(_ pointer: UnsafeMutableRawPointer?) {
        _ = mf_easy_setopt_prereq_data(handle, pointer)
    }

    func long(_ info: CURLINFO) -> Int {
        var value = 0
        return mf_easy_getinfo_long(handle, info, &value) == CURLE_OK ? value : 0
    }

    func string(_ info: CURLINFO) -> String? {
        var value: UnsafeMutablePointer<CChar>?
        guard mf_easy_getinfo_string(handle, info, &value) == CURLE_OK, let value else { return nil }
        return String(cString: value)
    }

    private func check(_ code: CURLcode) throws {
        if code != CURLE_OK { throw CurlError(code) }
    }
}

/// Owns one `CURLM*` multi handle; `deinit` frees it with `curl_multi_cleanup`.
/// All calls except `wakeup()` happen on the engine's loop thread;
/// `curl_multi_wakeup` is documented as safe from any thread.
final class CurlMulti: @unchecked Sendable {
    // @unchecked: the handle is only touched from the loop thread, except
    // `wakeup()`, which libcurl allows from any thread.
    let handle: UnsafeMutableRawPointer

    init() throws {
        guard CurlGlobal.initialized, let handle = curl_multi_init() else {
            throw CurlError(CURLE_FAILED_INIT)
        }
        self.handle = handle
    }

    deinit {
        curl_multi_cleanup(handle)
    }

    func set(_ option: CURLMoption, _ value: Int) {
        _ = mf_multi_setopt_long(handle, option, value)
    }

    /// Interrupts a `curl_multi_poll` in progress on the loop thread.
    func wakeup() {
        _ = curl_multi_wakeup(handle)
    }
}
