#ifndef MEDIAFETCH_CSNDFILE_SHIM_H
#define MEDIAFETCH_CSNDFILE_SHIM_H
// libsndfile's API is not variadic, so the header is imported as it is.
// Not linked here (see Package.swift): MediaCheck finds the functions with
// dlopen(3), SampleMedia links the library.
#include <sndfile.h>
#endif
