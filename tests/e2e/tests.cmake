# End-to-end runs of the trident binary on the fortunes corpus (prepared by `make data`).
set(e2e_dir ${CMAKE_CURRENT_SOURCE_DIR}/e2e)
set(repo_root ${CMAKE_SOURCE_DIR})
set(mpirun ${MPIEXEC_EXECUTABLE} ${TRIDENT_MPIEXEC_FLAGS})

add_test(NAME e2e_tiny_trains COMMAND ${e2e_dir}/train_tiny.sh $<TARGET_FILE:trident> ${repo_root}
         ${mpirun} -np 1)
add_test(NAME e2e_step_reports COMMAND ${e2e_dir}/step_reports.sh $<TARGET_FILE:trident> ${repo_root}
         ${mpirun} -np 1)
add_test(NAME e2e_run_length COMMAND ${e2e_dir}/run_length.sh $<TARGET_FILE:trident> ${repo_root} ${mpirun} -np 1)
set_tests_properties(e2e_run_length PROPERTIES LABELS e2e ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME e2e_tensorboard COMMAND ${e2e_dir}/tensorboard.sh $<TARGET_FILE:trident> ${repo_root} ${mpirun} -np 1)
set_tests_properties(e2e_tensorboard PROPERTIES LABELS e2e ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME mpi_memory_monitor COMMAND ${e2e_dir}/memory_monitor.sh $<TARGET_FILE:trident> ${repo_root} ${mpirun})
set_tests_properties(mpi_memory_monitor PROPERTIES LABELS mpi ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME e2e_bad_input COMMAND ${e2e_dir}/bad_input.sh $<TARGET_FILE:trident> ${repo_root})
add_test(NAME e2e_command_help COMMAND ${e2e_dir}/help.sh $<TARGET_FILE:trident>)
add_test(NAME e2e_model_presets COMMAND ${e2e_dir}/model_presets.sh $<TARGET_FILE:trident> ${repo_root})
set_tests_properties(e2e_model_presets PROPERTIES LABELS e2e)
add_test(NAME e2e_bench_cpu COMMAND ${e2e_dir}/bench_cpu.sh $<TARGET_FILE:trident> ${repo_root} ${mpirun})
add_test(NAME mpi_train_tp2_pp2_dp2 COMMAND ${MPIEXEC_EXECUTABLE} -np 8 ${TRIDENT_MPIEXEC_FLAGS}
         $<TARGET_FILE:trident> train --config ${repo_root}/inputs/models/tiny.cfg --backend cpu
         --data.train ${repo_root}/data/fortunes_byte --parallel.tp 2 --parallel.pp 2 --train.steps 20
         --model.seq_len 32 --train.micro_batch_size 2 --train.global_batch_size 8)
set_tests_properties(e2e_tiny_trains e2e_step_reports e2e_bad_input e2e_command_help e2e_bench_cpu PROPERTIES LABELS e2e)
set_tests_properties(mpi_train_tp2_pp2_dp2 PROPERTIES LABELS mpi)
set_tests_properties(e2e_tiny_trains e2e_step_reports e2e_bench_cpu mpi_train_tp2_pp2_dp2
                     PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME e2e_sft_chat COMMAND ${e2e_dir}/sft_chat.sh $<TARGET_FILE:trident> ${repo_root} ${mpirun} -np 1)
set_tests_properties(e2e_sft_chat PROPERTIES LABELS e2e ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME e2e_sft_heldout COMMAND ${e2e_dir}/sft_heldout.sh $<TARGET_FILE:trident> ${repo_root} ${mpirun} -np 1)
set_tests_properties(e2e_sft_heldout PROPERTIES LABELS e2e ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME e2e_dpo_preference COMMAND ${e2e_dir}/dpo_preference.sh $<TARGET_FILE:trident> ${repo_root} ${mpirun} -np 1)
set_tests_properties(e2e_dpo_preference PROPERTIES LABELS e2e ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME e2e_dpo_precomputed COMMAND ${e2e_dir}/dpo_precomputed.sh $<TARGET_FILE:trident> ${repo_root} ${mpirun} -np 2)
set_tests_properties(e2e_dpo_precomputed PROPERTIES LABELS "e2e;mpi" ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME e2e_generate_eval COMMAND ${e2e_dir}/generate_eval.sh $<TARGET_FILE:trident> ${repo_root} ${mpirun})
set_tests_properties(e2e_generate_eval PROPERTIES LABELS e2e ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME e2e_generate_eval_llama COMMAND ${e2e_dir}/generate_eval.sh $<TARGET_FILE:trident> ${repo_root} ${mpirun})
set_tests_properties(e2e_generate_eval_llama PROPERTIES LABELS e2e ENVIRONMENT "OMP_NUM_THREADS=1;MODEL=llama-tiny")

