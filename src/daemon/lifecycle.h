#ifndef NVMEFS_LIFECYCLE_H
#define NVMEFS_LIFECYCLE_H
struct daemon;
void lc_status_update(struct daemon *d);
#endif
