# How the tests launch multi-process jobs (CTest label mpi): mpirun as root on a machine
# with fewer cores than ranks, shared memory without cross-memory attach (containers forbid
# it), TCP on loopback for the rest, one OpenMP thread per rank.
#   INFINI_MPIRUN    mpirun and its options; append -np N and the program
#   INFINI_MPI_ENV   the environment of such a test (ENVIRONMENT property)
find_package(MPI REQUIRED COMPONENTS C)
set(INFINI_MPIRUN ${MPIEXEC_EXECUTABLE} --oversubscribe --bind-to none
    --mca btl self,vader,tcp --mca btl_vader_single_copy_mechanism none --mca btl_tcp_if_include lo
    -x OMP_NUM_THREADS=1 -x INFINI_COMM_TIMEOUT)
set(INFINI_MPI_ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 INFINI_COMM_TIMEOUT=120)
if(INFINI_SANITIZE)  # Open MPI's own allocations outlive MPI_Finalize
  list(APPEND INFINI_MPI_ENV LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/parallel/lsan.supp)
endif()
