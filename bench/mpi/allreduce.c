/*
 * allreduce: MPI_Allreduce of float32 sums over a range of sizes, timed
 * and printed like gorun's examples/collbench (algo "ompi"), so that
 * bench/allreduce.sh can put the two side by side.
 *
 *   mpicc -O2 -o allreduce allreduce.c
 *   mpirun --mca btl tcp,self -np 4 ./allreduce -b 8 -e 64M -n 20 -w 5
 *
 * The buffer is reduced in place (MPI_IN_PLACE), as collbench does. The
 * time of one size is the mean over the iterations of the slowest rank.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long parse_size(const char *s) {
	char *end;
	long n = strtol(s, &end, 10);
	switch (*end) {
	case 'K': case 'k': n <<= 10; break;
	case 'M': case 'm': n <<= 20; break;
	case 'G': case 'g': n <<= 30; break;
	}
	return n;
}

int main(int argc, char **argv) {
	long minb = 8, maxb = 64L << 20;
	int iters = 20, warm = 5, factor = 2;
	MPI_Init(&argc, &argv);
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-b")) minb = parse_size(argv[i + 1]);
		else if (!strcmp(argv[i], "-e")) maxb = parse_size(argv[i + 1]);
		else if (!strcmp(argv[i], "-n")) iters = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-w")) warm = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-f")) factor = atoi(argv[i + 1]);
	}
	int rank, np;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &np);
	float *buf = malloc(maxb > 4 ? maxb : 4);
	if (rank == 0) {
		printf("# allreduce (Open MPI): %d ranks, %d iterations after %d warm-up\n", np, iters, warm);
		printf("# op            np        bytes        count    type  redop          algo      time_us  algbw_GBps  busbw_GBps   wrong\n");
	}
	for (long size = minb; size <= maxb; size *= factor) {
		long count = size / 4 > 0 ? size / 4 : 1;
		for (long i = 0; i < count; i++) buf[i] = (float)((rank * 131 + i * 7) % 13 + 1);
		for (int i = 0; i < warm; i++)
			MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		MPI_Barrier(MPI_COMM_WORLD);
		double start = MPI_Wtime();
		for (int i = 0; i < iters; i++)
			MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		double mean = (MPI_Wtime() - start) / iters, slowest;
		MPI_Reduce(&mean, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
		if (rank == 0) {
			long bytes = count * 4;
			double algbw = bytes / slowest / 1e9;
			printf("%-15s %4d %12ld %12ld %7s %6s %13s %12.2f %11.3f %11.3f %7s\n", "allreduce", np, bytes, count,
			       "float32", "sum", "ompi", slowest * 1e6, algbw, algbw * 2.0 * (np - 1) / np, "N/A");
			fflush(stdout);
		}
	}
	free(buf);
	MPI_Finalize();
	return 0;
}
