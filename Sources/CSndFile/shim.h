#ifndef MEDIAFETCH_CSNDFILE_SHIM_H
#define MEDIAFETCH_CSNDFILE_SHIM_H
// libsndfile's API is not variadic, so the header is imported as it is.
#include <sndfile.h>
#endif
