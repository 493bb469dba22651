/*
 * shapes.c: every call shape of the library on host memory, checked
 * against closed forms (shapes_test.go drives it).
 *
 *   shapes MODE N DTYPES OPS COUNTS
 *
 * MODE: group (ncclCommInitAll, every call of the N ranks in one group,
 * one thread), threads (ncclCommInitAll, one thread per rank), procs (one
 * rank per process: RANK, WORLD_SIZE, SHAPES_ID_FILE), custom (mscclgo.h,
 * one thread per rank, mscclgoExecuteHostOp), customprocs (mscclgo.h, one
 * rank per process); SHAPES_GROUP=1 puts each call of the threads and
 * procs modes in a group of its own; SHAPES_PARTS=1 makes the custom
 * modes' allgathers through mscclgoExecuteHostGather, into a buffer per
 * rank. DTYPES: comma-separated of i8 u8 i32 u32 i64 u64 f16
 * f32 f64 bf16; OPS: of sum prod max min avg premul (premul: the custom
 * modes only); COUNTS: comma-separated element counts. Each case prints
 * nothing when right, a line with WRONG or the failing call otherwise;
 * every rank ends with "rank R: K cases, W wrong".
 */
#define _GNU_SOURCE
#include "mscclgo.h"
#include "nccl.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define JOB_PROG "shapes"
#include "jobid.h"

enum { SUM, PROD, MAX, MIN, AVG, PREMUL, NOPS };
static const char *op_names[NOPS] = {"sum", "prod", "max", "min", "avg", "premul"};
static const char *dt_names[10] = {"i8", "u8", "i32", "u32", "i64", "u64", "f16", "f32", "f64", "bf16"};

static int mode_custom, mode_group;
static int ndt, dts[10], nops, ops[NOPS], ncounts;
static size_t counts[64];
static const char *plans_dir;

static size_t dt_size(int d) {
  switch (d) {
  case 0:
  case 1:
    return 1;
  case 6:
  case 9:
    return 2;
  case 2:
  case 3:
  case 7:
    return 4;
  }
  return 8;
}
static int is_float(int d) { return d >= 6; }
static int is_signed(int d) { return d == 0 || d == 2 || d == 4 || is_float(d); }

