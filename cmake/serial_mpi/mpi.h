// mpi.h for building umaplugin.so against a serial LAMMPS (BUILD_MPI off).
//
// Such a LAMMPS compiles its MPI stubs (src/STUBS) into liblammps but does
// not install their mpi.h.  CMakeLists.txt then puts this folder and, right
// after it, the LAMMPS source's STUBS folder on the plugin's include path.
// This header includes the stubs' mpi.h and adds the few MPI names the plugin
// uses that the stubs lack, each with its meaning for a single process.
#pragma once

#include_next <mpi.h>

#ifndef MPI_STUBS
#error \
    "cmake/serial_mpi/mpi.h is only for a serial LAMMPS: the next mpi.h must be LAMMPS's STUBS/mpi.h"
#endif

// One process: the process's own communicator is the world.
#ifndef MPI_COMM_SELF
#define MPI_COMM_SELF MPI_COMM_WORLD
#endif

// The stubs' reductions copy bytes; a 64-bit integer type of the same width
// copies the same bytes.
#ifndef MPI_UNSIGNED_LONG_LONG
#define MPI_UNSIGNED_LONG_LONG MPI_LONG_LONG
#endif

#ifndef MPI_INFO_NULL
#define MPI_INFO_NULL 0
#endif

// MPI-3 takes the send buffers as const; the stubs as void *.  These
// overloads take a const send buffer and pass it on (the stubs only read it).
// Calls with MPI_IN_PLACE (NULL) or a non-const buffer still reach the stubs.
template <typename T>
inline int MPI_Allreduce(const T *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                         MPI_Op op, MPI_Comm comm) {
  return MPI_Allreduce(const_cast<void *>(static_cast<const void *>(sendbuf)), recvbuf, count,
                       datatype, op, comm);
}
template <typename T>
inline int MPI_Reduce(const T *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                      int root, MPI_Comm comm) {
  return MPI_Reduce(const_cast<void *>(static_cast<const void *>(sendbuf)), recvbuf, count,
                    datatype, op, root, comm);
}
template <typename T>
inline int MPI_Allgather(const T *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                         int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return MPI_Allgather(const_cast<void *>(static_cast<const void *>(sendbuf)), sendcount, sendtype,
                       recvbuf, recvcount, recvtype, comm);
}
template <typename T>
inline int MPI_Allgatherv(const T *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                          int *recvcounts, int *displs, MPI_Datatype recvtype, MPI_Comm comm) {
  return MPI_Allgatherv(const_cast<void *>(static_cast<const void *>(sendbuf)), sendcount, sendtype,
                        recvbuf, recvcounts, displs, recvtype, comm);
}

#ifndef MPI_COMM_TYPE_SHARED
#define MPI_COMM_TYPE_SHARED 1
// The node-local communicator of a single process is its communicator.
inline int MPI_Comm_split_type(MPI_Comm comm, int /*split_type*/, int /*key*/, int /*info*/,
                               MPI_Comm *newcomm) {
  *newcomm = comm;
  return MPI_SUCCESS;
}
#endif
