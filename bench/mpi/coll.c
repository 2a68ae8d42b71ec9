/*
 * coll: Open MPI's side of gorun's side-by-side benchmarks. It times
 * MPI_Allreduce (float32 sum, in place), MPI_Bcast (root 0), MPI_Reduce
 * (float32 sum to root 0), MPI_Gather or MPI_Scatter (root 0),
 * MPI_Allgather or MPI_Alltoall (float32) over a range of sizes and
 * prints them in the
 * columns of gorun's examples/collbench, with algo "ompi", so that
 * bench/compare can put the two side by side.
 *
 *   mpicc -O2 -o coll coll.c
 *   mpirun -np 4 ./coll -op allreduce -b 8 -e 64M -n 20 -w 5
 *
 * Sizes count bytes as nccl-tests does: the whole buffer of all-reduce,
 * reduce and broadcast, the gathered result (all ranks' blocks) of all-gather
 * and gather, the scattered buffer of scatter, one
 * rank's send buffer (a block for every rank) of all-to-all. The
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

enum op { ALLREDUCE, BROADCAST, REDUCE, GATHER, SCATTER, ALLGATHER, ALLTOALL };

/* run calls the collective once on count float32 elements (per rank for
 * all-gather and gather, per block for all-to-all and scatter). */
static void run(enum op op, float *buf, float *out, long count) {
	switch (op) {
	case ALLREDUCE:
		MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		break;
	case BROADCAST:
		MPI_Bcast(buf, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD);
		break;
	case REDUCE:
		MPI_Reduce(buf, out, (int)count, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
		break;
	case GATHER:
		MPI_Gather(buf, (int)count, MPI_FLOAT, out, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD);
		break;
	case SCATTER:
		MPI_Scatter(buf, (int)count, MPI_FLOAT, out, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD);
		break;
	case ALLGATHER:
		MPI_Allgather(buf, (int)count, MPI_FLOAT, out, (int)count, MPI_FLOAT, MPI_COMM_WORLD);
		break;
	case ALLTOALL:
		MPI_Alltoall(buf, (int)count, MPI_FLOAT, out, (int)count, MPI_FLOAT, MPI_COMM_WORLD);
		break;
	}
}

int main(int argc, char **argv) {
	long minb = 8, maxb = 64L << 20;
	int iters = 20, warm = 5, factor = 2;
	const char *opname = "allreduce";
	MPI_Init(&argc, &argv);
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-b")) minb = parse_size(argv[i + 1]);
		else if (!strcmp(argv[i], "-e")) maxb = parse_size(argv[i + 1]);
		else if (!strcmp(argv[i], "-n")) iters = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-w")) warm = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-f")) factor = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-op")) opname = argv[i + 1];
	}
	enum op op;
	if (!strcmp(opname, "allreduce")) op = ALLREDUCE;
	else if (!strcmp(opname, "broadcast")) op = BROADCAST;
	else if (!strcmp(opname, "reduce")) op = REDUCE;
	else if (!strcmp(opname, "gather")) op = GATHER;
	else if (!strcmp(opname, "scatter")) op = SCATTER;
	else if (!strcmp(opname, "allgather")) op = ALLGATHER;
	else if (!strcmp(opname, "alltoall")) op = ALLTOALL;
	else {
		fprintf(stderr, "coll: -op %s: want allreduce, broadcast, reduce, gather, scatter, allgather or alltoall\n", opname);
		MPI_Abort(MPI_COMM_WORLD, 2);
		return 2;
	}
	int rank, np;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &np);
	float *buf = malloc(maxb > 4 ? maxb : 4);
	int blocked = op == ALLGATHER || op == ALLTOALL || op == GATHER || op == SCATTER; /* the buffer is a block per rank */
	float *out = blocked || op == REDUCE ? malloc(maxb > 4 ? maxb : 4) : NULL;
	if (rank == 0) {
		printf("# %s (Open MPI): %d ranks, %d iterations after %d warm-up\n", opname, np, iters, warm);
		printf("# op            np        bytes        count    type  redop          algo      time_us  algbw_GBps  busbw_GBps   wrong\n");
	}
	double factor_bus = op == ALLREDUCE ? 2.0 * (np - 1) / np : blocked ? (double)(np - 1) / np : 1.0;
	for (long size = minb; size <= maxb; size *= factor) {
		long count = size / 4 > 0 ? size / 4 : 1; /* elements of the whole buffer */
		long each = blocked ? count / np : count;
		if (each < 1) continue;
		count = blocked ? each * np : count;
		for (long i = 0; i < (op == ALLTOALL || op == SCATTER ? count : each); i++) buf[i] = (float)((rank * 131 + i * 7) % 13 + 1);
		for (int i = 0; i < warm; i++) run(op, buf, out, each);
		MPI_Barrier(MPI_COMM_WORLD);
		double start = MPI_Wtime();
		for (int i = 0; i < iters; i++) run(op, buf, out, each);
		double mean = (MPI_Wtime() - start) / iters, slowest;
		MPI_Reduce(&mean, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
		if (rank == 0) {
			long bytes = count * 4;
			double algbw = bytes / slowest / 1e9;
			printf("%-15s %4d %12ld %12ld %7s %6s %13s %12.2f %11.3f %11.3f %7s\n", opname, np, bytes, count,
			       "float32", op == ALLREDUCE || op == REDUCE ? "sum" : "none", "ompi", slowest * 1e6, algbw, algbw * factor_bus, "N/A");
			fflush(stdout);
		}
	}
	free(buf);
	free(out);
	MPI_Finalize();
	return 0;
}