/* float to half and bfloat16, rounded to nearest even; and back. */
static uint16_t f2h(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t e = (int32_t)((x >> 23) & 0xff) - 127 + 15;
  uint32_t m = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0xff) {
    return (uint16_t)(sign | 0x7c00 | (m ? 0x200 : 0));
  }
  if (e >= 31) {
    return (uint16_t)(sign | 0x7c00);
  }
  if (e <= 0) {
    if (e < -10) {
      return (uint16_t)sign;
    }
    m |= 0x800000;
    int shift = 14 - e;
    uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) {
      h++;
    }
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)e << 10) | (m >> 13), rem = m & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) {
    h++;
  }
  return (uint16_t)(sign | h);
}
static float h2f(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
  if (e == 0) {
    float f = ldexpf((float)m, -24);
    return sign ? -f : f;
  }
  if (e == 31) {
    x = sign | 0x7f800000 | (m << 13);
  } else {
    x = sign | ((e - 15 + 127) << 23) | (m << 13);
  }
  float f;
  memcpy(&f, &x, 4);
  return f;
}
static uint16_t f2bf(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) {
    return 0x7fc0;
  }
  uint32_t rem = x & 0xffff, b = x >> 16;
  if (rem > 0x8000 || (rem == 0x8000 && (b & 1))) {
    b++;
  }
  return (uint16_t)b;
}
static float bf2f(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* Values travel as doubles (floats) or int64 (integers, wrapped at the
 * store). round_to rounds v to type d. */
static double round_to(int d, double v) {
  switch (d) {
  case 6:
    return h2f(f2h((float)v));
  case 9:
    return bf2f(f2bf((float)v));
  case 7:
    return (float)v;
  }
  return v;
}
static void store(int d, void *p, size_t i, double fv, int64_t iv) {
  switch (d) {
  case 0:
  case 1:
    ((uint8_t *)p)[i] = (uint8_t)iv;
    break;
  case 2:
  case 3:
    ((uint32_t *)p)[i] = (uint32_t)iv;
    break;
  case 4:
  case 5:
    ((uint64_t *)p)[i] = (uint64_t)iv;
    break;
  case 6:
    ((uint16_t *)p)[i] = f2h((float)fv);
    break;
  case 9:
    ((uint16_t *)p)[i] = f2bf((float)fv);
    break;
  case 7:
    ((float *)p)[i] = (float)fv;
    break;
  case 8:
    ((double *)p)[i] = fv;
    break;
  }
}

/* The input of rank r, element i, for op (allgather: op -1). */
static int64_t in_int(int d, int op, int r, size_t i) {
  int64_t k = (int64_t)(i % 7), off = is_signed(d) ? 4 : 0;
  switch (op) {
  case -1:
    return (int64_t)((r * 7 + i) % 61) - (is_signed(d) ? 30 : 0);
  case PROD:
    return 1 + (int64_t)((r + i) % 2);
  case MAX:
  case MIN:
    return (int64_t)((r * 5 + i * 3) % 11) - (is_signed(d) ? 5 : 0);
  }
  return (r + 1) + k - off;
}
static int neg_zero(int d, int op, size_t i) { return is_float(d) && op != PROD && op != -1 && i % 13 == 12; }
static double in_val(int d, int op, int r, size_t i) { return neg_zero(d, op, i) ? -0.0 : (double)in_int(d, op, r, i); }

/* The PREMUL_SUM scalar of rank r. */
static double premul_f(int r) { return r % 2 ? 2.0 : 0.5; }
static int64_t premul_i(int r) { return r + 2; }

/* expected stores the closed form of element i of op's result on n
 * ranks, reduced in rank order in the type's arithmetic. */
static void expected(int d, int op, int n, size_t i, void *out, size_t at) {
  if (!is_float(d)) {
    int64_t acc = 0;
    for (int r = 0; r < n; r++) {
      int64_t v = in_int(d, op, r, i);
      switch (op) {
      case PROD:
        acc = r == 0 ? v : acc * v;
        break;
      case MAX:
        acc = r == 0 || v > acc ? v : acc;
        break;
      case MIN:
        acc = r == 0 || v < acc ? v : acc;
        break;
      case PREMUL:
        acc += v * premul_i(r);
        break;
      default:
        acc += v;
      }
    }
    if (op == AVG) {
      acc /= n; /* truncated toward zero, as NCCL's SumPostDiv */
    }
    store(d, out, at, 0, acc);
    return;
  }
  double scale = round_to(d, d == 8 ? 1.0 / n : (double)(float)(1.0 / n)), acc = 0;
  for (int r = 0; r < n; r++) {
    double v = in_val(d, op, r, i);
    if (op == AVG) {
      v = round_to(d, v * scale);
    } else if (op == PREMUL) {
      v = round_to(d, v * round_to(d, premul_f(r)));
    }
    if (r == 0) {
      acc = v;
      continue;
    }
    switch (op) {
    case PROD:
      acc = round_to(d, acc * v);
      break;
    case MAX:
      acc = v > acc ? v : acc;
      break;
    case MIN:
      acc = v < acc ? v : acc;
      break;
    default:
      acc = round_to(d, acc + v);
    }
  }
  store(d, out, at, acc, 0);
}

static void fill(int d, int op, int r, void *p, size_t at, size_t count) {
  for (size_t i = 0; i < count; i++) {
    store(d, p, at + i, in_val(d, op, r, i), in_int(d, op, r, i));
  }
}

static ncclRedOp_t nccl_op(int op) {
  static const ncclRedOp_t m[NOPS] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg, (ncclRedOp_t)MSCCLGO_PREMUL_SUM};
  return m[op];
}

/* One case of one rank: its buffers, filled, and a check after. coll: 0
 * allreduce, 1 allgather, 2 reducescatter. */
