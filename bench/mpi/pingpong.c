/* pingpong.c: Open MPI's side of examples/pingpong, in both its modes, with
 * the same output: round trips of MPI_Send and MPI_Recv between ranks 0
 * and 1 (half the round trip per line), or with -stream a one-way stream
 * of blocking MPI_Sends that rank 1 answers once, at the end, with an
 * empty message (the time per message). Sizes 0, then powers of two to
 * MAX; ITERS per size, fewer above 64 KiB; WARMUP untimed first.
 *
 *   mpicc -O2 -o /tmp/pingpong bench/mpi/pingpong.c
 *   mpirun -np 2 /tmp/pingpong 4096 1000000 1000 -stream   # MAX ITERS WARMUP [-stream]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int scaled(int n, long size) {
  if (size > 64 << 10)
    n = (int)(n * (64L << 10) / size);
  return n < 5 ? 5 : n;
}

/* measure returns the seconds of n round trips or, with stream, of a
 * stream of n messages and the answer. */
static double measure(int rank, char *buf, int size, int n, int stream) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t = MPI_Wtime();
  for (int i = 0; i < n; i++) {
    if (rank == 0) {
      MPI_Send(buf, size, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
      if (!stream)
        MPI_Recv(buf, size, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(buf, size, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (!stream)
        MPI_Send(buf, size, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
    }
  }
  if (stream) {
    if (rank == 0)
      MPI_Recv(NULL, 0, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else
      MPI_Send(NULL, 0, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
  }
  return MPI_Wtime() - t;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 4 || argc > 5 || atol(argv[1]) < 0 || atoi(argv[2]) < 1 || atoi(argv[3]) < 0 ||
      (argc == 5 && strcmp(argv[4], "-stream") != 0) || size < 2) {
    if (rank == 0)
      fprintf(stderr, "usage: mpirun -np 2 pingpong MAX ITERS WARMUP [-stream]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  long max = atol(argv[1]);
  int iters = atoi(argv[2]), warmup = atoi(argv[3]), stream = argc == 5;
  char *buf = calloc(max > 0 ? max : 1, 1);
  if (rank == 0)
    printf("# Open MPI pingpong%s\n%-12s %14s %12s\n", stream ? " -stream" : "", "# size(B)",
           stream ? "message(us)" : "latency(us)", "GB/s");
  for (long s = 0; s <= max; s = s ? s * 2 : 1) {
    if (rank > 1) {
      MPI_Barrier(MPI_COMM_WORLD);
      MPI_Barrier(MPI_COMM_WORLD);
      continue;
    }
    int n = scaled(iters, s);
    measure(rank, buf, (int)s, scaled(warmup, s), stream);
    double d = measure(rank, buf, (int)s, n, stream);
    double per = stream ? d / n : d / (2.0 * n);
    if (rank == 0)
      printf("%-12ld %14.2f %12.3f\n", s, per * 1e6, s ? s / per / 1e9 : 0.0);
  }
  MPI_Finalize();
  return 0;
}
