# Fails naming every line of core, config, backend, model, train, io or apps (src/ and
# include/trident/) that calls an MPI function or takes a ParallelGroups' raw communicators: those
# layers reach MPI only through the parallel layer's checked helpers (host_collectives.hpp,
# host_transfer.hpp, ControlComm). The one raw handle handed out, parallel_io_comm (HDF5's MPI-IO
# driver, H5Pset_fapl_mpio), may be used by io alone.
set(found "")
foreach(layer core config backend model train io apps)
  file(GLOB_RECURSE files ${ROOT}/src/${layer}/* ${ROOT}/include/trident/${layer}/*)
  foreach(f ${files})
    file(STRINGS ${f} lines REGEX "MPI_[A-Z][A-Za-z_]*[ \t]*\\(|(\\.|->)mpi\\.")
    if(NOT layer STREQUAL "io")
      file(STRINGS ${f} io_lines REGEX "parallel_io_comm[ \t]*\\(")
      list(APPEND lines ${io_lines})
    endif()
    foreach(l ${lines})
      string(APPEND found "${f}: ${l}\n")
    endforeach()
  endforeach()
endforeach()
if(found)
  message(FATAL_ERROR "raw MPI outside the parallel layer (use its helpers, e.g. host_collectives.hpp):\n${found}")
endif()