struct one {
  int coll, d, op, n, rank, inplace;
  size_t count;
  char *send, *recv, *sendbuf, *recvbuf;
};

static const char *coll_names[3] = {"allreduce", "allgather", "reducescatter"};

static void prepare(struct one *c) {
  size_t es = dt_size(c->d), n = (size_t)c->n, cnt = c->count;
  size_t in = c->coll == 2 ? n * cnt : cnt, out = c->coll == 1 ? n * cnt : cnt;
  int op = c->coll == 1 ? -1 : c->op;
  /* One extra element each side, to find writes past the end. */
  if (c->inplace) {
    size_t big = (in > out ? in : out) + 1;
    c->recvbuf = calloc(big + 1, es);
    c->recv = c->recvbuf;
    switch (c->coll) {
    case 0:
      c->send = c->recv;
      break;
    case 1:
      c->send = c->recv + (size_t)c->rank * cnt * es;
      break;
    case 2:
      c->send = c->recv;
      c->recv = c->send + (size_t)c->rank * cnt * es;
      break;
    }
    c->sendbuf = NULL;
  } else {
    c->sendbuf = calloc(in + 1, es);
    c->recvbuf = calloc(out + 1, es);
    c->send = c->sendbuf;
    c->recv = c->recvbuf;
  }
  if (c->coll == 2) {
    for (size_t j = 0; j < n; j++) {
      /* Block j of rank r: element i is input i of the whole. */
      for (size_t i = 0; i < cnt; i++) {
        store(c->d, c->send, j * cnt + i, in_val(c->d, op, c->rank, j * cnt + i), in_int(c->d, op, c->rank, j * cnt + i));
      }
    }
  } else {
    fill(c->d, op, c->rank, c->send, 0, cnt);
  }
}

/* check returns the number of wrong elements (printing the first). */
static int check(struct one *c, const char *what) {
  size_t es = dt_size(c->d), n = (size_t)c->n, cnt = c->count;
  size_t out = c->coll == 1 ? n * cnt : cnt;
  char want[8];
  int wrong = 0;
  for (size_t i = 0; i < out; i++) {
    switch (c->coll) {
    case 0:
      expected(c->d, c->op, c->n, i, want, 0);
      break;
    case 1: {
      int r = (int)(i / cnt);
      size_t e = i % cnt;
      store(c->d, want, 0, in_val(c->d, -1, r, e), in_int(c->d, -1, r, e));
      break;
    }
    case 2:
      expected(c->d, c->op, c->n, (size_t)c->rank * cnt + i, want, 0);
      break;
    }
    if (memcmp(c->recv + i * es, want, es) != 0) {
      if (wrong++ == 0) {
        unsigned long long got = 0, w = 0;
        memcpy(&got, c->recv + i * es, es);
        memcpy(&w, want, es);
        printf("rank %d: %s: WRONG at element %zu: bits %#llx, want %#llx\n", c->rank, what, i, got, w);
      }
    }
  }
  return wrong;
}

static void release(struct one *c) {
  free(c->sendbuf);
  free(c->recvbuf);
}

/* gather_parts is an allgather of the custom modes through
 * mscclgoExecuteHostGather (SHAPES_PARTS=1): into one buffer per rank,
 * each allocated apart (in place: this rank's part is its input, inside
 * recv), then copied into recv for check. */
static int gather_parts(struct one *c, mscclgoComm_t mc) {
  size_t block = c->count * dt_size(c->d);
  void *parts[64];
  if (c->n > 64) {
    return ncclInvalidArgument;
  }
  for (int j = 0; j < c->n; j++) {
    parts[j] = c->inplace && j == c->rank ? (void *)c->send : calloc(block + 1, 1);
    if (parts[j] == NULL) {
      return ncclSystemError; /* the parts made so far leak: the run ends */
    }
  }
  int res = mscclgoExecuteHostGather(mc, NULL, c->send, parts, c->count, (ncclDataType_t)c->d);
  for (int j = 0; j < c->n; j++) {
    if (!(c->inplace && j == c->rank)) {
      memcpy(c->recv + (size_t)j * block, parts[j], block);
      free(parts[j]);
    }
  }
  return res;
}

