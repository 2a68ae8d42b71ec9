/* window.c: Open MPI's side of bench/window: each rank posts WINDOW
 * MPI_Irecvs from every other rank, one per tag, then WINDOW MPI_Isends of
 * BYTES to every other rank, and waits for all (MPI_Waitall); rank 0
 * prints the mean time of an exchange.
 *
 *   mpicc -O2 -o /tmp/window bench/mpi/window.c
 *   mpirun -np 4 /tmp/window 64 8 2000 100   # WINDOW BYTES EXCHANGES WARMUP
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static void exchange(int me, int p, int window, int size, char *sb, char *rb, MPI_Request *reqs) {
  int n = 0;
  for (int k = 1; k < p; k++) {
    int src = (me - k + p) % p;
    for (int j = 0; j < window; j++)
      MPI_Irecv(rb + (size_t)size * (src * window + j), size, MPI_CHAR, src, j, MPI_COMM_WORLD, &reqs[n++]);
  }
  for (int k = 1; k < p; k++) {
    int dst = (me + k) % p;
    for (int j = 0; j < window; j++)
      MPI_Isend(sb, size, MPI_CHAR, dst, j, MPI_COMM_WORLD, &reqs[n++]);
  }
  MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int me, p;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  if (argc != 5 || atoi(argv[1]) < 1 || atoi(argv[2]) < 0 || atoi(argv[3]) < 1 || atoi(argv[4]) < 0) {
    if (me == 0)
      fprintf(stderr, "usage: window WINDOW BYTES EXCHANGES WARMUP\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int window = atoi(argv[1]), size = atoi(argv[2]), exchanges = atoi(argv[3]), warmup = atoi(argv[4]);
  char *sb = calloc(size ? size : 1, 1);
  char *rb = calloc((size_t)(size ? size : 1) * p * window, 1);
  MPI_Request *reqs = malloc(sizeof(MPI_Request) * 2 * p * window);
  for (int i = 0; i < warmup; i++)
    exchange(me, p, window, size, sb, rb, reqs);
  MPI_Barrier(MPI_COMM_WORLD);
  double t = MPI_Wtime();
  for (int i = 0; i < exchanges; i++)
    exchange(me, p, window, size, sb, rb, reqs);
  t = MPI_Wtime() - t;
  MPI_Barrier(MPI_COMM_WORLD);
  if (me == 0)
    printf("mpi np %d window %d x %d B: %.2f us an exchange\n", p, window, size, t / exchanges * 1e6);
  MPI_Finalize();
  return 0;
}
