/* version.h - the version of nvmefs, in one object.
 *
 * Purpose: the version string every program prints and reports
 * (nvmefsd --version, nvmefsctl --version, the status reply, the metrics'
 * nvmefs_build_info, the software controller's firmware revision).  The
 * Makefile takes it from debian/changelog's newest entry and compiles it into
 * one generated object ($(B)/gen/version.c), rewritten only when it changes,
 * so that a build of another version recompiles that file alone and relinks.
 * The Makefile includes this header in every compilation (-include), so
 * NVMEFS_VERSION needs no #include where it is used.
 * Threading: a constant.  Ownership: static storage.  Errors: none.
 * Prefix: nvmefs_version, NVMEFS_VERSION.
 */
#ifndef NVMEFS_VERSION_H
#define NVMEFS_VERSION_H

extern const char nvmefs_version[];

/* an expression, not a literal: it does not concatenate with other literals */
#define NVMEFS_VERSION nvmefs_version

#endif
