// A PMPI wrapper, preloaded into lmp by the LAMMPS tests (LD_PRELOAD), that
// records where every MPI call of a run is made: on the thread that called
// MPI_Init (LAMMPS's main thread) or another, and inside a LibTorch autograd
// pass or not.  LAMMPS initialises MPI at thread level SINGLE, so every call
// must come from the main thread; on a GPU, LibTorch runs backward nodes on
// its own worker threads, so a call from inside an autograd pass is one that
// a GPU would make from the wrong thread.  At MPI_Finalize each rank writes
//   calls N off_main_thread M inside_autograd K first_bad NAME
// to $UMA_MPI_PROBE.<rank>.
#include <mpi.h>
#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <torch/csrc/autograd/graph_task.h>

namespace {

pthread_t main_thread;
std::atomic<long long> calls{0}, off_main{0}, inside_autograd{0};
std::atomic<const char*> first_bad{nullptr};

void record(const char* name) {
  ++calls;
  bool bad = false;
  if (!pthread_equal(pthread_self(), main_thread)) {
    ++off_main;
    bad = true;
  }
  if (torch::autograd::get_current_graph_task_id() != -1) {
    ++inside_autograd;
    bad = true;
  }
  const char* none = nullptr;
  if (bad) first_bad.compare_exchange_strong(none, name);
}

}  // namespace

extern "C" {

int MPI_Init(int* argc, char*** argv) {
  main_thread = pthread_self();
  return PMPI_Init(argc, argv);
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  main_thread = pthread_self();
  return PMPI_Init_thread(argc, argv, required, provided);
}

int MPI_Finalize() {
  const char* path = std::getenv("UMA_MPI_PROBE");
  if (path) {
    int rank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (FILE* f = std::fopen((std::string(path) + "." + std::to_string(rank)).c_str(), "w")) {
      const char* bad = first_bad.load();
      std::fprintf(f, "calls %lld off_main_thread %lld inside_autograd %lld first_bad %s\n", calls.load(),
                   off_main.load(), inside_autograd.load(), bad ? bad : "none");
      std::fclose(f);
    }
  }
  return PMPI_Finalize();
}

int MPI_Send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  record("MPI_Send");
  return PMPI_Send(buf, count, type, dest, tag, comm);
}

int MPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request* req) {
  record("MPI_Isend");
  return PMPI_Isend(buf, count, type, dest, tag, comm, req);
}

int MPI_Recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status* status) {
  record("MPI_Recv");
  return PMPI_Recv(buf, count, type, source, tag, comm, status);
}

int MPI_Irecv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request* req) {
  record("MPI_Irecv");
  return PMPI_Irecv(buf, count, type, source, tag, comm, req);
}

int MPI_Wait(MPI_Request* req, MPI_Status* status) {
  record("MPI_Wait");
  return PMPI_Wait(req, status);
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status statuses[]) {
  record("MPI_Waitall");
  return PMPI_Waitall(n, reqs, statuses);
}

int MPI_Waitany(int n, MPI_Request reqs[], int* index, MPI_Status* status) {
  record("MPI_Waitany");
  return PMPI_Waitany(n, reqs, index, status);
}

int MPI_Sendrecv(const void* sbuf, int scount, MPI_Datatype stype, int dest, int stag, void* rbuf, int rcount,
                 MPI_Datatype rtype, int source, int rtag, MPI_Comm comm, MPI_Status* status) {
  record("MPI_Sendrecv");
  return PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag, comm, status);
}

int MPI_Allreduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  record("MPI_Allreduce");
  return PMPI_Allreduce(sbuf, rbuf, count, type, op, comm);
}

int MPI_Reduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
  record("MPI_Reduce");
  return PMPI_Reduce(sbuf, rbuf, count, type, op, root, comm);
}

int MPI_Bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  record("MPI_Bcast");
  return PMPI_Bcast(buf, count, type, root, comm);
}

int MPI_Barrier(MPI_Comm comm) {
  record("MPI_Barrier");
  return PMPI_Barrier(comm);
}

int MPI_Allgather(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype,
                  MPI_Comm comm) {
  record("MPI_Allgather");
  return PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm);
}

int MPI_Allgatherv(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, const int rcounts[],
                   const int displs[], MPI_Datatype rtype, MPI_Comm comm) {
  record("MPI_Allgatherv");
  return PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm);
}

}  // extern "C"
