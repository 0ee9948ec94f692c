#ifndef MEDIAFETCH_CZLIB_SHIM_H
#define MEDIAFETCH_CZLIB_SHIM_H
// zlib, to undo the gzip and deflate codings a server applies unasked.
// libcurl links the same library, so it costs the process no load of its own.
#include <zlib.h>

/// inflateInit2 is a macro (it passes zlib's version and the stream's size),
/// which Swift cannot call: this is it as a function.
static inline int mf_inflate_init2(z_streamp stream, int windowBits) {
    return inflateInit2(stream, windowBits);
}

/// deflateInit2, the same way (the tests compress what the origin sends).
static inline int mf_deflate_init2(z_streamp stream, int level, int windowBits) {
    return deflateInit2(stream, level, Z_DEFLATED, windowBits, 8, Z_DEFAULT_STRATEGY);
}
#endif
