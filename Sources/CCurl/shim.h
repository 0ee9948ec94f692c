#ifndef MEDIAFETCH_CCURL_SHIM_H
#define MEDIAFETCH_CCURL_SHIM_H

#include <curl/curl.h>

// curl_easy_setopt, curl_multi_setopt and curl_easy_getinfo are variadic, and
// Swift does not import variadic C functions. These typed wrappers fix the
// argument kind per call so the compiler checks what libcurl reads: a `long`
// for integer options, `curl_off_t` for *_LARGE options, a NUL-terminated
// string (copied by libcurl since 7.17), a pointer, or a callback.

/// curl_easy_setopt for options documented as taking a `long`.
static inline CURLcode mf_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

/// curl_easy_setopt for options documented as taking a `curl_off_t` (the *_LARGE ones).
static inline CURLcode mf_easy_setopt_off(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

/// curl_easy_setopt for string options; libcurl copies the string.
static inline CURLcode mf_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

/// curl_easy_setopt for options that take a pointer libcurl keeps but does not own
/// (CURLOPT_WRITEDATA, CURLOPT_HEADERDATA, CURLOPT_PRIVATE, CURLOPT_ERRORBUFFER, CURLOPT_XFERINFODATA).
static inline CURLcode mf_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

/// curl_easy_setopt for CURLOPT_HTTPHEADER; the list must outlive the transfer.
static inline CURLcode mf_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

/// curl_easy_setopt for CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION.
static inline CURLcode mf_easy_setopt_write_callback(CURL *handle, CURLoption option, curl_write_callback value) {
    return curl_easy_setopt(handle, option, value);
}

/// curl_easy_setopt for CURLOPT_XFERINFOFUNCTION.
static inline CURLcode mf_easy_setopt_xferinfo_callback(CURL *handle, curl_xferinfo_callback value) {
    return curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, value);
}

/// The CURLOPT_PREREQFUNCTION callback (libcurl 7.80+): called once the
/// transfer's connection is set up (TLS and protocol agreed), just before the
/// request goes out. Return 0 (CURL_PREREQFUNC_OK) to go on.
typedef int (*mf_prereq_callback)(void *clientp, char *primary_ip, char *local_ip, int primary_port, int local_port);

/// curl_easy_setopt for CURLOPT_PREREQFUNCTION; CURLE_UNKNOWN_OPTION from a
/// libcurl built before 7.80, which has no such option.
static inline CURLcode mf_easy_setopt_prereq_callback(CURL *handle, mf_prereq_callback value) {
#if LIBCURL_VERSION_NUM >= 0x075000
    return curl_easy_setopt(handle, CURLOPT_PREREQFUNCTION, value);
#else
    (void)handle;
    (void)value;
    return CURLE_UNKNOWN_OPTION;
#endif
}

/// curl_easy_setopt for CURLOPT_PREREQDATA, the callback's `clientp`.
static inline CURLcode mf_easy_setopt_prereq_data(CURL *handle, void *value) {
#if LIBCURL_VERSION_NUM >= 0x075000
    return curl_easy_setopt(handle, CURLOPT_PREREQDATA, value);
#else
    (void)handle;
    (void)value;
    return CURLE_UNKNOWN_OPTION;
#endif
}

/// curl_easy_setopt for CURLOPT_QUICK_EXIT (libcurl 7.87+): removing a handle
/// whose name lookup runs does not wait for the resolver's thread, which is
/// left to end on its own. CURLE_UNKNOWN_OPTION from an older libcurl.
static inline CURLcode mf_easy_setopt_quick_exit(CURL *handle) {
#if LIBCURL_VERSION_NUM >= 0x075700
    return curl_easy_setopt(handle, CURLOPT_QUICK_EXIT, 1L);
#else
    (void)handle;
    return CURLE_UNKNOWN_OPTION;
#endif
}

/// What a write callback returns to pause its transfer (CURL_WRITEFUNC_PAUSE,
/// a macro Swift does not import as a `size_t`): libcurl keeps the bytes it
/// offered and offers them again once the transfer is unpaused.
static const size_t mf_writefunc_pause = CURL_WRITEFUNC_PAUSE;

/// curl_easy_pause(handle, CURLPAUSE_CONT): unpauses a transfer paused by
/// its write callback. The bytes libcurl kept are offered to the callback
/// before this returns; an error from that is returned here (and then the
/// transfer is not ended by libcurl: the caller ends it).
static inline CURLcode mf_easy_unpause(CURL *handle) {
    return curl_easy_pause(handle, CURLPAUSE_CONT);
}

/// curl_easy_getinfo for CURLINFO_*_LONG values.
static inline CURLcode mf_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

/// curl_easy_getinfo for CURLINFO_*_OFF_T values.
static inline CURLcode mf_easy_getinfo_off(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

/// curl_easy_getinfo for CURLINFO_STRING values; the string is owned by the handle.
static inline CURLcode mf_easy_getinfo_string(CURL *handle, CURLINFO info, char **value) {
    return curl_easy_getinfo(handle, info, value);
}

/// curl_multi_setopt for options documented as taking a `long`.
static inline CURLMcode mf_multi_setopt_long(CURLM *handle, CURLMoption option, long value) {
    return curl_multi_setopt(handle, option, value);
}

/// The result code of a finished transfer; `data` is a union in C.
static inline CURLcode mf_msg_result(const CURLMsg *message) {
    return message->data.result;
}

#endif