# Fault injection: a rank that stalls or dies mid-save, through trident_test's hooks.
if(TRIDENT_TEST_HOOKS)
  add_test(NAME e2e_release_has_no_test_hooks COMMAND ${e2e_dir}/no_test_hooks.sh $<TARGET_FILE:trident>
           $<TARGET_FILE:trident_test>)
  set_tests_properties(e2e_release_has_no_test_hooks PROPERTIES LABELS e2e)
  add_test(NAME mpi_stalled_rank_times_out COMMAND ${e2e_dir}/stalled_rank.sh $<TARGET_FILE:trident_test>
           ${repo_root} ${mpirun} -np 2)
  add_test(NAME mpi_checkpoint_faults COMMAND ${e2e_dir}/checkpoint_faults.sh $<TARGET_FILE:trident_test>
           ${repo_root} ${mpirun})
  add_test(NAME mpi_skipped_steps COMMAND ${e2e_dir}/skipped_steps.sh $<TARGET_FILE:trident_test> ${repo_root}
           ${mpirun})
  set_tests_properties(mpi_stalled_rank_times_out mpi_checkpoint_faults mpi_skipped_steps PROPERTIES LABELS mpi
                       ENVIRONMENT "OMP_NUM_THREADS=1")
endif()
add_test(NAME e2e_checkpoint_dirs COMMAND ${e2e_dir}/checkpoint_dirs.sh $<TARGET_FILE:trident> ${repo_root})
set_tests_properties(e2e_checkpoint_dirs PROPERTIES LABELS e2e ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME mpi_checkpoint_kill_loop COMMAND ${e2e_dir}/checkpoint_kill_loop.sh $<TARGET_FILE:trident> ${repo_root}
         ${mpirun})
set_tests_properties(mpi_checkpoint_kill_loop PROPERTIES LABELS mpi ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME mpi_bad_token_one_rank COMMAND ${e2e_dir}/bad_token_rank.sh $<TARGET_FILE:trident> ${repo_root} ${mpirun})
set_tests_properties(mpi_bad_token_one_rank PROPERTIES LABELS mpi ENVIRONMENT "OMP_NUM_THREADS=1")

# Hugging Face interchange: checkpoint -> HF -> checkpoint bitwise from two saved layouts, converted
# on 1, 3 and 4 ranks; train --init.from in two layouts; bad inputs of convert and init.from.
add_test(NAME mpi_hf_roundtrip COMMAND ${e2e_dir}/hf_roundtrip.sh $<TARGET_FILE:trident> ${repo_root} ${mpirun})
set_tests_properties(mpi_hf_roundtrip PROPERTIES LABELS mpi ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME e2e_hf_bad_input COMMAND ${e2e_dir}/hf_bad_input.sh $<TARGET_FILE:trident> ${repo_root})
set_tests_properties(e2e_hf_bad_input PROPERTIES LABELS e2e ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME e2e_reward_pairs COMMAND ${e2e_dir}/reward_pairs.sh $<TARGET_FILE:trident> ${repo_root} ${mpirun} -np 1)
set_tests_properties(e2e_reward_pairs PROPERTIES LABELS e2e ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME e2e_chat_template_hf COMMAND ${e2e_dir}/chat_template_hf.sh $<TARGET_FILE:trident> ${repo_root})
set_tests_properties(e2e_chat_template_hf PROPERTIES LABELS e2e)
add_test(NAME e2e_grpo COMMAND ${e2e_dir}/grpo.sh $<TARGET_FILE:trident> ${repo_root} ${mpirun} -np 2)
set_tests_properties(e2e_grpo PROPERTIES LABELS "e2e;mpi" ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME e2e_ppo COMMAND ${e2e_dir}/ppo.sh $<TARGET_FILE:trident> ${repo_root} ${mpirun} -np 2)
set_tests_properties(e2e_ppo PROPERTIES LABELS "e2e;mpi" ENVIRONMENT "OMP_NUM_THREADS=1")
