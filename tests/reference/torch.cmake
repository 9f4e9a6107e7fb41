# The CPU model against a PyTorch GPT-2 on the same weights and tokens.
add_executable(dump_reference reference/dump_reference.cpp)
target_link_libraries(dump_reference PRIVATE trident_test_support nlohmann_json::nlohmann_json)
if(TRIDENT_HAVE_CUDA)
  target_link_libraries(dump_reference PRIVATE trident_cuda)
  target_compile_definitions(dump_reference PRIVATE TRIDENT_HAVE_CUDA=1)
endif()
add_test(NAME reference_vs_torch
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/reference/run_torch_check.sh $<TARGET_FILE:dump_reference>
                 ${CMAKE_CURRENT_SOURCE_DIR}/reference/check_vs_torch.py)
set_tests_properties(reference_vs_torch PROPERTIES LABELS reference ENVIRONMENT OMP_NUM_THREADS=2)
# The CPU backend's Llama ops (one decoder block, forward and every gradient) against a PyTorch
# block with Hugging Face Llama semantics.
add_executable(dump_llama_ops reference/dump_llama_ops.cpp)
target_link_libraries(dump_llama_ops PRIVATE trident_test_support nlohmann_json::nlohmann_json)
add_test(NAME reference_llama_ops_vs_torch
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/reference/run_torch_check.sh $<TARGET_FILE:dump_llama_ops>
                 ${CMAKE_CURRENT_SOURCE_DIR}/reference/check_llama_ops.py)
set_tests_properties(reference_llama_ops_vs_torch PROPERTIES LABELS reference ENVIRONMENT OMP_NUM_THREADS=2)