static int call(struct one *c, ncclComm_t nc, mscclgoComm_t mc) {
  ncclDataType_t dt = (ncclDataType_t)c->d;
  if (mc != NULL && c->coll == 1 && getenv("SHAPES_PARTS") != NULL) {
    return gather_parts(c, mc);
  }
  if (mc != NULL) {
    int64_t si = premul_i(c->rank);
    double sf = premul_f(c->rank);
    char scalar[8];
    store(c->d, scalar, 0, sf, si);
    return mscclgoExecuteHostOp(mc, coll_names[c->coll], NULL, c->send, c->recv, c->count, dt, nccl_op(c->op),
                                c->op == PREMUL ? scalar : NULL);
  }
  switch (c->coll) {
  case 0:
    return ncclAllReduce(c->send, c->recv, c->count, dt, nccl_op(c->op), nc, NULL);
  case 1:
    return ncclAllGather(c->send, c->recv, c->count, dt, nc, NULL);
  }
  return ncclReduceScatter(c->send, c->recv, c->count, dt, nccl_op(c->op), nc, NULL);
}

/* stream_sync waits for the default stream of comm's device in the
 * emulated-device build (where plans run on a stream, asynchronously);
 * nothing to wait for elsewhere (host-memory runs are synchronous). */
static int stream_sync(ncclComm_t comm) {
  int (*sync)(int, void *) = NULL;
  *(void **)(&sync) = dlsym(RTLD_DEFAULT, "mscclgoEmuStreamSynchronize");
  if (sync == NULL || comm == NULL) {
    return ncclSuccess;
  }
  int dev = 0;
  ncclCommCuDevice(comm, &dev);
  return sync(dev, NULL) == 0 ? ncclSuccess : ncclSystemError;
}

static void describe(struct one *c, char *buf, size_t cap) {
  snprintf(buf, cap, "%s %s %s count %zu %s", coll_names[c->coll], dt_names[c->d], c->coll == 1 ? "-" : op_names[c->op],
           c->count, c->inplace ? "in-place" : "out-of-place");
}

/* The cases, in order: every count, type, then allgather and each op of
 * allreduce and reducescatter, in place on odd case numbers. */
struct cases {
  int total;
};

static int case_at(int idx, struct one *c, int n, int rank) {
  int per = 1 + 2 * nops; /* allgather, then allreduce and reducescatter per op */
  int k = idx;
  int ci = k / (ndt * per);
  if (ci >= ncounts) {
    return 0;
  }
  k %= ndt * per;
  int di = k / per, j = k % per;
  memset(c, 0, sizeof *c);
  c->d = dts[di];
  c->count = counts[ci];
  c->n = n;
  c->rank = rank;
  c->inplace = idx % 2;
  if (j == 0) {
    c->coll = 1;
    c->op = SUM;
  } else {
    c->coll = (j - 1) % 2 == 0 ? 0 : 2;
    c->op = ops[(j - 1) / 2];
  }
  return 1;
}

struct rank_run {
  int rank, n, cases, wrong;
  ncclComm_t nc;
  mscclgoComm_t mc;
};

static void *rank_main(void *arg) {
  struct rank_run *rr = arg;
  struct one c;
  char what[160];
  for (int idx = 0; case_at(idx, &c, rr->n, rr->rank); idx++) {
    prepare(&c);
    describe(&c, what, sizeof what);
    /* SHAPES_GROUP=1: each call of a rank in a group of its own (a
     * process's group of one rank, as nccl-tests under mpirun). */
    int grouped = rr->nc != NULL && getenv("SHAPES_GROUP") != NULL;
    int res = grouped ? ncclGroupStart() : ncclSuccess;
    if (res == ncclSuccess) {
      res = call(&c, rr->nc, rr->mc);
    }
    if (grouped) {
      int end = ncclGroupEnd();
      if (res == ncclSuccess) {
        res = end;
      }
    }
    if (res == ncclSuccess) {
      res = stream_sync(rr->nc);
    }
    rr->cases++;
    if (res != ncclSuccess) {
      printf("rank %d: %s -> %d: %s\n", rr->rank, what, res, rr->mc ? mscclgoGetLastError() : ncclGetLastError(rr->nc));
      rr->wrong++;
    } else if (check(&c, what) != 0) {
      rr->wrong++;
    }
    release(&c);
  }
  return NULL;
}

