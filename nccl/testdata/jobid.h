/* jobid.h: how the test programs that run as a job of processes hand the
 * unique id from rank 0 to the other ranks: through a file, written to a
 * temporary name and renamed into place (put_id), and read by the others
 * once it is there (get_id, which waits up to 30 s). Define JOB_PROG, the
 * program's name for its messages, before including it. */
#ifndef MSCCLGO_TESTDATA_JOBID_H
#define MSCCLGO_TESTDATA_JOBID_H

#include <stdio.h>
#include <unistd.h>

#include "nccl.h"

#ifndef JOB_PROG
#error "define JOB_PROG, the program's name, before including jobid.h"
#endif

/* put_id publishes id in file: whole or not at all. */
static int put_id(const char *file, const ncclUniqueId *id) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", file);
  FILE *f = fopen(tmp, "wb");
  if (f == NULL || fwrite(id, sizeof *id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, file) != 0) {
    perror(JOB_PROG ": writing the unique id");
    return 2;
  }
  return 0;
}

/* get_id waits up to 30 s for file and reads the id in it. */
static int get_id(const char *file, int rank, ncclUniqueId *id) {
  for (int waited = 0;; waited++) {
    FILE *f = fopen(file, "rb");
    if (f != NULL) {
      size_t got = fread(id, sizeof *id, 1, f);
      fclose(f);
      if (got == 1) {
        return 0;
      }
    }
    if (waited >= 3000) {
      fprintf(stderr, JOB_PROG ": rank %d: no unique id in %s after 30 s\n", rank, file);
      return 2;
    }
    usleep(10000);
  }
}

#endif
