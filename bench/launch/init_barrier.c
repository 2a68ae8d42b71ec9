/* init_barrier: the MPI side of the launch benchmark. Every rank joins the
 * job and passes one barrier, then exits: the same work as initbarrier/. */
#include <mpi.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
