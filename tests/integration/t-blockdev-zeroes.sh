#!/bin/sh
# t-blockdev-zeroes.sh - punch hole and zero range are Write Zeroes at the
# device, as Linux does them on a block device: split at the controller's
# Write Zeroes size limit (WZSL), DEAC on a punch only where deallocated
# blocks read as zeroes, zeroes written where Write Zeroes is missing, never
# Dataset Management; the ranges read back as zeroes
# (tests/helpers/fuse-zeroes.c, the stack in one process, three controllers).
. "$(dirname "$0")/lib.sh"
lib_init
helper_run fuse-zeroes 120
finish