/* group_main drives every rank from this thread, each case's calls in
 * one group. */
static void group_main(struct rank_run *rr, int n) {
  struct one *c = calloc((size_t)n, sizeof *c);
  char what[160];
  for (int idx = 0; case_at(idx, &c[0], n, 0); idx++) {
    for (int r = 0; r < n; r++) {
      case_at(idx, &c[r], n, r);
      prepare(&c[r]);
    }
    describe(&c[0], what, sizeof what);
    int res = ncclGroupStart();
    for (int r = 0; r < n && res == ncclSuccess; r++) {
      res = call(&c[r], rr[r].nc, NULL);
    }
    int end = ncclGroupEnd();
    if (res == ncclSuccess) {
      res = end;
    }
    for (int r = 0; r < n && res == ncclSuccess; r++) {
      res = stream_sync(rr[r].nc);
    }
    for (int r = 0; r < n; r++) {
      rr[r].cases++;
      if (res != ncclSuccess) {
        printf("rank %d: %s (group) -> %d: %s\n", r, what, res, ncclGetLastError(NULL));
        rr[r].wrong++;
      } else if (check(&c[r], what) != 0) {
        rr[r].wrong++;
      }
      release(&c[r]);
    }
  }
  free(c);
}

static int parse_list(const char *s, const char *const *names, int nnames, int *out) {
  int k = 0;
  char *dup = strdup(s), *save = NULL;
  for (char *t = strtok_r(dup, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
    int found = -1;
    for (int i = 0; i < nnames; i++) {
      if (strcmp(t, names[i]) == 0) {
        found = i;
      }
    }
    if (found < 0) {
      fprintf(stderr, "shapes: unknown %s\n", t);
      exit(2);
    }
    out[k++] = found;
  }
  free(dup);
  return k;
}

/* job_id is this rank's unique id of a job of processes, through the
 * file SHAPES_ID_FILE: rank 0 makes and publishes it, the others read it. */
static int job_id(int rank, ncclUniqueId *id) {
  const char *file = getenv("SHAPES_ID_FILE");
  if (file == NULL) {
    return -1;
  }
  if (rank == 0) {
    return ncclGetUniqueId(id) != ncclSuccess ? -1 : put_id(file, id);
  }
  return get_id(file, rank, id);
}

struct init_arg {
  struct rank_run *rr;
  ncclUniqueId id;
  int res;
};

static void *custom_init(void *arg) {
  struct init_arg *a = arg;
  a->res = mscclgoCommInitRank(&a->rr->mc, a->rr->n, a->id, a->rr->rank);
  if (a->res == ncclSuccess && plans_dir != NULL) {
    a->res = mscclgoRegisterPlan(a->rr->mc, plans_dir, NULL);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: shapes MODE N DTYPES OPS COUNTS\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *mode = argv[1];
  int n = atoi(argv[2]);
  ndt = parse_list(argv[3], dt_names, 10, dts);
  nops = parse_list(argv[4], op_names, NOPS, ops);
  char *dup = strdup(argv[5]), *save = NULL;
  for (char *t = strtok_r(dup, ",", &save); t != NULL && ncounts < 64; t = strtok_r(NULL, ",", &save)) {
    counts[ncounts++] = (size_t)strtoull(t, NULL, 10);
  }
  free(dup);
  plans_dir = getenv("SHAPES_PLANS");
  mode_custom = strncmp(mode, "custom", 6) == 0;
  mode_group = strcmp(mode, "group") == 0;
  int procs = strcmp(mode, "procs") == 0 || strcmp(mode, "customprocs") == 0;
  int me = 0;
  if (procs) {
    me = atoi(getenv("RANK") ? getenv("RANK") : "0");
    n = atoi(getenv("WORLD_SIZE") ? getenv("WORLD_SIZE") : "1");
  }
  int local = procs ? 1 : n;
  struct rank_run *rr = calloc((size_t)local, sizeof *rr);
  for (int i = 0; i < local; i++) {
    rr[i].rank = procs ? me : i;
    rr[i].n = n;
  }
  if (mode_custom) {
    ncclUniqueId id;
    if (procs ? job_id(me, &id) != 0 : ncclGetUniqueId(&id) != ncclSuccess) {
      fprintf(stderr, "shapes: no unique id\n");
      return 1;
    }
    pthread_t *th = calloc((size_t)local, sizeof *th);
    struct init_arg *ia = calloc((size_t)local, sizeof *ia);
    for (int i = 0; i < local; i++) {
      ia[i].rr = &rr[i];
      ia[i].id = id;
      pthread_create(&th[i], NULL, custom_init, &ia[i]);
    }
    for (int i = 0; i < local; i++) {
      pthread_join(th[i], NULL);
      if (ia[i].res != ncclSuccess) {
        fprintf(stderr, "shapes: rank %d: init: %s\n", rr[i].rank, mscclgoGetLastError());
        return 1;
      }
    }
    /* What mscclgoSelect says of an odd count. */
    if (rr[0].rank == 0) {
      char name[256];
      float x[17], y[17];
      ncclResult_t r = mscclgoSelect(rr[0].mc, "allreduce", NULL, x, y, 17, ncclFloat32, name, sizeof name);
      printf("select allreduce 17 float32 -> %d %s\n", r, r == ncclSuccess ? name : mscclgoGetLastError());
      r = mscclgoSelect(rr[0].mc, "allreduce", NULL, x, y, 17, ncclFloat64, name, sizeof name);
      printf("select allreduce 17 float64 -> %d %s\n", r, r == ncclSuccess ? name : mscclgoGetLastError());
    }
    free(ia);
    free(th);
  } else if (procs) {
    ncclUniqueId id;
    if (job_id(me, &id) != 0 || ncclCommInitRank(&rr[0].nc, n, id, me) != ncclSuccess) {
      fprintf(stderr, "shapes: rank %d: init failed: %s\n", me, ncclGetLastError(NULL));
      return 1;
    }
  } else {
    ncclComm_t *comms = calloc((size_t)n, sizeof *comms);
    if (ncclCommInitAll(comms, n, NULL) != ncclSuccess) {
      fprintf(stderr, "shapes: ncclCommInitAll: %s\n", ncclGetLastError(NULL));
      return 1;
    }
    for (int i = 0; i < n; i++) {
      rr[i].nc = comms[i];
    }
    free(comms);
  }
  if (mode_group) {
    group_main(rr, n);
  } else {
    pthread_t *th = calloc((size_t)local, sizeof *th);
    for (int i = 0; i < local; i++) {
      pthread_create(&th[i], NULL, rank_main, &rr[i]);
    }
    for (int i = 0; i < local; i++) {
      pthread_join(th[i], NULL);
    }
    free(th);
  }
  int bad = 0;
  for (int i = 0; i < local; i++) {
    printf("rank %d: %d cases, %d wrong\n", rr[i].rank, rr[i].cases, rr[i].wrong);
    bad |= rr[i].wrong != 0;
    if (rr[i].mc != NULL && mscclgoCommDestroy(rr[i].mc) != ncclSuccess) {
      bad = 1;
    }
  }
  if (!mode_custom) {
    /* Threads: destroy concurrently would be NCCL's way; one by one is
     * fine for host-memory runs. */
    for (int i = 0; i < local; i++) {
      if (ncclCommDestroy(rr[i].nc) != ncclSuccess) {
        bad = 1;
      }
    }
  }
  return bad;
}
