# layers: every layer target preprocesses one header of every layer with the include directories
# its own sources get; a header of a layer it may use must be found, any other must not be.
# The table is the layers' "may include" rule; the build's links must give exactly it.
# peer: the pair-exchange extension's shared type, seen by parallel and backend (and what uses them).
set(layer_headers core/error.hpp config/run_config.hpp peer/peer_release.hpp parallel/comm.hpp
    backend/backend.hpp model/gpt.hpp train/trainer.hpp io/checkpoint.hpp)
set(layer_rules
    "trident_core:core"
    "trident_config:core,config"
    "trident_parallel:core,peer,parallel"
    "trident_backend:core,peer,backend"
    "trident_model:core,config,peer,parallel,backend,model"
    "trident_train:core,config,peer,parallel,backend,model,train"
    "trident_io:core,config,peer,parallel,backend,model,train,io")
if(TRIDENT_HAVE_CUDA)
  list(APPEND layer_headers gpu/profiler.hpp)
  list(APPEND layer_rules "trident_gpu:core,gpu" "trident_cuda:core,peer,backend,gpu"
       "trident_parallel_nccl:core,peer,parallel,gpu")
endif()

set(layer_cases "")
foreach(rule ${layer_rules})
  string(REPLACE ":" ";" parts "${rule}")
  list(GET parts 0 target)
  list(GET parts 1 allowed)
  string(REPLACE "," ";" allowed "${allowed}")
  # The include directories the target's sources are compiled with, one per line.
  file(GENERATE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/layers/${target}.dirs
       CONTENT "$<JOIN:$<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>,\n>\n")
  foreach(header ${layer_headers})
    string(REGEX REPLACE "/.*" "" folder "${header}")
    if(folder IN_LIST allowed)
      list(APPEND layer_cases "${target}:${header}:found")
    else()
      list(APPEND layer_cases "${target}:${header}:missing")
    endif()
  endforeach()
endforeach()
if(TRIDENT_HAVE_CUDA)
  # The CUDA runtime stays inside the backend and the NCCL communicator: apps asks cuda_backend.hpp.
  file(GENERATE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/layers/trident_apps.dirs
       CONTENT "$<JOIN:$<TARGET_PROPERTY:trident_apps,INCLUDE_DIRECTORIES>,\n>\n")
  list(APPEND layer_cases "trident_apps:<cuda_runtime.h>:missing" "trident_cuda:<cuda_runtime.h>:found"
       "trident_parallel_nccl:<cuda_runtime.h>:found")
endif()
string(REPLACE ";" "\n" layer_cases "${layer_cases}")
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/layers/cases.txt "${layer_cases}\n")

add_test(NAME layers COMMAND ${CMAKE_COMMAND} -DCXX=${CMAKE_CXX_COMPILER}
         -DDIR=${CMAKE_CURRENT_BINARY_DIR}/layers -P ${CMAKE_CURRENT_SOURCE_DIR}/layers/check_layers.cmake)
set_tests_properties(layers PROPERTIES LABELS unit)

# layers_mpi: MPI is called only through the parallel layer's checked helpers: no MPI_ function
# call and no ParallelGroups::mpi in core, config, backend, model, train, io or apps, sources or
# headers; parallel_io_comm (HDF5's MPI-IO driver) in io alone.
add_test(NAME layers_mpi COMMAND ${CMAKE_COMMAND} -DROOT=${CMAKE_SOURCE_DIR}
         -P ${CMAKE_CURRENT_SOURCE_DIR}/layers/check_no_mpi.cmake)
set_tests_properties(layers_mpi PROPERTIES LABELS unit)
