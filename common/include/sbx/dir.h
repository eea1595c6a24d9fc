/* Reading a folder's entries for a walk that removes them (the agent's
 * fs.remove and the supervisor's tree removal): the entries other than "."
 * and "..", each with whether it is a folder, without following a symlink.
 * It opens, removes and keeps nothing: what a walk may descend into is the
 * walk's to check. */
#ifndef SBX_DIR_H
#define SBX_DIR_H

#include <dirent.h>
#include <stdbool.h>

/* The next entry of d: 1 with *de and *is_dir (an entry gone meanwhile is
 * no folder), 0 at the end, or a negative errno: readdir's with *de NULL,
 * or fstatat's (an entry of unknown type) with *de the entry. */
int sbx_dir_next(DIR *d, struct dirent **de, bool *is_dir);

#endif
