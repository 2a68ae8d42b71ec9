/*
 * exchange: the bytes of an all-reduce of 2 ranks over TCP on one host,
 * and nothing else. Each rank of such an all-reduce must receive as many
 * bytes as the buffer holds (whatever the algorithm: the sum it ends with
 * says as much about the other rank's buffer as that buffer itself), and
 * send as many. This program does only that: two processes connected over
 * loopback TCP each write size bytes and read size bytes, from one thread
 * with non-blocking sockets, writing and reading in turn, at most CHUNK
 * (1 MiB) per call, as MPI progress engines do; there is nothing to
 * match, reduce or copy. It is a reference, not a proven floor: it shows
 * what moving the bytes costs on this host, beside what the all-reduces
 * take. On the 2-core VM of the README, 8 rounds in turns at 16 MiB (20
 * calls after 5): this took 9.9-14.6 ms (median 11.4), gorun's all-reduce
 * at np 2 over TCP 9.9-11.9 (11.0), Open MPI's 11.2-14.3 (12.0).
 *
 *   cc -O2 -o exchange exchange.c
 *   ./exchange -b 1M -e 64M -n 20 -w 5
 *
 * It prints the columns of gorun's examples/collbench (op exchange, algo
 * plain), with busbw equal to algbw, as for an all-reduce of 2 ranks. The
 * time of a size is the mean over the iterations of the first process;
 * the other waits for its bytes in every iteration, so it takes as long.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (1L << 20)

static void die(const char *what) {
	fprintf(stderr, "exchange: %s: %s\n", what, strerror(errno));
	exit(1);
}

static long parse_size(const char *flag, const char *s) {
	char *end;
	long n = strtol(s, &end, 10);
	switch (*end) {
	case 'K': case 'k': n <<= 10; end++; break;
	case 'M': case 'm': n <<= 20; end++; break;
	case 'G': case 'g': n <<= 30; end++; break;
	}
	if (*end != '\0' || n < 1) {
		fprintf(stderr, "exchange: %s %s: want a positive size in bytes, like 8, 64K or 16M\n", flag, s);
		exit(2);
	}
	return n;
}

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

/* swap writes size bytes of out to s and reads size bytes from s into in,
 * in turn, as far as the non-blocking socket lets each go. */
static void swap(int s, const char *out, char *in, long size) {
	long w = 0, r = 0;
	while (w < size || r < size) {
		if (w < size) {
			ssize_t n = write(s, out + w, size - w < CHUNK ? size - w : CHUNK);
			if (n > 0) w += n;
			else if (n < 0 && errno != EAGAIN) die("write");
		}
		if (r < size) {
			ssize_t n = read(s, in + r, size - r < CHUNK ? size - r : CHUNK);
			if (n > 0) r += n;
			else if (n == 0) { errno = ECONNRESET; die("read: the other process left"); }
			else if (errno != EAGAIN) die("read");
		}
	}
}

int main(int argc, char **argv) {
	long minb = 8, maxb = 64L << 20;
	int iters = 20, warm = 5, factor = 2;
	for (int i = 1; i < argc; i += 2) {
		if (i + 1 >= argc) {
			fprintf(stderr, "exchange: %s needs a value; usage: exchange [-b min] [-e max] [-f factor] [-n iters] [-w warm-up]\n", argv[i]);
			return 2;
		}
		if (!strcmp(argv[i], "-b")) minb = parse_size("-b", argv[i + 1]);
		else if (!strcmp(argv[i], "-e")) maxb = parse_size("-e", argv[i + 1]);
		else if (!strcmp(argv[i], "-n")) iters = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-w")) warm = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-f")) factor = atoi(argv[i + 1]);
		else {
			fprintf(stderr, "exchange: unknown flag %s; usage: exchange [-b min] [-e max] [-f factor] [-n iters] [-w warm-up]\n", argv[i]);
			return 2;
		}
	}
	if (iters < 1 || warm < 0 || factor < 2 || minb > maxb) {
		fprintf(stderr, "exchange: want -n >= 1, -w >= 0, -f >= 2 and -b <= -e\n");
		return 2;
	}

	int ls = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 1) < 0 ||
	    getsockname(ls, (struct sockaddr *)&a, &al) < 0)
		die("listen on 127.0.0.1");
	fflush(stdout);
	pid_t child = fork();
	if (child < 0) die("fork");
	int s;
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the first process */
		s = accept(ls, NULL, NULL);
		if (s < 0) die("accept");
	} else {
		s = socket(AF_INET, SOCK_STREAM, 0);
		if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) < 0) die("connect to 127.0.0.1");
	}
	close(ls);
	int one = 1;
	if (setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0) die("TCP_NODELAY");
	if (fcntl(s, F_SETFL, O_NONBLOCK) < 0) die("O_NONBLOCK");
	char *out = malloc(maxb), *in = malloc(maxb);
	if (!out || !in) die("malloc");
	memset(out, child ? 1 : 2, maxb);
	memset(in, 0, maxb);

	if (child)
		printf("# exchange: 2 processes over loopback TCP, %d iterations after %d warm-up\n"
		       "# op            np        bytes        count    type  redop          algo      time_us  algbw_GBps  busbw_GBps   wrong\n",
		       iters, warm);
	for (long size = minb; size <= maxb; size *= factor) {
		for (int i = 0; i < warm; i++) swap(s, out, in, size);
		swap(s, out, in, 1); /* both start together */
		double start = now();
		for (int i = 0; i < iters; i++) swap(s, out, in, size);
		double t = (now() - start) / iters;
		if (child) {
			double algbw = size / t / 1e9;
			printf("%-15s %4d %12ld %12ld %7s %6s %13s %12.2f %11.3f %11.3f %7s\n", "exchange", 2, size,
			       size / 4 > 0 ? size / 4 : 1, "float32", "none", "plain", t * 1e6, algbw, algbw, "N/A");
			fflush(stdout);
		}
	}
	close(s);
	if (child == 0) return 0;
	int status;
	if (waitpid(child, &status, 0) < 0) die("wait");
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "exchange: the second process failed\n");
		return 1;
	}
	return 0;
}
