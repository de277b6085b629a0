/* safepath.h - open the paths the daemon (root) creates or writes without
 * letting another user redirect them.
 *
 * A path is walked one component at a time from /, each opened relative to
 * the one before with O_NOFOLLOW, so no symbolic link is followed anywhere
 * in it.  Every directory on the way must be owned by root (or by the
 * effective user, for a daemon run as someone else) and must not be
 * writable by group or others, unless it has the sticky bit (like /tmp:
 * others cannot rename or remove root's entries there).  The directory that
 * holds the final name must not be writable by group or others at all,
 * sticky or not: in a shared directory another user could take the name
 * before the daemon does.  The path must be absolute, with no "." or ".."
 * components.
 *
 * On a refusal the functions return a negative errno and write into msg
 * (len bytes) what was wrong, naming the component and the rule, for the
 * caller to log beside the path it was asked for.
 */
#ifndef NVMEFS_SAFEPATH_H
#define NVMEFS_SAFEPATH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The directory holding path's last component, opened O_PATH|O_DIRECTORY
 * (O_RDONLY|O_DIRECTORY when the walk made it; either way an fd for openat,
 * mkdirat, fstatat), after the walk above.  With create, missing
 * directories are made (safepath_mkdir: mode 0755 whatever the umask, set
 * through the fd) and then checked like the rest.
 * *name points to the last component inside path (never empty: a trailing
 * slash is refused).  Returns the fd or a negative errno. */
int safepath_open_parent(const char *path, bool create, const char **name, char *msg,
			 size_t len);

/* Make directory name in dfd (a directory the walk above trusts) and
 * return it opened O_RDONLY|O_DIRECTORY, with mode 0755 whatever the
 * umask.  A name that exists already (EEXIST: made meanwhile by someone
 * else) is taken only if it is a directory owned by root (or the
 * effective user), and keeps its mode for the caller to check.  Nothing is
 * changed by name and no link is followed: a symbolic link planted between
 * a caller's look-up and the mkdirat is refused (-ELOOP) and its target
 * left alone.  shown: the path as msg names it.  Returns the fd or a
 * negative errno. */
int safepath_mkdir(int dfd, const char *name, const char *shown, char *msg, size_t len);

/* path opened O_RDWR|O_CLOEXEC as a regular file after the walk: an
 * existing one must be a regular file owned by root (or the effective
 * user); a missing one is created with O_EXCL and the given mode (its
 * directory must exist).  *created says which.  Returns the fd or a
 * negative errno. */
int safepath_open_file(const char *path, mode_t mode, bool *created, char *msg, size_t len);

/* What safepath_open_file would say of path, opening and creating
 * nothing: 0 when the walk passes and the file is missing (it would be
 * created) or is a regular file owned by root (or the effective user);
 * else a negative errno and msg (-ENOENT: a directory on the way does not
 * exist; -EACCES: the caller may not search one, so nothing was judged). */
int safepath_check_file(const char *path, char *msg, size_t len);

#endif
