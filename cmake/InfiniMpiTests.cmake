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
# Sanitized builds: Open MPI's own allocations outlive MPI_Finalize. LeakSanitizer suppresses
# them by library (tests/parallel/lsan.supp), which needs whole stacks: the fast unwinder stops
# at Open MPI's frames (no frame pointers) and reports them from "<unknown module>". The rest
# of ASAN_OPTIONS is the asan test preset's.
if(INFINI_SANITIZE)
  list(APPEND INFINI_MPI_ENV LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/parallel/lsan.supp
       ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=1:allocator_may_return_null=1:fast_unwind_on_malloc=0)
endif()
