/* first.c: Open MPI's side of `percall --first`: the job's first N
 * all-reduces (float32 sum) of one size, each after a barrier, timed one
 * by one, with a buffer written before the first.
 *
 *   mpicc -O2 -o /tmp/first bench/mpi/first.c
 *   mpirun -np 2 /tmp/first 65536 30      # bytes, calls
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  if (argc != 3 || atoi(argv[1]) < 4 || atoi(argv[2]) < 1) {
    fprintf(stderr, "usage: first BYTES CALLS (BYTES at least 4)\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int n = atoi(argv[1]) / 4, calls = atoi(argv[2]);
  float *buf = malloc((size_t)n * 4);
  double *ts = malloc((size_t)calls * sizeof(double));
  for (int i = 0; i < n; i++)
    buf[i] = 1;
  for (int i = 0; i < calls; i++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    ts[i] = (MPI_Wtime() - t) * 1e6;
  }
  printf("r%d allreduce %d B, the first %d calls (us):", rank, n * 4, calls);
  for (int i = 0; i < calls; i++)
    printf(" %.1f", ts[i]);
  printf("\n");
  MPI_Finalize();
  return 0;
}
